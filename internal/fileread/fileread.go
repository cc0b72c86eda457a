// Package fileread reads what comes from outside the exporter (files it is
// pointed at, bodies of URLs it asks) within a size limit: a file must be a
// regular file, checked before it is opened and again once open without
// blocking, so that a FIFO, a device or a socket is refused before a byte
// is read; and no more than the limit and one byte is ever read, so that a
// source over the limit is refused having cost at most its limit. Errors
// name the file or URL. A file may also come from an fs.FS (OpenFS,
// RegularFS), such as the files embedded in the binary.
package fileread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is wrapped by the error of a file or body over its limit.
var ErrTooLarge = errors.New("larger than the limit")

// Check returns an error unless path (after symlinks) is a regular file of
// at most limit bytes. It reads nothing, so it does not block on a FIFO.
func Check(path string, limit int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err // "stat <path>: <reason>" names the file
	}
	return checkInfo(path, fi, limit)
}

// Regular reads path whole when it is a regular file of at most limit
// bytes. The file is opened without blocking and checked again once open,
// so a FIFO swapped in after the first check is refused too, and at most
// limit+1 bytes are ever read, whatever the file grows to meanwhile.
func Regular(path string, limit int64) ([]byte, error) {
	return RegularFS(nil, path, limit)
}

// Open opens path for a streaming read when it is a regular file of at
// most limit bytes (checked as Regular does). Reading past limit bytes (a
// file that grew since) fails with an error wrapping ErrTooLarge.
func Open(path string, limit int64) (io.ReadCloser, error) {
	if err := Check(path, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkInfo(path, fi, limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return limitedFile{Reader: Limit(f, limit, path), Closer: f}, nil
}

// OpenFS is Open for the file name of fsys (an embedded library, say):
// the file must be a regular file of at most limit bytes, checked before
// it is opened and again once open. A nil fsys is the operating system's
// files, name a path as Open takes it.
func OpenFS(fsys fs.FS, name string, limit int64) (io.ReadCloser, error) {
	if fsys == nil {
		return Open(name, limit)
	}
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err // names the file
	}
	if err := checkInfo(name, fi, limit); err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = checkInfo(name, fi, limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return limitedFile{Reader: Limit(f, limit, name), Closer: f}, nil
}

// RegularFS is Regular for the file name of fsys (OpenFS).
func RegularFS(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := OpenFS(fsys, name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return All(f, limit, name)
}

type limitedFile struct {
	io.Reader
	io.Closer
}

// All reads r (a body, a file) to its end when it holds at most limit
// bytes; otherwise it stops after limit+1 bytes with an error naming name
// and wrapping ErrTooLarge.
func All(r io.Reader, limit int64, name string) ([]byte, error) {
	data, err := io.ReadAll(Limit(r, limit, name))
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, nil
}

// Limit returns a reader of r that returns r's bytes up to limit, and an
// error naming name and wrapping ErrTooLarge as soon as r holds more: for
// parsers that read a stream as it comes. It reads at most limit+1 bytes
// of r.
func Limit(r io.Reader, limit int64, name string) io.Reader {
	return &limited{r: io.LimitReader(r, limit+1), left: limit, limit: limit, name: name}
}

type limited struct {
	r     io.Reader
	left  int64 // bytes still allowed
	limit int64
	name  string
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, tooLarge(l.name, l.limit)
	}
	n, err := l.r.Read(p)
	if int64(n) > l.left {
		n = int(l.left)
		l.left = -1
		return n, tooLarge(l.name, l.limit)
	}
	l.left -= int64(n)
	return n, err
}

func checkInfo(path string, fi fs.FileInfo, limit int64) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case !m.IsRegular():
		return fmt.Errorf("%s is not a regular file (%s); refusing to read it, as a read could block or never end", path, Kind(m))
	case fi.Size() > limit:
		return tooLarge(path, limit)
	}
	return nil
}

func tooLarge(name string, limit int64) error {
	return fmt.Errorf("%s is %w of %d bytes", name, ErrTooLarge, limit)
}

// Kind names in words the type of a file that is no regular file: "a
// named pipe", "a directory"...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.Type().String()
	}
}
