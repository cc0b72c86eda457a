package tuner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// After a failed write (a full disk) the journal is probed every round,
// whether or not the tuner decides anything: it stays unwritable in the
// status while the disk is full, and is writable again, logged so, at the
// first round after the repair, though the tuner wrote nothing since
// (before, it stayed unwritable until the policy next wanted a change).
// The probe leaves no file behind and the journal's records as they were.
func TestJournalProbedEachRoundWhileUnwritable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	_, tu, clk, out := journalTuner(t, p, 0)
	before := readFile(t, p)
	failWrites(t)
	if tu.journal(Record{Time: t0, Event: string(OutcomePlanned), Target: Target{GPU: "GPU-0", Knob: gpu.KnobPowerLimit}}) == nil {
		t.Fatal("a write succeeded on a full disk")
	}
	writable := func() bool { s := tu.Status(); return s.Journal != nil && s.Journal.WriteError == "" }
	for range 3 { // nothing to decide: the disk still full
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
		if writable() {
			t.Fatal("the journal served writable while every write fails")
		}
	}
	writeFile = (*os.File).Write // the disk freed
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if !writable() {
		t.Errorf("the journal still served unwritable at the first round after the repair: %+v", tu.Status().Journal)
	}
	if !strings.Contains(out.String(), "tuner journal writable again") {
		t.Errorf("no line says the journal is writable again:\n%s", out)
	}
	after := readFile(t, p)
	if string(after) != string(before) {
		t.Errorf("the probe changed the journal:\n%s\nwas\n%s", after, before)
	}
	if left := dirNames(t, dir); left != "journal journal.lock" && left != "journal" {
		t.Errorf("the directory holds %s after the probes", left)
	}
}

// dirNames lists the names in dir, space-separated.
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// The probe writes only a file of its own: one beside the journal named
// as a fixed probe name would be (JOURNAL.probe, another's file or a hard
// link to one) is left whole, where it was truncated, written over and
// removed at every round while the journal could not be written.
func TestJournalProbeLeavesOthersFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	kept := filepath.Join(dir, "kept")
	if err := os.WriteFile(kept, []byte("someone's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(kept, p+".probe"); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, p)
	defer j.Close()
	failWrites(t)
	if j.Append(originalRec("GPU-0", 700)) == nil {
		t.Fatal("a write succeeded on a full disk")
	}
	before := dirNames(t, dir)
	for _, full := range []bool{true, false} {
		if !full {
			writeFile = (*os.File).Write // the disk freed
		}
		if err := j.Probe(); (err == nil) == full {
			t.Fatalf("probe with the disk full %v: %v", full, err)
		}
		if b, err := os.ReadFile(kept); err != nil || string(b) != "someone's data\n" {
			t.Fatalf("the file beside the journal holds %q (%v) after a probe", b, err)
		}
		if after := dirNames(t, dir); after != before {
			t.Errorf("the directory holds %s after a probe, %s before", after, before)
		}
	}
}

// A journal opened unwritable (on a read-only file system) that the probe
// then finds writable is said so in the log, as after a failed write, and
// served writable; the probe runs only while a write failed.
func TestJournalOpenedUnwritableProbed(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	out := &strings.Builder{}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
	if err != nil {
		t.Fatal(err)
	}
	j.stats.WriteError = "tuner journal: read-only file system" // (as OpenJournal leaves it there)
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	if s := tu.Status(); s.Journal == nil || s.Journal.WriteError != "" || !strings.Contains(out.String(), "tuner journal writable again") {
		t.Errorf("journal %+v after a probe that succeeded; log:\n%s", s.Journal, out)
	}
}

// A compaction that fails after a record was written leaves the journal
// writable (the record is there; the tuner acts on it): it is logged once
// as a compaction that failed, and once again when one succeeds. Before,
// it set the write error: the status served the journal unwritable while
// the tuner acted, and the next round's probe logged "writable again".
func TestJournalCompactionFailureNotAWriteFailure(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j, tu, clk, out := journalTuner(t, p, 1) // compacts once a record is not an open original
	compactions := failCompactions(t)
	planned := Record{Time: t0, Event: string(OutcomePlanned), Target: Target{GPU: "GPU-0", Knob: gpu.KnobPowerLimit}}
	if err := tu.journal(planned); err != nil {
		t.Fatalf("a record written whose compaction failed: %v", err)
	}
	if st := j.Stats(); st.WriteError != "" || st.CompactError == "" {
		t.Errorf("stats %+v: want no write error and the compaction's", st)
	}
	for range 2 {
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
	}
	if s := tu.Status(); s.Journal == nil || s.Journal.WriteError != "" {
		t.Errorf("the journal served unwritable after a compaction failed: %+v", s.Journal)
	}
	if n := strings.Count(out.String(), "tuner journal compaction failed"); n != 1 || strings.Contains(out.String(), "writable again") {
		t.Errorf("%d lines of the failed compaction (want 1), or a recovery from no write failure:\n%s", n, out)
	}
	compactions()
	if err := tu.journal(planned); err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.CompactError != "" || !strings.Contains(out.String(), "tuner journal compacted again") {
		t.Errorf("stats %+v after a compaction succeeded; log:\n%s", st, out)
	}
}

// journalTuner opens the journal at p, compacted past maxBytes (0: the
// default) and closed as the test ends, and a tuner in enforce on it that
// decides nothing, logging into out, with GPU-0's power limit journaled
// as an original.
func journalTuner(t *testing.T, p string, maxBytes int64) (*Journal, *Tuner, *gpu.ManualClock, *strings.Builder) {
	t.Helper()
	j, err := OpenJournalSize(p, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	out := &strings.Builder{}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: clk, Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
	if err != nil {
		t.Fatal(err)
	}
	if err := tu.journal(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	return j, tu, clk, out
}
