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

// Relinked is what Relink found and did.
type Relinked struct {
	// Replaced: the path was written again, here or by a write since the
	// last Relink.
	Replaced bool
	// Kept counts the originals read from a journal put at the path that
	// this one did not hold, kept in it since; Dropped the records of
	// what was put there dropped as unreadable (Stats.Dropped counts them
	// too).
	Kept, Dropped int
	// Originals are the originals kept (Kept of them): the tuner adopts
	// them (relinkJournal), to set back at exit as its own.
	Originals []Original
}

// Relink checks that the journal's path still names the file it writes
// and, where it does not, rewrites the path from the originals held (with
// those of a journal put there: relinkLocked), saying what it did, here
// or by a write since the last Relink. An error (a directory put in its
// place, a file another process holds, one that is not a journal) is set
// as the write error, so that the tuner does not act while its originals
// reach no file that a start reads.
func (j *Journal) Relink() (Relinked, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.relinkLocked(); err != nil {
		j.stats.WriteError = err.Error()
		return Relinked{}, err // (what was done is said once it succeeds)
	}
	return j.takeRelinkedLocked(), nil
}

// takeRelinked returns what the writes' relinks did since the last Relink
// or takeRelinked (checking nothing), and forgets it.
func (j *Journal) takeRelinked() Relinked {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.takeRelinkedLocked()
}

// takeRelinkedLocked is takeRelinked, j.mu held.
func (j *Journal) takeRelinkedLocked() Relinked {
	r := j.relinked
	j.relinked = Relinked{}
	return r
}

// relinkLocked is Relink, j.mu held, the write error left as it is.
func (j *Journal) relinkLocked() (err error) {
	if err := j.usedAfterClose(); err != nil {
		return err
	}
	if j.ro != nil || j.f == nil {
		return nil // nothing written through it yet
	}
	open, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	now, err := os.Stat(j.path) // (a link to the file written is the file)
	if err == nil && os.SameFile(open, now) {
		return nil
	}
	what := "removed"
	var put *Journal // what was put at the path, read
	switch fi, lerr := os.Lstat(j.path); {
	case lerr == nil && fi.Mode().IsRegular():
		what = "replaced by another file"
		if j.foreign.same(fi) {
			return j.foreign.err // (found not a journal: unchanged since)
		}
		j.foreign = nil
		// another exporter's journal since: not written over while it
		// holds it; and held locked here until it is written over, so
		// that no exporter started meanwhile takes it and loses it
		f, err := openRegularLock(j.path, os.O_RDONLY, true)
		if err != nil {
			return fmt.Errorf("tuner journal %s was %s while in use: %w", j.path, what, err)
		}
		defer f.Close()
		// a journal put there on purpose: its originals are kept; a
		// file that is not one is left as it is
		if put, err = readPut(f, j.path); err != nil {
			err = fmt.Errorf("tuner journal %s was %s while in use, not written over: %w", j.path, what, err)
			if errors.As(err, new(notJournalError)) {
				j.foreign = &foreignFile{fi: fi, err: err}
			}
			return err
		}
	case lerr == nil:
		what = "replaced by " + fileread.Kind(fi.Mode().Type())
	case !errors.Is(lerr, fs.ErrNotExist):
		return fmt.Errorf("tuner journal %s: checking that it is still the file written: %w", j.path, lerr)
	}
	install := os.Rename
	if what == "removed" {
		// written where the path is still free: a journal another
		// exporter created there meanwhile (the path free for it too) is
		// not replaced, and this one stops acting
		install = renameNoReplace
	}
	kept := j.keepOriginals(put)
	compactions := j.stats.Compactions
	err = j.rewriteLocked(install)
	if j.stats.Compactions == compactions { // not written at the path
		for _, k := range kept {
			delete(j.open, k) // (still in the file put there)
		}
		if errors.Is(err, fs.ErrExist) && what == "removed" {
			return fmt.Errorf("tuner journal %s was removed while in use, and another file was put there as it was written again: not written over (%w)", j.path, err)
		}
	} else { // written at the path
		if put != nil {
			for why, n := range put.stats.Dropped {
				j.stats.Dropped[why] += n
				j.relinked.Dropped += n
			}
			j.relinked.Kept += len(kept)
			for _, k := range kept {
				j.relinked.Originals = append(j.relinked.Originals, j.open[k])
			}
		}
		j.relinked.Replaced = true
	}
	if err != nil {
		// (where written at the path, its directory not synced: tried
		// again before the next record)
		return fmt.Errorf("tuner journal %s was %s while in use, and cannot be written again from the %d originals held: %w", j.path, what, len(j.open), err)
	}
	return nil
}

// readPut reads f, a file put at the journal's path, as a journal: an
// error where it is not one (notJournal) or cannot be read.
func readPut(f *os.File, path string) (*Journal, error) {
	put := newJournal(f, path, DefaultJournalMaxBytes)
	if err := put.load(); err != nil {
		return nil, err
	}
	return put, nil
}

// keepOriginals adds the open originals of put (nil: none) that j does
// not hold to j's, and returns their keys: a target both hold keeps j's,
// the one this process acts on and restores.
func (j *Journal) keepOriginals(put *Journal) (kept []string) {
	if put == nil {
		return nil
	}
	for k, o := range put.open {
		if _, ok := j.open[k]; !ok {
			j.open[k] = o
			kept = append(kept, k)
		}
	}
	return kept
}

// relinkJournal checks the journal's path each round, and at the start
// and the end of the restore at exit (Journal.Relink), and says what it
// found (relinked).
func (t *Tuner) relinkJournal() {
	if t.o.Journal == nil {
		return
	}
	r, err := t.o.Journal.Relink()
	if errors.Is(err, ErrJournalClosed) {
		return // (closed by the exit: a round that ends after it, noteJournal says so)
	}
	e := ""
	if err != nil {
		e = err.Error()
	}
	if changed(&t.relinkErr, e) && err != nil { // (once, until it changes)
		level.Error(t.o.Logger).Log("msg", "tuner journal cannot be written where a start reads it: the tuner does not act until it can", "err", err)
	}
	t.relinked(r)
}

// relinked adopts the originals a relink kept from a journal put at the
// path as those of the journal at start are (New): set back (a pause
// thawed) at exit, shown in the status, and kept by a later change of
// their target (keepOriginal keeps the first); and logs what it did. The
// journal's writes relink too (Journal.Append): what they kept is adopted
// after each (Tuner.journal), so that no change of the target keeps
// another value meanwhile. Once the restore at exit has begun, what is
// adopted is not set back at this exit: kept for the next start.
func (t *Tuner) relinked(r Relinked) {
	for _, o := range r.Originals {
		t.adoptOriginal(o, t.o.Clock.Now())
	}
	n := len(t.o.Journal.Originals())
	switch {
	case r.Kept > 0 && t.exiting:
		level.Warn(t.o.Logger).Log("msg", "tuner journal was replaced during the restore at exit by a journal holding originals this process did not hold: written again with them beside its own, kept for the next start", "path", t.o.Journal.Path(), "kept", r.Kept, "dropped", r.Dropped, "originals", n)
	case r.Kept > 0:
		level.Warn(t.o.Logger).Log("msg", "tuner journal was replaced while in use by a journal holding originals this process did not hold: written again with them beside its own, and set back at exit as this run's own", "path", t.o.Journal.Path(), "kept", r.Kept, "dropped", r.Dropped, "originals", n)
	case r.Replaced:
		level.Warn(t.o.Logger).Log("msg", "tuner journal was removed or replaced while in use: written again from the originals held", "path", t.o.Journal.Path(), "originals", n, "dropped", r.Dropped)
	}
}
