package tuner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The compaction writes a file of its own beside the journal: a
// JOURNAL.tmp that is there already (a symbolic link, a hard link to
// another's file, what a crash during a compaction left) is never written
// through, and the compaction goes on. Before, it was opened, truncated
// and written: the file a link named lost its contents to the journal's
// records, and the journal became a link to it.
func TestJournalCompactionLeavesOthersFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(victim, tmp string) error
	}{
		{"a symbolic link", func(victim, tmp string) error { return os.Symlink(victim, tmp) }},
		{"a hard link", func(victim, tmp string) error { return os.Link(victim, tmp) }},
		{"a compaction's leftover", func(_, tmp string) error { return os.WriteFile(tmp, []byte("J1 half"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "journal")
			victim := filepath.Join(dir, "someone's")
			if err := os.WriteFile(victim, []byte("someone's data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			j := openJournal(t, p)
			for _, r := range []Record{originalRec("GPU-0", 700), originalRec("GPU-1", 600), {Time: t0, Event: EventRestored, Target: originalRec("GPU-1", 0).Target}} {
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			if err := tc.plant(victim, p+".tmp"); err != nil {
				t.Skip(err)
			}
			j = openJournal(t, p) // compacts: a record is not an open original
			defer j.Close()
			if b, err := os.ReadFile(victim); err != nil || string(b) != "someone's data\n" {
				t.Errorf("the file JOURNAL.tmp named holds %q (%v) after the compaction", b, err)
			}
			if st := j.Stats(); st.Compactions != 1 || st.WriteError != "" {
				t.Errorf("compaction: %+v", st)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the journal after the compaction: %v %v", fi, err)
			}
			if o, err := ReadJournalOriginals(p); err != nil || len(o) != 1 || o[0].Target.GPU != "GPU-0" {
				t.Errorf("the compacted journal holds %v (%v), want GPU-0's original", o, err)
			}
		})
	}
}

// Two exporters whose journal path was removed both write it again: each
// compaction writes a temporary file of its own, and neither removes the
// other's while it is being written. Before, both wrote JOURNAL.tmp: the
// second removed the first's (live and locked) and renamed its own to the
// journal, and the first found nothing left to rename.
func TestJournalCompactionLeavesAnothersLiveTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	x := openWithOriginal(t, p, "GPU-0")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	y := openWithOriginal(t, p, "GPU-9") // started once x's file was gone
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	var xTemp error
	beforeRename = func(tmp, _ string) {
		beforeRename = func(string, string) {}
		y.Relink() // y writes the path again while x is about to
		_, xTemp = os.Lstat(tmp)
	}
	t.Cleanup(func() { beforeRename = func(string, string) {} })
	x.Relink()
	if xTemp != nil {
		t.Errorf("x's temporary file, about to be renamed, was removed by y's compaction: %v", xTemp)
	}
	if left, _ := filepath.Glob(p + ".tmp*"); len(left) > 0 {
		t.Errorf("temporary files left beside the journal: %v", left)
	}
}

// openWithOriginal opens the journal at p with gpu's original in it.
func openWithOriginal(t *testing.T, p, gpu string) *Journal {
	t.Helper()
	j := openJournal(t, p)
	t.Cleanup(func() { j.Close() })
	if err := j.Append(originalRec(gpu, 700)); err != nil {
		t.Fatal(err)
	}
	return j
}

// What a compaction cut short by a crash left beside the journal
// (FILE.tmp-N; FILE.tmp, of an earlier version) is removed at the next
// start, unless a process holds it locked (another exporter's compaction,
// being written), which is left as it is, as is every other file. Before,
// FILE.tmp was removed by the next compaction, whoever held it, and there
// was no other.
func TestJournalLeftoverTempsRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	names := map[string]bool{ // removed at start
		"journal.tmp": true, "journal.tmp-123": true,
		"journal.tmp-456": false, // locked below
		"journal.tmpx":    false, "journal.tmp-12a": false, "journal.tmp-": false, "other.tmp-1": false,
	}
	for n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("J1 half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live, err := os.Open(filepath.Join(dir, "journal.tmp-456"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX); err != nil {
		t.Skip(err)
	}
	j := openJournal(t, p)
	defer j.Close()
	for n, removed := range names {
		if _, err := os.Lstat(filepath.Join(dir, n)); (err == nil) == removed {
			t.Errorf("%s after the start: %v, want removed %v", n, err, removed)
		}
	}
}

// renameNoReplace puts a file at a free path and leaves one that is
// there, with renameat2 and, on a file system without it, a hard link.
func TestRenameNoReplace(t *testing.T) {
	for _, native := range []bool{true, false} {
		for _, taken := range []bool{false, true} {
			dir := t.TempDir()
			from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
			if err := os.WriteFile(from, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			if taken {
				if err := os.WriteFile(to, []byte("there"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if !native {
				renameat2NoReplace = func(string, string) error { return syscall.EINVAL }
			}
			err := renameNoReplace(from, to)
			renameat2NoReplace = renameat2Native
			b, _ := os.ReadFile(to)
			_, ferr := os.Lstat(from)
			switch {
			case taken && (!errors.Is(err, fs.ErrExist) || string(b) != "there" || ferr != nil):
				t.Errorf("renameat2 %v, the path taken: %v, it holds %q, the file renamed: %v; want fs.ErrExist, the path's file kept, the renamed one where it was", native, err, b, ferr)
			case !taken && (err != nil || string(b) != "new" || ferr == nil):
				t.Errorf("renameat2 %v, the path free: %v, it holds %q, the file renamed still there: %v", native, err, b, ferr == nil)
			}
		}
	}
}

// renameNoReplace falls back where the file system refuses renameat2's
// flag (EINVAL, EPERM, ENOSYS, EOPNOTSUPP) to a hard link, and where it
// refuses that too (ENOSYS, EMLINK, EPERM, EOPNOTSUPP) to a rename: the
// file is put at the free path each time. Before, renameat2's EPERM and
// the link's ENOSYS and EMLINK were returned, the journal not written.
func TestRenameNoReplaceFallsBack(t *testing.T) {
	defer func() { renameat2NoReplace, linkFile = renameat2Native, os.Link }()
	for _, rerr := range []syscall.Errno{syscall.EINVAL, syscall.EPERM, syscall.ENOSYS, syscall.EOPNOTSUPP} {
		for _, lerr := range []syscall.Errno{0, syscall.ENOSYS, syscall.EMLINK, syscall.EPERM, syscall.EOPNOTSUPP} {
			dir := t.TempDir()
			from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
			if err := os.WriteFile(from, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			renameat2NoReplace = func(string, string) error { return rerr }
			linkFile = os.Link
			if lerr != 0 {
				linkFile = func(o, n string) error { return &os.LinkError{Op: "link", Old: o, New: n, Err: lerr} }
			}
			err := renameNoReplace(from, to)
			b, _ := os.ReadFile(to)
			if _, ferr := os.Lstat(from); err != nil || string(b) != "new" || ferr == nil {
				t.Errorf("renameat2 %v, link %v: %v, the path holds %q, the file renamed still there: %v; want it put there", rerr, lerr, err, b, ferr == nil)
			}
		}
	}
}
