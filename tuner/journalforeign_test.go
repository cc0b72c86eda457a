package tuner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --tuner.journal that names another file by mistake (a tenants file, a
// JSON document, /etc/passwd) is refused by every reader of the journal,
// naming the file, and left as it was: read as a journal, each of its lines
// was dropped as corrupt and the file cut to nothing, with mode 0600. A
// journal that holds no whole record still opens.
func TestJournalRefusesAFileThatIsNotOne(t *testing.T) {
	good, _ := encodeRecord(originalRec("GPU-0", 700))
	long := "J1 " + strings.Repeat("x", MaxRecordBytes+100) + "\n"
	for _, tc := range []struct {
		name, content string
		journal       bool
	}{
		{"passwd", "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n", false},
		{"tenants file", "tenants:\n  - name: chat\n    class: latency\n", false},
		{"pretty JSON", "{\n  \"tenants\": []\n}\n", false},
		{"one line of text, no newline", "hello", false},
		{"a long line of text", strings.Repeat("y", MaxRecordBytes+100) + "\n", false},
		{"empty", "", true},
		{"blank lines", "\n\n", true},
		{"a record", string(good), true},
		{"first write torn", "J1 0000", true},
		{"first write torn early", "J", true},
		{"its only record spoiled", "J1 00000005 00000000 {bad}\n", true},
		{"a record of the earlier format, spoiled", `{"event":"original"}` + "\n", true},
		{"a first record of the earlier format, torn", `{"time":"2026-01-01T00:00:01Z","ev`, true},
		{"garbage, then a record", "garbage\n" + string(good), true},
		{"an oversize record", long, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, rerr := ReadJournal(p)
			j, err := OpenJournal(p)
			if j != nil {
				j.Close()
			}
			if tc.journal {
				if err != nil || rerr != nil {
					t.Fatalf("a journal refused: open %v, read %v", err, rerr)
				}
				return
			}
			for _, e := range []error{err, rerr} {
				if e == nil || !strings.Contains(e.Error(), p) || !strings.Contains(e.Error(), "not a tuner journal") {
					t.Errorf("error %v, want one naming %s as not a tuner journal", e, p)
				}
			}
			b, _ := os.ReadFile(p)
			fi, _ := os.Stat(p)
			if string(b) != tc.content || fi.Mode().Perm() != 0o644 {
				t.Errorf("the file is now %q (mode %v), want it left as it was", b, fi.Mode().Perm())
			}
		})
	}
}
