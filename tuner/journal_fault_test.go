package tuner

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// dirSyncs records the directories the journal syncs (syncDir replaced
// for the test); while err is set, a sync fails with it.
type dirSyncs struct {
	dirs []string
	err  error
}

func recordDirSyncs(t *testing.T) *dirSyncs {
	t.Helper()
	s := &dirSyncs{}
	real := syncDir
	syncDir = func(dir string) error {
		s.dirs = append(s.dirs, dir)
		if s.err != nil {
			return s.err
		}
		return real(dir)
	}
	t.Cleanup(func() { syncDir = real })
	return s
}

// A journal file just created is durable with its first record: its
// directory is synced before the record counts as written (a sync that
// fails fails the record), so that a power loss does not take the file's
// name, and every original in it, with it. So is the file that a journal
// opened on a read-only file system creates at its first write.
func TestJournalCreationSyncsDirectory(t *testing.T) {
	syncs := recordDirSyncs(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	j := openJournal(t, p)
	defer j.Close()
	for _, unsupported := range []error{syscall.EINVAL, syscall.EOPNOTSUPP} {
		// a file system that cannot sync directories at all: no failure
		syncs.err = &fs.PathError{Op: "sync", Path: dir, Err: unsupported}
		if err := j.Append(originalRec("GPU-9", 700)); err != nil {
			t.Errorf("a directory sync the file system does not support (%v) failed the write: %v", unsupported, err)
		}
		j.dirUnsynced = true
	}
	syncs.dirs = nil
	syncs.err = syscall.EIO
	if err := j.Append(originalRec("GPU-0", 700)); err == nil {
		t.Error("a record written to a new journal whose directory could not be synced")
	}
	syncs.err = nil
	if err := j.Append(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(originalRec("GPU-1", 600)); err != nil {
		t.Fatal(err)
	}
	if want := []string{dir, dir}; !slices.Equal(syncs.dirs, want) {
		t.Errorf("directories synced %q, want %q (the failed sync, then once)", syncs.dirs, want)
	}

	syncs.dirs = nil
	later := newJournal(nil, filepath.Join(dir, "later"), DefaultJournalMaxBytes)
	later.ro = syscall.EROFS // opened read-only, the file missing
	defer later.Close()
	if err := later.Append(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	if want := []string{dir}; !slices.Equal(syncs.dirs, want) {
		t.Errorf("file created at the first write: directories synced %q, want %q", syncs.dirs, want)
	}
}

// A compaction whose directory sync fails has renamed its file over the
// journal without making the rename durable: the next record syncs the
// directory first, and fails while it cannot, or a power loss takes the
// journal back to the file before the compaction and the originals
// written since are lost.
func TestJournalCompactionDirectorySyncRetried(t *testing.T) {
	syncs := recordDirSyncs(t)
	dir := t.TempDir()
	j := openJournal(t, filepath.Join(dir, "journal"))
	defer j.Close()
	if err := j.Append(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	syncs.err = syscall.EIO
	if err := j.Compact(); err == nil {
		t.Fatal("a compaction whose directory sync failed succeeded")
	}
	if err := j.Append(originalRec("GPU-1", 600)); err == nil {
		t.Error("a record written after the compaction while its directory could not be synced")
	}
	syncs.err, syncs.dirs = nil, nil
	if err := j.Append(originalRec("GPU-1", 600)); err != nil {
		t.Fatal(err)
	}
	if want := []string{dir}; !slices.Equal(syncs.dirs, want) {
		t.Errorf("directories synced after the failed compaction %q, want %q", syncs.dirs, want)
	}
}

// failWritesPartWay makes the journal's writes write half of each record
// and fail, as a disk error part way does, until writeFile is set back.
func failWritesPartWay(t *testing.T) {
	t.Helper()
	writeFile = func(f *os.File, b []byte) (int, error) {
		n, _ := f.Write(b[:len(b)/2])
		return n, syscall.EIO
	}
	t.Cleanup(func() { writeFile = (*os.File).Write })
}

// failWrites makes the journal's writes fail, writing nothing, as a full
// disk does, until writeFile is set back.
func failWrites(t *testing.T) {
	t.Helper()
	writeFile = func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
	t.Cleanup(func() { writeFile = (*os.File).Write })
}

// failCutBacks makes the journal's cut-backs fail, as a disk error does,
// until truncateFile is set back.
func failCutBacks(t *testing.T) {
	t.Helper()
	truncateFile = func(*os.File, int64) error { return syscall.EIO }
	t.Cleanup(func() { truncateFile = (*os.File).Truncate })
}

// failCompactions fails every compaction (its file cannot be created)
// until the end of the test or the function returned is called.
func failCompactions(t *testing.T) (undo func()) {
	t.Helper()
	createTempFile = func(string) (*os.File, error) { return nil, syscall.EIO }
	undo = func() { createTempFile = createTemp }
	t.Cleanup(undo)
	return undo
}

// A write that fails, part way or whole (its sync failing), and cannot be
// cut back (the disk error fails the truncate too) leaves what it wrote at
// the file's end, where the next start would read a whole record as
// written, though Append said it was not, or the next record joined to a
// fragment on one line, dropped as corrupt, its original lost. The file is
// rewritten from the originals held (a compaction) at once; where that
// fails too, the fragment is cut off once the cut-back works, and until
// then the next record starts on a line of its own, so that only the
// fragment is dropped.
func TestJournalFailedCutBack(t *testing.T) {
	for _, tc := range []struct {
		name            string
		whole           bool // the record written whole, its sync failing
		blockCompaction bool
		cutLater        bool
		corrupt         int
	}{
		{name: "rewritten at once", corrupt: 0},
		{name: "whole, sync failed, rewritten at once", whole: true, corrupt: 0},
		{name: "not rewritten, cut back later", blockCompaction: true, cutLater: true, corrupt: 0},
		{name: "not rewritten nor cut back", blockCompaction: true, corrupt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, p)
			if err := j.Append(originalRec("GPU-0", 700)); err != nil {
				t.Fatal(err)
			}
			if tc.blockCompaction {
				failCompactions(t)
			}
			failWritesPartWay(t)
			if tc.whole {
				writeFile = func(f *os.File, b []byte) (int, error) {
					n, _ := f.Write(b)
					return n, syscall.EIO
				}
			}
			failCutBacks(t)
			if err := j.Append(originalRec("GPU-1", 600)); err == nil {
				t.Fatal("a write that failed succeeded")
			}
			writeFile = (*os.File).Write
			if tc.cutLater {
				truncateFile = (*os.File).Truncate
			}
			if err := j.Append(originalRec("GPU-2", 500)); err != nil {
				t.Fatal(err)
			}
			if err := j.Append(originalRec("GPU-3", 400)); err != nil {
				t.Fatal(err)
			}
			truncateFile = (*os.File).Truncate
			j2 := reopen(t, j, p)
			if want := []string{"GPU-0", "GPU-2", "GPU-3"}; !slices.Equal(originalGPUs(j2), want) || j2.Stats().Dropped["corrupt"] != tc.corrupt {
				t.Errorf("reopened: originals %q, dropped %v; want %q and %d corrupt (the fragment)", originalGPUs(j2), j2.Stats().Dropped, want, tc.corrupt)
			}
		})
	}
}

// originalGPUs are the GPUs of j's open originals, oldest first.
func originalGPUs(j *Journal) []string {
	var gpus []string
	for _, o := range j.Originals() {
		gpus = append(gpus, o.Target.GPU)
	}
	return gpus
}

// A torn tail that cannot be cut off at start (a disk error fails the
// truncate) does not stop the start: the originals before it are there to
// be restored, the compaction replaces the file and, where that fails too,
// the next record is written past the tail on a line of its own.
func TestJournalTornTailNotCut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	tornJournal(t, p, "J1 0000")
	failCompactions(t)
	failCutBacks(t)
	j, err := OpenJournal(p)
	if err != nil {
		t.Fatalf("a torn tail that could not be cut off stopped the start: %v", err)
	}
	if gpus := originalGPUs(j); !slices.Equal(gpus, []string{"GPU-0"}) || j.Stats().Compactions != 0 {
		t.Errorf("originals %q after %d compactions, want GPU-0's after none", gpus, j.Stats().Compactions)
	}
	if err := j.Append(originalRec("GPU-1", 600)); err != nil {
		t.Fatal(err)
	}
	truncateFile = (*os.File).Truncate
	if gpus := originalGPUs(reopen(t, j, p)); !slices.Equal(gpus, []string{"GPU-0", "GPU-1"}) {
		t.Errorf("reopened: originals %q, want GPU-0's and GPU-1's", gpus)
	}
}
