package tuner

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A round that ends after the exit closed the journal (one stuck at exit)
// writes to a closed journal: no failure of the journal's, said at info
// and not counted, and the tuner makes no change without it. (It was
// logged at error as a journal write failure, and counted.)
func TestJournalClosedByTheExitNoWriteFailure(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	rec := &recorder{}
	var logs bytes.Buffer
	acts := []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	tu, err := New(Options{Policy: fixed(acts), Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d, _ := tu.RunOnce(context.Background(), emptySnap(t0)); len(rec.Calls) != 0 || len(d) != 1 || d[0].Outcome == OutcomeApplied {
			t.Fatalf("with the journal closed: calls %q, decisions %+v", rec.Calls, d)
		}
	}
	s := logs.String()
	if strings.Contains(s, "level=error") || strings.Count(s, `msg="tuner journal closed by the exit`) != 1 || !strings.Contains(s, "level=info") {
		t.Errorf("want one info line saying the exit closed the journal, no error:\n%s", s)
	}
	if n := tu.Status().Counts.JournalErrors; n != 0 {
		t.Errorf("%d journal errors counted, want none", n)
	}
}
