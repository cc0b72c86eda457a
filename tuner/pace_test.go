package tuner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The dwell tells its waits: until when each knob's change is refused,
// the fast knobs' shorter; the chain keeps the later of two on a knob.
func TestDwellWaits(t *testing.T) {
	d := &Dwell{For: 20 * time.Second, Fast: 5 * time.Second}
	mps := mpsAction(7, 1, 0.5)
	pause := pauseAction("embed", gpu.ClassBatch, 0, 0.2)
	d.Record(mps, OutcomeApplied, nil, t0)
	d.Record(pause, OutcomeApplied, nil, t0)
	d.Record(Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(500)}, OutcomeRefused, nil, t0)
	got := d.Waits(t0.Add(3 * time.Second))
	want := map[string]Wait{
		mps.DomainKey():   {Guard: GuardDwell, Knob: gpu.KnobMPSActiveThreads, Since: t0, Until: t0.Add(20 * time.Second)},
		pause.DomainKey(): {Guard: GuardDwell, Knob: gpu.KnobPauseDuty, Since: t0, Until: t0.Add(5 * time.Second)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits at 3s %v, want %v", got, want)
	}
	// The waits end exactly when Admit starts to admit.
	for _, at := range []time.Duration{15 * time.Second, 19 * time.Second, 20 * time.Second, 21 * time.Second} {
		now := t0.Add(at)
		_, waiting := d.Waits(now)[mps.DomainKey()]
		if ok, _ := d.Admit(nil, mps, now); ok == waiting {
			t.Errorf("at %v: admitted %v, waiting %v", at, ok, waiting)
		}
	}
	later := &Dwell{For: time.Minute}
	later.Record(mps, OutcomeApplied, nil, t0)
	w := Chain{Bounds{}, d, later}.Waits(t0.Add(10 * time.Second))
	if w[mps.DomainKey()].Until != t0.Add(time.Minute) || len(w) != 1 {
		t.Errorf("chain waits %v, want the minute's on the MPS caps only", w)
	}
	if r := w[mps.DomainKey()].Reason(t0.Add(15 * time.Second)); r != "dwell: mps_active_threads changed 15s ago, next change allowed in 45s" {
		t.Errorf("reason %q", r)
	}
}

// HoldWaiting holds what the dwell would refuse, reverts excepted.
func TestHoldWaiting(t *testing.T) {
	mps, clocks := mpsAction(7, 1, 0.5), Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Want: ClockRange{}}
	revert := mps
	revert.Revert = true
	now := t0.Add(15 * time.Second)
	s := &State{Now: now, Waits: map[string]Wait{mps.DomainKey(): {Guard: GuardDwell, Knob: mps.Knob, Since: t0, Until: t0.Add(20 * time.Second)}}}
	got := s.HoldWaiting([]Action{mps, clocks, revert})
	if got[0].Held != "dwell: mps_active_threads changed 15s ago, next change allowed in 5s" || got[1].Held != "" || got[2].Held != "" {
		t.Errorf("held %q, %q, %q: want only the MPS change held", got[0].Held, got[1].Held, got[2].Held)
	}
	s.Now = t0.Add(20 * time.Second)
	if got := s.HoldWaiting([]Action{mps}); got[0].Held != "" {
		t.Errorf("held at the dwell's end: %q", got[0].Held)
	}
}

// A policy that wants a change every round at a 15 s interval, beside a
// 20 s dwell: holding what the dwell would refuse makes the same changes
// at the same times as proposing it, without a refusal, and the round
// says why it holds.
func TestHoldingForTheDwellChangesNothing(t *testing.T) {
	type run struct {
		applied []string
		refused int
		rounds  []RoundKind
		why     string
	}
	drive := func(hold bool) run {
		var r run
		clk := gpu.NewManualClock(t0)
		step := Fraction(1)
		policy := deciderFunc(func(s *State) []Action {
			a := mpsAction(7, step, step-0.05)
			if hold {
				return s.HoldWaiting([]Action{a})
			}
			return []Action{a}
		})
		tu, err := New(Options{Policy: policy, Guards: DefaultGuards(nil, nil), Actuators: ActuatorsOf(&recorder{}), Clock: clk, Mode: ModeEnforce})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			ds, err := tu.RunOnce(t.Context(), emptySnap(clk.Now()))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				switch {
				case d.Applied:
					r.applied = append(r.applied, fmt.Sprintf("%v %s", clk.Now().Sub(t0), d.To))
					step -= 0.05
				case d.Guard == GuardDwell:
					r.refused++
				}
			}
			g := tu.Status().GPUs[0]
			r.rounds = append(r.rounds, g.Kind)
			if g.Kind == RoundHeld {
				r.why = g.Why
			}
			clk.Advance(15 * time.Second)
		}
		return r
	}
	before, after := drive(false), drive(true)
	if before.refused != 6 || after.refused != 0 {
		t.Errorf("dwell refusals: %d proposing, %d holding; want 6 and 0", before.refused, after.refused)
	}
	if len(after.applied) != 6 || !slices.Equal(before.applied, after.applied) {
		t.Errorf("applied\n%q proposing,\n%q holding; want the same 6", before.applied, after.applied)
	}
	if want := []RoundKind{RoundActing, RoundHeld, RoundActing, RoundHeld}; !slices.Equal(after.rounds[:4], want) {
		t.Errorf("rounds %v, want %v", after.rounds[:4], want)
	}
	if want := "dwell: mps_active_threads changed 15s ago, next change allowed in 5s (held back: mps_active_threads of embed"; len(after.why) < len(want) || after.why[:len(want)] != want {
		t.Errorf("holding reason %q, want it to start %q", after.why, want)
	}
}
