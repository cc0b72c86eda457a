package webconf

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// memCopy is a sealed memfd, read by path through /proc/self/fd: only
// those who may trace this process (its user, root) can open it, nobody
// can write it, it is not inherited by children (close-on-exec), and it
// is gone when the process ends.
type memCopy struct{ fd int }

// haveMemCopy says whether newMemCopy can make a copy on this system
// (memfdRefused says whether the system allows it).
const haveMemCopy = true

// memfdCreate is unix.MemfdCreate; a test refuses it as a seccomp
// profile would.
var memfdCreate = unix.MemfdCreate

// memfdRefused is the error of memfd_create where the system refuses the
// call itself: a seccomp profile that does not allow it (EPERM, or ENOSYS
// where the profile answers so), a kernel without it (ENOSYS: before
// 3.17); nil where it makes one, or fails otherwise (that failure is the
// copy's own, and reported by it).
func memfdRefused() error {
	fd, err := memfdCreate("vgpu_exporter-probe", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	switch {
	case err == nil:
		unix.Close(fd)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("memfd_create: %w", err)
	}
	return nil
}

// newMemCopy returns a copy holding data, sealed against any change;
// name (the file it copies, shown as memfd:vgpu_exporter-NAME in
// /proc/PID/fd) is for a person reading that.
func newMemCopy(name string, data []byte) (*memCopy, error) {
	fd, err := memfdCreate("vgpu_exporter-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	c := &memCopy{fd: fd}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("writing the copy: %w", err)
		}
		rest = rest[n:]
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		c.close()
		return nil, fmt.Errorf("sealing the copy: %w", err)
	}
	// exporter-toolkit opens the copy by its path: without /proc it
	// would say only that a /proc/self/fd path does not exist.
	if err := unix.Access(c.path(), unix.R_OK); err != nil {
		c.close()
		return nil, fmt.Errorf("the private copy cannot be read at %s (is /proc mounted?): %w", c.path(), err)
	}
	return c, nil
}

// fdDir is where a process's descriptors are opened by path.
var fdDir = "/proc/self/fd/"

// path is where the copy is read: a request that opened it before a
// replace reads it whole, one that opens it after reads the new one.
func (c *memCopy) path() string { return fdDir + strconv.Itoa(c.fd) }

// replace puts next's content at c's path in one step (dup3) and
// releases next.
func (c *memCopy) replace(next *memCopy) error {
	err := unix.Dup3(next.fd, c.fd, unix.O_CLOEXEC)
	next.close()
	if err != nil {
		return fmt.Errorf("replacing the copy: %w", err)
	}
	return nil
}

// close releases the copy; nil does nothing.
func (c *memCopy) close() error {
	if c == nil {
		return nil
	}
	return unix.Close(c.fd)
}
