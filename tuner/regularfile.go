package tuner

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// The journal's file, as the node lock's, is a regular file of its own:
// what is not one is refused before it is opened (irregular) and, where
// it was put there in between, once opened (notRegular).

// irregular is the type of what path names where it is there and no
// regular file, found by stat (os.Stat follows a symbolic link, os.Lstat
// does not) before path is opened: opening a device can act (a
// watchdog's arms it), a FIFO's open wakes its reader. false where it is
// a regular file or cannot be stat'ed (its open says why).
func irregular(path string, stat func(string) (fs.FileInfo, error)) (fs.FileMode, bool) {
	fi, err := stat(path)
	if err != nil || fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Mode().Type(), true
}

// notRegular is the refusal of path, a file of type m, named in words.
func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("%s is not a regular file (%s)", path, fileread.Kind(m))
}

// openRegular opens path for appending without blocking and refuses
// anything but a regular file.
func openRegular(path string) (*os.File, error) {
	return openRegularFlag(path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
}

// openRegularFlag opens path with flag without blocking, refuses
// anything but a regular file and, opened for writing, locks it (flock,
// exclusive): a journal has one writer, and a second one, which would
// compact the file from under the first, is refused. (A journal on a
// read-only file system is locked too: openReadOnly.)
func openRegularFlag(path string, flag int) (*os.File, error) {
	return openRegularLock(path, flag, flag&(os.O_WRONLY|os.O_RDWR) != 0)
}

// openRegularLock is openRegularFlag, locking the file with lock.
func openRegularLock(path string, flag int, lock bool) (*os.File, error) {
	if m, ok := irregular(path, os.Stat); ok {
		return nil, notRegular(path, m)
	}
	for range 3 { // a compaction may replace the file between the open and the lock
		f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			return nil, err
		}
		same, err := lockRegular(f, path, lock)
		if err != nil {
			f.Close()
			return nil, err
		}
		if same {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%s is replaced as it is opened (another process compacts it)", path)
}

// flock is syscall.Flock (tests replace it).
var flock = syscall.Flock

// lockRegular checks that f, opened from path, is a regular file and,
// with lock, locks it; same is whether path still names f once it is
// locked.
func lockRegular(f *os.File, path string, lock bool) (same bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, notRegular(path, fi.Mode().Type())
	}
	if !lock {
		return true, nil
	}
	err = flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EBADF) {
		// NFS: an exclusive lock needs a file opened for writing; a shared
		// one on a file opened read-only still excludes a writer's
		err = flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	}
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, fmt.Errorf("%s is in use by another process (the tuner of another exporter?): a journal has one writer", path)
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP):
		// a file system without locks (NFS without its lock service):
		// the journal is used unlocked
	case err != nil:
		return false, fmt.Errorf("locking %s: %w", path, err)
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(fi, now), nil
}

// createTemp creates the compaction's file beside the journal at path: a
// new one of its own (FILE.tmp-RANDOM, O_EXCL), locked, so that no file
// there already (another exporter's, being written; a link or a hard link
// planted there; what a crash left) is opened, written or removed.
func createTemp(path string) (*os.File, error) {
	for range 100 {
		tmp := fmt.Sprintf("%s.tmp-%d", path, rand.Uint32())
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := lockRegular(f, tmp, true); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("no name free for a new file beside %s (FILE.tmp-RANDOM)", path)
}

// renameNoReplace renames from to to where nothing is at to, atomically:
// an error (fs.ErrExist) where something is, left as it is. A file system
// without a rename that does not replace (NFS; one that refuses the flag,
// EINVAL or EPERM) makes a hard link at to, which fails the same way, and
// removes from; one without hard links either (ENOSYS, EPERM, EOPNOTSUPP,
// or EMLINK: no more links to the file) renames (what is at to, put there
// in between, is replaced).
func renameNoReplace(from, to string) error {
	err := renameat2NoReplace(from, to)
	if err == nil {
		return nil
	}
	if !unsupported(err, syscall.EINVAL, syscall.EPERM) {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	if err := linkFile(from, to); err != nil {
		if !unsupported(err, syscall.EPERM, syscall.EMLINK) {
			return err
		}
		return os.Rename(from, to)
	}
	// the file is at to; where from cannot be removed, it keeps a second
	// name, FILE.tmp-N, which no start removes while it names the journal
	// in use (the journal's lock, held, keeps removeLeftoverTemps off it):
	// harmless, nothing reads it, removed by a start once a compaction has
	// put another file at the path
	_ = os.Remove(from)
	return nil
}

// unsupported reports whether err says the file system lacks the call
// (ENOSYS, EOPNOTSUPP) or is one of also.
func unsupported(err error, also ...syscall.Errno) bool {
	for _, e := range append(also, syscall.ENOSYS, syscall.EOPNOTSUPP) {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// linkFile is os.Link (tests replace it, to have the file system refuse
// hard links).
var linkFile = os.Link
