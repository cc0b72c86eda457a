package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// narrowedGPU is a GPU whose power limit range and SM clock maximum a
// driver or firmware update may narrow: it refuses a value outside them
// before any call, with the range (gpu.RangeError), as the NVML backend
// does. A zero maxW or maxMHz bounds nothing.
type narrowedGPU struct {
	recorder
	minW, maxW float64
	maxMHz     uint32
}

func (g *narrowedGPU) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if g.maxW > 0 && w > 0 && (w < g.minW || w > g.maxW) {
		return &gpu.RangeError{GPU: uuid, What: "power limit", Unit: "W", Value: w, Min: g.minW, Max: g.maxW}
	}
	return g.recorder.SetPowerLimit(ctx, uuid, w)
}

func (g *narrowedGPU) LockClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	if g.maxMHz > 0 && l.MaxMHz > g.maxMHz {
		return &gpu.RangeError{GPU: uuid, What: "SM clock", Unit: "MHz", Value: float64(l.MaxMHz), Max: float64(g.maxMHz)}
	}
	return g.recorder.LockClocks(ctx, uuid, l)
}

// An original an earlier run left open, which the GPU no longer accepts (a
// driver update narrowed the power limit's range, or lowered the SM
// clock's maximum, since it was read), is set back at start to the
// nearest value the GPU accepts, the decision and the journal saying so,
// and closed: no start or exit after it tries again. Before, its restore
// failed at every start and exit, and the original stayed open for good.
func TestRestoreOutOfRangeOriginalSetsNearest(t *testing.T) {
	power := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	clocks := Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}
	for _, tc := range []struct {
		name        string
		a           Action // the earlier run's change: its Current the original
		call, to    string
		outside, at string // the reason's original and the GPU's range
	}{
		{"power above the maximum", Action{Target: power, Current: Watts(400), Want: Watts(280)},
			"SetPowerLimit(GPU-0,350)", "350W", "400W", "100-350 W"},
		{"power below the minimum", Action{Target: power, Current: Watts(80), Want: Watts(200)},
			"SetPowerLimit(GPU-0,100)", "100W", "80W", "100-350 W"},
		{"clock above the maximum", Action{Target: clocks, Current: ClockRange{MinMHz: 1410, MaxMHz: 1980}, Want: ClockRange{MinMHz: 1200, MaxMHz: 1200}},
			"LockClocks(GPU-0,1410,1755)", "1410-1755MHz", "1410-1980MHz", "at most 1755 MHz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			tc.a.Reason = "test"
			earlier, _ := newTestTuner(t, ModeEnforce, &recorder{}, []Action{tc.a}, j)
			if ds, err := earlier.RunOnce(context.Background(), emptySnap(t0)); err != nil || len(ds) != 1 || !ds[0].Applied {
				t.Fatalf("earlier run: %+v, %v", ds, err)
			}
			j.Close() // (an exit without its restore)
			for start := range 2 {
				j = openJournal(t, path)
				g := &narrowedGPU{minW: 100, maxW: 350, maxMHz: 1755}
				clk := gpu.NewManualClock(t0.Add(time.Hour))
				tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(g), Journal: j, Clock: clk, Mode: ModeEnforce})
				if err != nil {
					t.Fatal(err)
				}
				ds, err := tu.Recover(context.Background(), emptySnap(clk.Now()))
				if start == 1 {
					if err != nil || len(ds) != 0 || len(g.Calls) != 0 {
						t.Errorf("the next start: %+v, %v, calls %q; want nothing left to restore", ds, err, g.Calls)
					}
					j.Close()
					continue
				}
				why := tc.outside + " is outside what the GPU accepts now (" + tc.at + "): set to " + tc.to + ", the nearest it accepts, and the original closed"
				if err != nil || len(ds) != 1 || ds[0].Outcome != OutcomeRestored || ds[0].To != tc.to || !strings.Contains(ds[0].Reason, why) {
					t.Fatalf("the start's restore: %+v, %v; want restored to %s, saying %q", ds, err, tc.to, why)
				}
				if !slices.Equal(g.Calls, []string{tc.call}) {
					t.Errorf("calls %q, want %s", g.Calls, tc.call)
				}
				if open, err := ReadJournalOriginals(path); err != nil || len(open) != 0 {
					t.Errorf("journal holds open %+v, %v; want the original closed", open, err)
				}
				if c := tu.Status().Counts; c.RestoreFailures != 0 || c.Restores != 1 {
					t.Errorf("restores %d, failures %d; want 1, 0", c.Restores, c.RestoreFailures)
				}
				j.Close()
			}
		})
	}
}

// A round's revert of the power limit to an original the GPU no longer
// accepts sets the nearest limit it does and closes the original: the
// next round's policy reads no original to give back (autotune would
// otherwise answer every violation with the same revert, and never reach
// the clock lock), and the exit has nothing to set back. Before, the
// revert failed at every round and the original stayed open.
func TestRevertOutOfRangeOriginalClosed(t *testing.T) {
	power := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	g := &narrowedGPU{}
	round := 0
	var seen map[string]Value
	policy := deciderFunc(func(s *State) []Action {
		round++
		seen = s.Originals
		switch round {
		case 1:
			return []Action{{Target: power, Current: Watts(400), Want: Watts(280), Reason: "lower"}}
		case 2:
			return []Action{{Target: power, Current: Watts(280), Want: Watts(400), Revert: true, Reason: "give back"}}
		}
		return nil
	})
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	defer j.Close()
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: policy, Actuators: ActuatorsOf(g), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil || len(ds) != 1 || !ds[0].Applied {
		t.Fatalf("the lowering: %+v, %v", ds, err)
	}
	g.minW, g.maxW, g.Calls = 100, 350, nil // (the range narrowed under the run)
	clk.Advance(time.Minute)
	ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
	const why = "400W is outside what the GPU accepts now (100-350 W): set to 350W, the nearest it accepts, and the original closed"
	if err != nil || len(ds) != 1 || !ds[0].Applied || ds[0].To != "350W" || !strings.Contains(ds[0].Reason, why) {
		t.Fatalf("the revert: %+v, %v; want applied at 350W, saying %q", ds, err, why)
	}
	clk.Advance(time.Minute)
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if _, kept := seen[power.String()]; kept {
		t.Errorf("the round after the revert reads the original %v, want none", seen[power.String()])
	}
	if open, err := ReadJournalOriginals(path); err != nil || len(open) != 0 {
		t.Errorf("journal holds open %+v, %v; want the original closed", open, err)
	}
	if _, err := tu.Restore(context.Background()); err != nil || !slices.Equal(g.Calls, []string{"SetPowerLimit(GPU-0,350)"}) {
		t.Errorf("exit: %v, calls %q; want the revert's alone", err, g.Calls)
	}
}
