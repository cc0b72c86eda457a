package tuner

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An MPS client's original that follows the client's successor takes the
// value last set with it, journaled for the new PID: a restore after a
// crash says it sets the successor back from that value, whether the
// original moved in the run that set it or in the next start, which found
// it in the journal. (Before, the new PID had no value last set in the
// journal, and the restore said it set it back from "unknown".) The run
// that moved it says so too, at its restore at exit.
func TestSuccessorKeepsLastSet(t *testing.T) {
	half := Fraction(0.5)
	mps := func(pid uint32) Target { return Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: pid} }
	for _, c := range []struct {
		name   string
		follow func(t *testing.T, p string) *Journal // leaves the original with PID 9
	}{
		{"in the run that set it", func(t *testing.T, p string) *Journal {
			j := openJournal(t, p)
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed{mpsAction(7, 1, half)}, Actuators: ActuatorsOf(&successorHost{next: map[uint32]uint32{7: 9}}), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
				t.Fatal(err)
			}
			return j
		}},
		{"by the next start", func(t *testing.T, p string) *Journal {
			j := reopen(t, writeJournal(t, p,
				Record{Time: t0, Event: EventOriginal, Target: mps(7), Tenant: "embed", From: encodeValue(Fraction(1))},
				Record{Time: t0, Event: string(OutcomeApplied), Target: mps(7), Tenant: "embed", From: encodeValue(Fraction(1)), To: encodeValue(half)}), p)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if !tu.followAs(mps(7), 9, nil, t0.Add(time.Minute)) {
				t.Fatal("not followed")
			}
			if v := tu.lastSet(mps(9).String()); v != half.String()+" (last set, as journaled)" {
				t.Errorf("PID 9 last set to %q in this run, the restore at exit's from; want 50%% as journaled", v)
			}
			return j
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			j := c.follow(t, p)
			if o := j.Originals(); len(o) != 1 || o[0].Target != mps(9) || o[0].Set != half {
				t.Fatalf("journaled originals %+v, want PID 9's, last set to 50%%", o)
			}
			// the exporter crashes; the next start restores PID 9
			j = reopen(t, j, p)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			f := float64(half)
			d, err := tu.Recover(context.Background(), snapshot(t0.Add(time.Hour), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(9, &f)}}}, nil))
			if want := half.String() + " (last set, as journaled)"; err != nil || len(d) != 1 || d[0].Outcome != OutcomeRestored || d[0].From != want {
				t.Fatalf("start's restore: %+v, %v; want PID 9 restored from %q", d, err, want)
			}
		})
	}
}
