package tuner

import (
	"io/fs"
	"os"
	"path/filepath"
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
