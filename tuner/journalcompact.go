package tuner

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// setRecord is the applied record of the value last set on o's target,
// at SetAt, which a compaction writes and an MPS client's successor's
// original begins with; false where none is known.
func (o Original) setRecord() (Record, bool) {
	if o.Set == nil {
		return Record{}, false
	}
	return Record{Time: o.SetAt, Event: string(OutcomeApplied), Target: o.Target, Tenant: o.Tenant, To: encodeValue(o.Set)}, true
}

// Compact rewrites the journal to its open originals and the slow loop's
// records still needed.
func (j *Journal) Compact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usedAfterClose(); err != nil {
		return err
	}
	return j.compactLocked()
}

// createTempFile is createTemp (tests replace it, to fail a compaction).
var createTempFile = createTemp

// beforeRename runs as a compaction is about to rename its file, tmp,
// over path (tests replace it, to act there as another process would).
var beforeRename = func(tmp, path string) {}

// compactLocked writes the open originals, and the slow loop's records
// still needed (slowLoopRecords.kept), to a new file of its own next
// to the journal (createTemp; locked as the journal is), syncs it, renames it over the
// journal and syncs the directory; a crash at any point leaves either the
// old journal or the new one. Once renamed, the new file is the journal,
// whatever follows; a directory sync that fails is tried again before the
// next record.
func (j *Journal) compactLocked() error { return j.rewriteLocked(os.Rename) }

// rewriteLocked is compactLocked, the new file put at the journal's path
// by install (os.Rename; renameNoReplace where the path must be free).
func (j *Journal) rewriteLocked(install func(from, to string) error) error {
	var recs []Record
	for _, o := range j.originalsLocked() {
		recs = append(recs, originalRecord(o))
		if rec, ok := o.setRecord(); ok {
			recs = append(recs, rec)
		}
		if r := o.Restart; r != nil {
			recs = append(recs, Record{Time: r.At, Event: EventRestarted, Target: o.Target, Tenant: o.Tenant, PIDs: r.Kin, Others: r.Others})
		}
	}
	slow := j.slow.kept()
	var buf []byte
	for _, rec := range append(recs, slow...) {
		b, err := encodeRecord(rec)
		if err != nil {
			return fmt.Errorf("tuner journal %s: compacting: %w", j.path, err)
		}
		buf = append(buf, b...)
	}
	f, err := createTempFile(j.path)
	if err != nil {
		return fmt.Errorf("tuner journal %s: compacting: %w", j.path, err)
	}
	tmp := f.Name()
	if _, err = f.Write(buf); err == nil {
		err = f.Sync()
	}
	if err == nil {
		beforeRename(tmp, j.path)
		err = install(tmp, j.path)
	}
	if err != nil {
		f.Close()
		_ = os.Remove(tmp) // its own: no other process writes or removes it
		return fmt.Errorf("tuner journal %s: compacting: %w", j.path, err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size, j.records, j.ro, j.torn = f, int64(len(buf)), len(j.open)+len(slow), nil, false
	j.stats.Size = j.size
	j.stats.Compactions++
	// Until the directory is synced the rename is not durable: a power
	// loss would bring the old file back, without the records written
	// after it. A sync that fails is tried again before the next record.
	if err := syncDirectory(j.path); err != nil {
		j.dirUnsynced = true
		return fmt.Errorf("tuner journal %s: compacting: syncing its directory: %w", j.path, err)
	}
	j.dirUnsynced, j.stats.CompactError = false, ""
	return nil
}

// removeLeftoverTemps removes, beside the journal at path, the files a
// compaction cut short by a crash left (FILE.tmp-N; FILE.tmp, of an
// earlier version): each one a regular file that no process holds locked
// (a live one, another exporter's being written, is left; a link is
// removed, never the file it names). Best effort: what cannot be removed
// stays, harmless (nothing reads it).
func removeLeftoverTemps(path string) {
	dir, base := filepath.Split(path)
	ents, err := os.ReadDir(cmp.Or(dir, "."))
	if err != nil {
		return
	}
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), base+".tmp")
		if !ok || n != "" && (len(n) < 2 || n[0] != '-' || strings.Trim(n[1:], "0123456789") != "") {
			continue
		}
		tmp := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			_ = os.Remove(tmp)
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if same, err := lockRegular(f, tmp, true); err == nil && same {
			_ = os.Remove(tmp)
		}
		f.Close()
	}
}
