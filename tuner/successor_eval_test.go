package tuner

import (
	"context"
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
