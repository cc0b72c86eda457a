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

// memfdCreate is unix.MemfdCreate; a test refuses it as the system
// would.
var memfdCreate = unix.MemfdCreate

// createMemfd makes a memfd that allows sealing, close-on-exec and, where
// the kernel knows the flag (6.3 on), never executable
// (MFD_NOEXEC_SEAL): with vm.memfd_noexec=2 the kernel refuses, EACCES,
// a call without it. A kernel before 6.3 answers the flag EINVAL: the
// call is made again without it.
func createMemfd(name string) (int, error) {
	fd, err := memfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = memfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	return fd, nil
}

// memfdRefused is the error of memfd_create, with its likely cause, where
// the system refuses the call itself: a seccomp profile that does not
// allow it (EPERM, or ENOSYS where the profile answers so), a security
// module's policy (EACCES: SELinux, AppArmor; not vm.memfd_noexec=2,
// which refuses only a call without MFD_NOEXEC_SEAL, and came with the
// flag in 6.3: createMemfd passes it wherever the sysctl exists), a
// kernel without it (ENOSYS: before 3.17); nil where it makes one, or
// fails otherwise (that failure is the copy's own, and reported by it).
func memfdRefused() error {
	fd, err := createMemfd("vgpu_exporter-probe")
	switch {
	case err == nil:
		unix.Close(fd)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w (a seccomp profile that does not allow the call)", err)
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w (a security module's policy, such as SELinux's or AppArmor's)", err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w (a kernel before 3.17, or a seccomp profile answering so)", err)
	}
	return nil
}

// newMemCopy returns a copy holding data, sealed against any change;
// name (the file it copies, shown as memfd:vgpu_exporter-NAME in
// /proc/PID/fd) is for a person reading that.
func newMemCopy(name string, data []byte) (*memCopy, error) {
	c, err := makeMemCopy(name, data)
	if err != nil {
		return nil, copyError{err}
	}
	return c, nil
}

// makeMemCopy is newMemCopy, its errors not marked as copyError.
func makeMemCopy(name string, data []byte) (*memCopy, error) {
	fd, err := createMemfd("vgpu_exporter-" + name)
	if err != nil {
		return nil, err
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
		return copyError{fmt.Errorf("replacing the copy: %w", err)}
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
