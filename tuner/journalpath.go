package tuner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// journalTarget is the file that path names through its symbolic links
// (as many as the kernel follows, 40), whether that file exists yet or
// not: the journal is compacted by renaming a new file over it, which over
// a link would replace the link with a regular file beside it, leaving the
// linked file (on a persistent volume, say) stale, its originals open. A
// path that is not a link, or a link that cannot be read, is path itself.
func journalTarget(path string) string {
	for range 40 {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path
		}
		to, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return path
}

// syncDir syncs a directory, so that a file created or renamed in it is
// durable (tests replace it).
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncDirectory syncs the directory of the file at path. A file system
// that cannot sync a directory at all (EINVAL, EOPNOTSUPP: some FUSE and
// network file systems) has nothing to sync there, and is not taken as a
// write that failed: it would keep the tuner from acting for good.
func syncDirectory(path string) error {
	err := syncDir(filepath.Dir(path))
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil
	}
	return err
}
