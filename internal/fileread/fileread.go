// Package fileread reads configuration files whole, refusing what could
// block the process (FIFOs, devices, sockets) or balloon its memory (a file
// over a size limit), with errors that name the file.
package fileread

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

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
	if err := Check(path, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func checkInfo(path string, fi fs.FileInfo, limit int64) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case !m.IsRegular():
		return fmt.Errorf("%s is not a regular file (%s); refusing to read it, as a read could block or never end", path, kind(m))
	case fi.Size() > limit:
		return tooLarge(path, limit)
	}
	return nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s is larger than the limit of %d bytes", path, limit)
}

// kind names a non-regular file type.
func kind(m fs.FileMode) string {
	switch {
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
