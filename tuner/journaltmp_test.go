package tuner

import (
	"os"
	"path/filepath"
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
			j, err := OpenJournal(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []Record{originalRec("GPU-0", 700), originalRec("GPU-1", 600), {Time: t0, Event: EventRestored, Target: originalRec("GPU-1", 0).Target}} {
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			if err := tc.plant(victim, p+".tmp"); err != nil {
				t.Skip(err)
			}
			j, err = OpenJournal(p) // compacts: a record is not an open original
			if err != nil {
				t.Fatal(err)
			}
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
