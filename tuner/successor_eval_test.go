package tuner

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A relaxed MPS cap whose client went on under a successor (the restart
// hook named it) is judged there: its pending evaluation and its change
// follow the successor, and outlive the old PID, gone for good (they were
// forgotten with it a minute later, the relaxed cap never judged).
func TestRelaxedCapJudgedOnSuccessor(t *testing.T) {
	host := &successorHost{next: map[uint32]uint32{7: 9}}
	clk := gpu.NewManualClock(t0)
	relax := mpsAction(7, 0.5, 1)
	relax.Relax = true
	tu, err := New(Options{Policy: fixed{relax}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce, RevertAfter: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	tu.o.Policy = fixed(nil)
	one := 1.0
	for range 6 { // 90 s: the successor runs; PID 7 is gone for good
		clk.Advance(15 * time.Second)
		s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(9, &one), mpsProc(8, nil)}}}, nil)
		if _, err := tu.RunOnce(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	succ := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}
	if len(tu.evals) != 1 || tu.evals[0].a.Target != succ {
		t.Fatalf("pending evaluations %+v, want the relaxed cap's, on PID 9", tu.evals)
	}
	if _, ok := tu.changes[succ.String()]; !ok {
		t.Errorf("no change kept for the successor")
	}
}

// A relaxed MPS cap whose client was restarted through a hook that names
// no successor is judged once the successor is told, past the bound, on
// it: a judgement that comes due while the successor is looked for waits
// (on the old PID, gone, a revert would restart a process that is not
// there), and one whose successor cannot be told is dropped with it.
func TestRelaxedCapJudgedOnUnnamedSuccessor(t *testing.T) {
	embed := func(pid uint32) proc { return proc{pid, "embed"} }
	batch := func(pid uint32) proc { return proc{pid, "batch"} }
	for _, c := range []struct {
		name  string
		after []proc   // every round after the restart
		calls []string // the judgement's revert, once due
	}{
		{"told", []proc{batch(8), embed(9)}, []string{"SetMPSActiveThreads(GPU-0,9,0.5000)", "RestartClient(GPU-0,9)"}},
		{"not told", []proc{batch(8), embed(9), embed(10)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &successorHost{}
			clk := gpu.NewManualClock(t0)
			relax := mpsAction(7, 0.5, 1)
			relax.Relax = true
			tu, err := New(Options{Policy: fixed{relax}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce, RevertAfter: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(context.Background(), tenantSnap(t0, embed(7), batch(8))); err != nil {
				t.Fatal(err)
			}
			tu.o.Policy, host.Calls = fixed(nil), nil
			if len(tu.evals) != 1 {
				t.Fatalf("pending evaluations %+v, want the relaxed cap's", tu.evals)
			}
			tu.evals[0].before = -1 // the SLO error rose since: it did harm
			for i := range 5 {      // due at 30 s; the successor told at 75 s
				clk.Advance(15 * time.Second)
				ps := c.after
				if i < 2 { // the old client drains for 30 s
					ps = append([]proc{embed(7)}, ps...)
				}
				if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), ps...)); err != nil {
					t.Fatal(err)
				}
				if i < 3 && len(host.Calls) != 0 {
					t.Fatalf("%d s after the restart, the successor still looked for: calls %q, want none", 15*(i+1), host.Calls)
				}
			}
			if !slices.Equal(host.Calls, c.calls) || len(tu.evals) != 0 {
				t.Errorf("calls %q, evaluations pending %+v; want %q, none", host.Calls, tu.evals, c.calls)
			}
		})
	}
}
