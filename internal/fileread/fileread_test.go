package fileread

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

func TestRegular(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	big := filepath.Join(dir, "big.yaml")
	fifo := filepath.Join(dir, "fifo")
	link := filepath.Join(dir, "link.yaml")
	if err := os.WriteFile(small, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 101), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string // "" = reads
	}{
		{small, ""},
		{big, "larger than the limit of 100 bytes"},
		{link, "larger than the limit of 100 bytes"},
		{fifo, "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		// Check and Regular agree, and neither blocks on the FIFO.
		for name, f := range map[string]func() error{
			"Check":   func() error { return Check(tc.path, 100) },
			"Regular": func() error { _, err := Regular(tc.path, 100); return err },
		} {
			err := f()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s(%s): %v", name, tc.path, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path)):
				t.Errorf("%s(%s): %v, want an error naming the file with %q", name, tc.path, err, tc.want)
			}
		}
	}
	if data, err := Regular(small, 100); err != nil || string(data) != "a: 1\n" {
		t.Errorf("Regular(small) = %q, %v", data, err)
	}
}

// RegularFS reads a file of an fs.FS as Regular reads one on disk: within
// the limit, a regular file only, errors naming it; a nil fs.FS is the
// operating system's files.
func TestRegularFS(t *testing.T) {
	lib := fstest.MapFS{
		"lib/small.yaml": {Data: []byte("a: 1\n")},
		"lib/big.yaml":   {Data: make([]byte, 101)},
		"lib/fifo":       {Mode: fs.ModeNamedPipe},
	}
	for _, tc := range []struct {
		name string
		want string // "" = reads
	}{
		{"lib/small.yaml", ""},
		{"lib/big.yaml", "larger than the limit of 100 bytes"},
		{"lib/fifo", "not a regular file (a named pipe)"},
		{"lib", "is a directory"},
		{"lib/missing", "file does not exist"},
		{"../lib/small.yaml", "file does not exist"},
	} {
		data, err := RegularFS(lib, tc.name, 100)
		switch {
		case tc.want == "" && (err != nil || string(data) != "a: 1\n"):
			t.Errorf("RegularFS(%s) = %q, %v", tc.name, data, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name)):
			t.Errorf("RegularFS(%s): %v, want an error naming the file with %q", tc.name, err, tc.want)
		}
	}
	small := filepath.Join(t.TempDir(), "small.yaml")
	if err := os.WriteFile(small, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := RegularFS(nil, small, 100); err != nil || string(data) != "a: 1\n" {
		t.Errorf("RegularFS(nil, %s) = %q, %v", small, data, err)
	}
}

// A body or stream over its limit is refused having read at most the limit
// and one byte, with an error naming it; at the limit it reads whole.
func TestAllAndLimit(t *testing.T) {
	for _, tc := range []struct {
		n, limit int
		ok       bool
	}{{0, 10, true}, {10, 10, true}, {11, 10, false}, {1 << 20, 10, false}} {
		src := &countingReader{left: tc.n}
		data, err := All(src, int64(tc.limit), "http://x/metrics")
		if tc.ok != (err == nil) || (err == nil && len(data) != tc.n) {
			t.Errorf("All(%d bytes, limit %d) = %d bytes, %v", tc.n, tc.limit, len(data), err)
		}
		if err != nil && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "http://x/metrics is larger than the limit of 10 bytes")) {
			t.Errorf("error %q, want ErrTooLarge naming the source", err)
		}
		if src.read > tc.limit+1 {
			t.Errorf("read %d bytes for a limit of %d", src.read, tc.limit)
		}
		// Limit hands a streaming reader the bytes up to the limit, then
		// the error, every time it is asked again.
		lr := Limit(&countingReader{left: tc.n}, int64(tc.limit), "s")
		got, err := io.ReadAll(lr)
		if tc.ok != (err == nil) || len(got) != min(tc.n, tc.limit) {
			t.Errorf("Limit(%d bytes, limit %d): %d bytes, %v", tc.n, tc.limit, len(got), err)
		}
		if _, err2 := lr.Read(make([]byte, 4)); !tc.ok && !errors.Is(err2, ErrTooLarge) {
			t.Errorf("a read after the limit: %v", err2)
		}
	}
}

// Open refuses what Regular refuses, and a file that grows past the limit
// after the check fails the read.
func TestOpenGrows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(p, []byte("123456789012"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(f); !errors.Is(err, ErrTooLarge) {
		t.Errorf("reading a file grown past the limit: %v", err)
	}
	if _, err := Open("/dev/zero", 8); err == nil || !strings.Contains(err.Error(), "character device") {
		t.Errorf("Open(/dev/zero): %v", err)
	}
}

type countingReader struct{ left, read int }

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	c.left -= n
	c.read += n
	return n, nil
}
