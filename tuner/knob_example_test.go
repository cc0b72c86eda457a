package tuner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The worked example of docs/architecture.md, "Adding a knob": the memory
// clock lock, which the simulator implements (LockMemoryClocks) but no
// knob drives, becomes a knob by one entry of
// the mechanism table. The doc shows the entry as it would stand in
// Mechanisms, with the interface and the knob's name in package gpu.

// memoryClockActuator is the knob's actuator interface
// (gpu.MemoryClockActuator in the doc).
type memoryClockActuator interface {
	LockMemoryClocks(ctx context.Context, uuid string, l gpu.ClockLock) error
}

// knobMemoryClocks is the knob (gpu.KnobMemoryClocks in the doc).
const knobMemoryClocks gpu.Knob = "locked_memory_clocks"

// memoryClocks is the knob's entry of the table, as the doc shows it.
var memoryClocks = mechanism("memory-clocks", valued(func(ctx context.Context, mc memoryClockActuator, a Action, r ClockRange) error {
	return mc.LockMemoryClocks(ctx, a.GPU, gpu.ClockLock(r))
}), knob(knobMemoryClocks, "mhz", everyMode...))

// withEntry adds m to the table for the test; CountedKnobs, which the
// product computes from the table literal once, is computed again.
func withEntry(t *testing.T, m Mechanism) {
	t.Helper()
	table, counted := Mechanisms, CountedKnobs
	Mechanisms = append(slices.Clip(Mechanisms), m)
	CountedKnobs = tableKnobs()
	t.Cleanup(func() { Mechanisms, CountedKnobs = table, counted })
}

// With its one entry added, the memory clock lock is a knob like the
// others: the backends that implement it are bound and listed, it is
// named for --tuner.disable-knob, shown on the GPUs of its modes in its
// unit, counted from 0, and the executor applies it through the guard
// chain with its original journaled, rolls it back with a plan that fails
// on its GPU, and sets it back at exit and after a crash.
func TestAddingAKnob(t *testing.T) {
	withEntry(t, memoryClocks)
	ctx := context.Background()
	rec := &recorder{}
	if !slices.Contains(KnobNames(), string(knobMemoryClocks)) || !slices.Contains(KnobsOf(rec), knobMemoryClocks) ||
		!slices.Contains(KnobsFor(gpu.SharingMIG), knobMemoryClocks) || KnobUnit(knobMemoryClocks) != "mhz" {
		t.Fatalf("the knob is not in the table's lists: names %v, recorder's %v, MIG's %v", KnobNames(), KnobsOf(rec), KnobsFor(gpu.SharingMIG))
	}
	if slices.Contains(KnobsOf(&clocksOnly{}), knobMemoryClocks) {
		t.Error("a backend without LockMemoryClocks drives the knob")
	}
	if d := DescribeActuators([]NamedActuator{{Name: "sim", Impl: rec}}); !slices.Contains(d, ActuatorInfo{Knob: knobMemoryClocks, Backend: "sim"}) {
		t.Errorf("DescribeActuators %v: the knob lacks its backend", d)
	}

	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := openJournal(t, path)
	lock := Action{Target: Target{GPU: uuid0, Knob: knobMemoryClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1593, MaxMHz: 1593}, Reason: "test"}
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	rec.Errs = map[string]error{"SetPowerLimit": errors.New("driver refused")}
	tu, clk := newTestTuner(t, ModeEnforce, rec, []Action{lock, power}, j, &Backoff{Base: time.Minute, Max: 4 * time.Minute})
	if n := tu.Status().Counts.Actions[ActionKey{knobMemoryClocks, OutcomeApplied}]; n != 0 {
		t.Errorf("applied counter %d before any action", n)
	}

	// The power limit fails on the GPU: the memory clock lock applied
	// before it in the round is rolled back.
	ds, err := tu.RunOnce(ctx, emptySnap(t0))
	if err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "first round", rec, "LockMemoryClocks(GPU-0,1593,1593)", "SetPowerLimit(GPU-0,490)", "LockMemoryClocks(GPU-0,0,0)")
	wantOutcomes(t, "first round", ds, OutcomeApplied, OutcomeFailed, OutcomeRolledBack)
	if o := j.Originals(); !slices.ContainsFunc(o, func(o Original) bool { return o.Target == lock.Target && o.Value == ClockRange{} }) {
		t.Errorf("journaled originals %v: want the memory clocks unlocked", o)
	}

	// Both back off; then, the power limit dropped, the lock is applied.
	clk.Advance(30 * time.Second)
	ds, _ = tu.RunOnce(ctx, emptySnap(clk.Now()))
	wantCalls(t, "during the back-off", rec)
	wantOutcomes(t, "during the back-off", ds, OutcomeGuarded, OutcomeGuarded)
	tu.o.Policy = fixed{lock}
	clk.Advance(time.Minute)
	ds, _ = tu.RunOnce(ctx, emptySnap(clk.Now()))
	wantCalls(t, "after the back-off", rec, "LockMemoryClocks(GPU-0,1593,1593)")
	wantOutcomes(t, "after the back-off", ds, OutcomeApplied)
	if c := tu.Status().Counts.Actions; c[ActionKey{knobMemoryClocks, OutcomeApplied}] != 2 || c[ActionKey{knobMemoryClocks, OutcomeRolledBack}] != 1 {
		t.Errorf("counts %v", c)
	}

	// A crash: the next start restores the originals from the journal
	// before deciding anything (the power limit's too, journaled before
	// its failed change).
	j.Close()
	j2 := openJournal(t, path)
	defer j2.Close()
	next := &recorder{}
	tu2, _ := newTestTuner(t, ModeEnforce, next, nil, j2)
	if _, err := tu2.RunOnce(ctx, emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "restore after the crash", next, "LockMemoryClocks(GPU-0,0,0)", "SetPowerLimit(GPU-0,700)")
	if n := len(j2.Originals()); n != 0 {
		t.Errorf("%d originals open after the restore", n)
	}

	// Disabled, the knob is never changed.
	off := &recorder{}
	tu3, err := New(Options{Policy: fixed{lock}, Actuators: ActuatorsOf(off), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Disabled: []gpu.Knob{knobMemoryClocks}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu3.RunOnce(ctx, emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "disabled", off)
}

// wantCalls checks the actuator calls since the last check, and forgets
// them.
func wantCalls(t *testing.T, when string, rec *recorder, want ...string) {
	t.Helper()
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("%s: calls %q, want %q", when, rec.Calls, want)
	}
	rec.Calls = nil
}

// wantOutcomes checks the decisions' outcomes.
func wantOutcomes(t *testing.T, when string, ds []Decision, want ...Outcome) {
	t.Helper()
	var got []Outcome
	for _, d := range ds {
		got = append(got, d.Outcome)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: outcomes %v, want %v", when, got, want)
	}
}
