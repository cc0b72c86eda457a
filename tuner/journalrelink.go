package tuner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// The journal is written through the file opened at start: a path removed
// or replaced while the exporter runs (a cleanup of its directory, a
// backup renamed over it, a mv) leaves every record going to a file no
// name reaches, and a crash then leaves every original unread at the next
// start, the GPUs changed. Each round and each write therefore check that
// the path still names the file written and, where not, write it again
// from the originals held (a compaction).

// Relink checks that the journal's path still names the file it writes
// and, where it does not, rewrites the path from the originals held:
// replaced says it was rewritten, here or by a write since the last
// Relink. An error (a directory put in its place,
// a file another process holds) is set as the write error, so that the
// tuner does not act while its originals reach no file that a start reads.
func (j *Journal) Relink() (replaced bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	replaced, err = j.relinkLocked()
	if err != nil {
		j.stats.WriteError = err.Error()
	}
	replaced = replaced || j.relinkUnsaid
	j.relinkUnsaid = false
	return replaced, err
}

// relinkLocked is Relink, j.mu held, the write error left as it is.
func (j *Journal) relinkLocked() (replaced bool, err error) {
	if err := j.usedAfterClose(); err != nil {
		return false, err
	}
	if j.ro != nil || j.f == nil {
		return false, nil // nothing written through it yet
	}
	open, err := j.f.Stat()
	if err != nil {
		return false, fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	now, err := os.Stat(j.path) // (a link to the file written is the file)
	if err == nil && os.SameFile(open, now) {
		return false, nil
	}
	what := "removed"
	switch fi, lerr := os.Lstat(j.path); {
	case lerr == nil && fi.Mode().IsRegular():
		what = "replaced by another file"
		// another exporter's journal since: not written over while it
		// holds it; and held locked here until it is written over, so
		// that no exporter started meanwhile takes it and loses it
		f, err := openRegularLock(j.path, os.O_RDONLY, true)
		if err != nil {
			return false, fmt.Errorf("tuner journal %s was %s while in use: %w", j.path, what, err)
		}
		defer f.Close()
	case lerr == nil:
		what = "replaced by " + fileread.Kind(fi.Mode().Type())
	case !errors.Is(lerr, fs.ErrNotExist):
		return false, fmt.Errorf("tuner journal %s: checking that it is still the file written: %w", j.path, lerr)
	}
	install := os.Rename
	if what == "removed" {
		// written where the path is still free: a journal another
		// exporter created there meanwhile (the path free for it too) is
		// not replaced, and this one stops acting
		install = renameNoReplace
	}
	if err := j.rewriteLocked(install); err != nil {
		if errors.Is(err, fs.ErrExist) && what == "removed" {
			return false, fmt.Errorf("tuner journal %s was removed while in use, and another file was put there as it was written again: not written over (%w)", j.path, err)
		}
		return false, fmt.Errorf("tuner journal %s was %s while in use, and cannot be written again from the %d originals held: %w", j.path, what, len(j.open), err)
	}
	return true, nil
}

// relinkJournal checks the journal's path each round (Journal.Relink) and
// says what it found.
func (t *Tuner) relinkJournal() {
	if t.o.Journal == nil {
		return
	}
	replaced, err := t.o.Journal.Relink()
	e := ""
	if err != nil {
		e = err.Error()
	}
	said := e == t.relinkErr
	t.relinkErr = e
	switch {
	case err != nil && !said: // (once, until it changes)
		level.Error(t.o.Logger).Log("msg", "tuner journal cannot be written where a start reads it: the tuner does not act until it can", "err", err)
	case replaced:
		level.Warn(t.o.Logger).Log("msg", "tuner journal was removed or replaced while in use: written again from the originals held", "path", t.o.Journal.Path(), "originals", len(t.o.Journal.Originals()))
	}
}
