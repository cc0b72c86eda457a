package tuner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"
)

// A record dropped at open as one that cannot be trusted is named by its
// line and byte, why, and the setting it names where its JSON reads: the
// start's log and the listing say where it was and which setting to check
// by hand (the open's compaction removes it from the file). Before, they
// gave a count by reason alone: an original was lost, and nothing said
// which.
func TestJournalDroppedRecordsNamed(t *testing.T) {
	good := func(gpuID string) string {
		b, err := encodeRecord(originalRec(gpuID, 700))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	flipped := strings.Replace(good("GPU-7"), "700", "701", 1) // checksum no longer matches
	future := "J2" + strings.TrimPrefix(good("GPU-8"), "J1")   // another version's format
	hot, _ := encodeRecord(originalRec("GPU-9", 20000))        // watts out of range
	long := `{"event":"` + strings.Repeat("x", MaxRecordBytes) + "\"}\n"
	lines := []string{good("GPU-0"), flipped, future, "hello\n", string(hot), `{"time":` + "\n", long, good("GPU-1"), "\x1b[2Jbad tail\n"}
	var text string
	want := []BadRecord{}
	whys := []struct{ reason, detail string }{
		{}, {"corrupt", `its length or checksum does not match its JSON; it reads as "original" of "GPU-7/power_limit"`},
		{"corrupt", `a record of format "J2", not "J1" (written by another version of the exporter?); it reads as "original" of "GPU-8/power_limit"`},
		{"corrupt", `not a record: "hello"`},
		{"invalid", `watts value 20000W out of range; it reads as "original" of "GPU-9/power_limit"`},
		{"corrupt", "JSON that does not read"},
		{"oversize", fmt.Sprintf("longer than the %d-byte bound", MaxRecordBytes)},
		{}, {"corrupt", `not a record: "\x1b[2Jbad tail"`},
	}
	for i, l := range lines {
		if whys[i].reason != "" {
			want = append(want, BadRecord{Line: i + 1, Offset: int64(len(text)), Reason: whys[i].reason, Detail: whys[i].detail})
		}
		text += l
	}
	p := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, st, err := ReadJournal(p) // as the listing reads it
	if err != nil {
		t.Fatal(err)
	}
	if got, w := fmt.Sprint(st.Bad), fmt.Sprint(want); got != w {
		t.Errorf("the listing names\n%s\nwant\n%s", strings.Join(strings.Split(got, "} {"), "}\n{"), strings.Join(strings.Split(w, "} {"), "}\n{"))
	}
	j := openJournal(t, p) // as a start opens it
	defer j.Close()
	out := &strings.Builder{}
	logJournalOpen(log.NewLogfmtLogger(out), p, j)
	for _, b := range want {
		if l := fmt.Sprintf(`line=%d byte=%d reason=%s`, b.Line, b.Offset, b.Reason); !strings.Contains(out.String(), l) {
			t.Errorf("the start's log does not say %s:\n%s", l, out)
		}
	}
	if !strings.Contains(out.String(), `GPU-7/power_limit`) {
		t.Errorf("the start's log does not name the setting a corrupt record held:\n%s", out)
	}
}

// A journal garbled throughout names its first maxBadNamed bad records,
// and counts them all.
func TestJournalDroppedRecordsNamedBounded(t *testing.T) {
	good, _ := encodeRecord(originalRec("GPU-0", 700))
	p := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(p, append(good, strings.Repeat("junk\n", 1000)+string(good)...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, st, err := ReadJournal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Bad) != maxBadNamed || st.Dropped["corrupt"] != 1000 || st.Bad[0].Line != 2 || st.Bad[maxBadNamed-1].Line != maxBadNamed+1 {
		t.Errorf("%d named (first line %d), %d counted; want %d named from line 2, 1000 counted", len(st.Bad), st.Bad[0].Line, st.Dropped["corrupt"], maxBadNamed)
	}
}
