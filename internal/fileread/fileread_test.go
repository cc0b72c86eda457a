package fileread

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
