package tuner

import (
	"os"
	"syscall"
)

// A journal on a file system mounted read-only (a disk error remounts it
// so, or it is mounted so) is still one tuner's: it is locked as a
// writable one is (flock locks a file opened read-only as well; on NFS,
// where an exclusive lock needs a file opened for writing, it takes a
// shared one, which a writer's exclusive lock excludes all the same), so that a
// start finding it there refuses it while another process holds it (that
// process's tuner may be pausing a tenant right now, the same file seen
// through another mount), and acts on it, its thaws included, only while
// it holds the lock.

// openReadOnly opens the journal at path read-only, without blocking, and
// locks it (exclusive; shared on NFS, which locks a file opened read-only
// no other way: lockRegular): an error where another process holds it.
func openReadOnly(path string) (*os.File, error) {
	return openRegularLock(path, os.O_RDONLY, true)
}

// writable opens a journal opened read-only for writing (its torn tail is
// cut off by mend); an error, the read-only file and its lock kept, while
// its file system stays read-only. A lock belongs to the open file, not
// to the process: the file opened for writing is locked anew, so the
// read-only one is closed, its lock let go, only once the file system
// takes writes. Where another process takes the lock in between, the
// journal is left without a file and the write fails (as each later one
// does while that process holds it).
func (j *Journal) writable() error {
	if j.ro == nil {
		return nil
	}
	probe, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return err
	}
	probe.Close()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	f, err := openRegular(j.path)
	if err != nil {
		return err
	}
	j.f, j.ro, j.dirUnsynced = f, nil, true
	return nil
}
