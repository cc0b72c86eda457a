package tuner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-kit/log/level"
)

// A journal's writes happen only as the tuner decides or restores: after
// a failed one (a full disk), nothing but the next decision would find
// out that the disk was freed, and a tuner with nothing to decide would go
// on saying that it cannot write (vgpu_tuner_journal_writable 0) long
// after the repair, or a counter of failed writes would stop growing while
// the disk is still full. Each round probes it instead while its last
// write failed.

// probeBytes is the size of a probe's write: one file system block.
const probeBytes = 4096

// Probe tests, while the journal's last write failed (Stats.WriteError
// set), whether it can be written now, as a record's write would find
// out: the file is opened for writing where it was opened read-only, and
// a block is written to a new file beside it (FILE.probe-RANDOM, never
// one that exists), synced and removed (the journal's own records are not
// touched; the next record mends what a failed write left). It clears
// WriteError when that succeeds and returns nil at once where the last
// write did not fail (an error after Close); on failure WriteError stays
// the last write's.
func (j *Journal) Probe() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usedAfterClose(); err != nil {
		return err
	}
	if j.stats.WriteError == "" {
		return nil
	}
	err := j.writable()
	if err == nil {
		err = j.relinkLocked()
	}
	if err == nil {
		err = probeWrite(j.path)
	}
	if err != nil {
		return fmt.Errorf("tuner journal %s: probing whether it can be written: %w", j.path, err)
	}
	j.stats.WriteError = ""
	return nil
}

// probeWrite writes a block to a file it creates beside the journal at
// path, syncs it and removes it. The file is a new one (O_EXCL, a random
// name): a fixed name would be opened, truncated and removed were it
// another's file, or a hard link to one.
func probeWrite(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	b := make([]byte, probeBytes)
	for i := range b {
		b[i] = 'p' // (a block of zeros may take no space where the file system compresses)
	}
	if _, err = writeFile(f, b); err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// probeJournal probes the journal once a round while its last write
// failed (Journal.Probe): once it can be written, the tuner says so as
// after a write that succeeds, and its status serves it writable. It also
// logs a compaction that failed (noteCompaction).
func (t *Tuner) probeJournal() {
	if t.o.Journal == nil {
		return
	}
	t.relinkJournal()
	st := t.o.Journal.Stats()
	t.noteCompaction(st.CompactError)
	if st.WriteError == "" {
		return
	}
	if err := t.o.Journal.Probe(); err != nil {
		level.Debug(t.o.Logger).Log("msg", "tuner journal still cannot be written", "err", err)
		return
	}
	// (one opened unwritable, on a read-only file system, has had no
	// write fail yet: it is said writable again all the same)
	t.journalWritableAgain()
}

// noteCompaction logs a compaction of the journal that failed once, until
// one succeeds (e, the journal's CompactError, ""): the records are still
// written (a write that fails says so as every write does), the tuner
// acts, and the file grows meanwhile.
func (t *Tuner) noteCompaction(e string) {
	switch {
	case !changed(&t.compactErr, e):
		return
	case e != "":
		level.Warn(t.o.Logger).Log("msg", "tuner journal compaction failed: records are still written, the file grows until a compaction succeeds", "err", e)
	default:
		level.Info(t.o.Logger).Log("msg", "tuner journal compacted again")
	}
}

// changed reports whether e differs from *last, the error text last
// logged, and keeps e there: what is logged once, until it changes.
func changed(last *string, e string) bool {
	if e == *last {
		return false
	}
	*last = e
	return true
}
