package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
)

// Without --mps.restart-hook (the default) nothing starts an MPS client
// with a cap set for it: a running client cannot be changed, and one that
// restarts by itself is started by its own supervisor, without the
// exporter's value. So the client cap is not available there: the round's
// knobs say why, a policy sees it unchangeable (and turns to the pause),
// and a cap asked all the same is refused untried, nothing held pending
// at the controller, no original journaled. Before, the cap was set
// pending in the exporter's memory and journaled applied, "pending until
// the client starts a new context", which never came: the policy took
// the remedy as on its way, the latency tenant kept violating.
func TestMPSClientCapWithoutRestartHook(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	c, f := mpsDaemon(t, "100", "", clk)
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	tg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}
	changeable := true
	var decide deciderFunc = func(s *State) []Action {
		changeable = s.Changeable(tg)
		return []Action{{Target: tg, Tenant: "batch", Current: Fraction(1), Want: Fraction(0.3), Restart: true, Reason: "test"}}
	}
	tu, err := New(Options{Policy: decide, Actuators: ActuatorsOf(c), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"}))
	if err != nil {
		t.Fatal(err)
	}
	if changeable {
		t.Error("the policy sees the client's cap changeable")
	}
	if len(d) != 1 || d[0].Outcome != OutcomeRefused || d[0].Applied || !strings.Contains(d[0].Reason, mps.NoRestartHook) {
		t.Errorf("decisions %+v, want the cap refused: %s", d, mps.NoRestartHook)
	}
	if st, ok := c.State(uuid0, 8); ok && st.Pending != nil {
		t.Errorf("the controller holds %v pending for client 8", *st.Pending)
	}
	if calls := f.Calls(t, "nvidia-cuda-mps-control"); len(calls) != 0 {
		t.Errorf("the daemon was asked %d times, want never", len(calls))
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals journaled: %+v", o)
	}
	st := tu.Status()
	if len(st.GPUs) != 1 {
		t.Fatalf("status GPUs %+v", st.GPUs)
	}
	i := slices.IndexFunc(st.GPUs[0].Knobs, func(k KnobAvailability) bool { return k.Knob == gpu.KnobMPSActiveThreads })
	if i < 0 {
		t.Fatalf("no %s among the GPU's knobs %+v", gpu.KnobMPSActiveThreads, st.GPUs[0].Knobs)
	}
	if k := st.GPUs[0].Knobs[i]; k.Available || !k.Driven || k.Why() != mps.NoRestartHook {
		t.Errorf("%s: %+v, why %q; want driven, not available: %s", k.Knob, k, k.Why(), mps.NoRestartHook)
	}
}

// With a restart hook the client cap is available, its why empty.
func TestMPSClientCapWithRestartHook(t *testing.T) {
	c, _ := mpsDaemon(t, "100", "echo ok", gpu.NewManualClock(t0))
	av := knobAvailability(ActuatorsOf(c), uuid0, gpu.KnobMPSActiveThreads, nil, nil)
	if !av.Available || av.Why() != "" {
		t.Errorf("%+v, why %q; want available", av, av.Why())
	}
}
