package tuner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// In enforce mode, a change only recommended (the journal cannot be
// written: nothing is set) leaves the target the value the tuner set
// before, the one in force, as it leaves it for a change refused; the
// first change made after the repair is the target again. (Before, the
// recommended value replaced the target set, and the target gauges served
// it in enforce mode as if it were in force.)
func TestRecommendedOnlyKeepsTheTargetSet(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	want := Watts(490)
	policy := deciderFunc(func(*State) []Action {
		return []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: want, Reason: "test"}}
	})
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: policy, Guards: []Guard{Bounds{}}, Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		want    Watts
		fail    bool
		outcome Outcome
		target  Watts // the status's target, set
	}{
		{"set", 490, false, OutcomeApplied, 490},
		{"recommended only (journal unwritable)", 500, true, OutcomeRecommended, 490},
		{"again", 510, true, OutcomeRecommended, 490},
		{"set after the repair", 520, false, OutcomeApplied, 520},
	} {
		want = step.want
		if step.fail {
			failWrites(t)
		} else {
			writeFile = (*os.File).Write
		}
		ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil || len(ds) != 1 || ds[0].Outcome != step.outcome {
			t.Fatalf("%s: decisions %+v, %v; want one %s", step.name, ds, err, step.outcome)
		}
		var got []Setting
		for _, s := range tu.Status().Settings {
			if s.Knob == gpu.KnobPowerLimit {
				got = append(got, s)
			}
		}
		if len(got) != 1 || got[0].Target != step.target || got[0].Mode != ModeEnforce {
			t.Errorf("%s: power settings %+v, want the target %v set (mode enforce)", step.name, got, step.target)
		}
		clk.Advance(time.Minute)
	}
}
