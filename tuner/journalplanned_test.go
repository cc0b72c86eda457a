package tuner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// In enforce mode no change is made whose planned record the journal did
// not take, whatever the writes after it do: one where only that write
// fails (the original's, next, would succeed), and one whose target's
// original is journaled already (no write follows the planned one). A
// revert is made all the same.
func TestNoChangeWithoutItsPlannedRecord(t *testing.T) {
	power := func(from, to Watts, revert bool) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: from, Want: to, Revert: revert, Reason: "test"}
	}
	failPlanned := func(t *testing.T) {
		writeFile = func(f *os.File, b []byte) (int, error) {
			if bytes.Contains(b, []byte(`"planned"`)) {
				return 0, syscall.EIO
			}
			return f.Write(b)
		}
		t.Cleanup(func() { writeFile = (*os.File).Write })
	}
	for _, c := range []struct {
		name   string
		before *Action // applied with the journal whole
		a      Action  // decided while the planned record cannot be written
		fail   func(*testing.T)
		want   Outcome
		calls  int
	}{
		{"planned write alone fails", nil, power(700, 490, false), failPlanned, OutcomeRecommended, 0},
		{"original journaled already", new(power(700, 490, false)), power(490, 500, false), failWrites, OutcomeRecommended, 0},
		{"planned write alone fails, original journaled", new(power(700, 490, false)), power(490, 500, false), failPlanned, OutcomeRecommended, 0},
		{"revert", new(power(700, 490, false)), power(490, 700, true), failWrites, OutcomeApplied, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			acts := make([]Action, 1)
			rec := &recorder{}
			tu, clk := newTestTuner(t, ModeEnforce, rec, acts, j)
			if c.before != nil {
				acts[0] = *c.before
				if ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil || len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
					t.Fatalf("before: %+v, %v", ds, err)
				}
			}
			made := len(rec.Calls)
			c.fail(t)
			acts[0] = c.a
			ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
			if err != nil || len(ds) != 1 {
				t.Fatalf("%+v, %v", ds, err)
			}
			if ds[0].Outcome != c.want || len(rec.Calls)-made != c.calls {
				t.Errorf("%s (%s), calls %q; want %s and %d calls", ds[0].Outcome, ds[0].Reason, rec.Calls[made:], c.want, c.calls)
			}
		})
	}
}
