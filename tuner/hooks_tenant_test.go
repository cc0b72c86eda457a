package tuner

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Two restarts of one tenant's clients, on two GPUs, do not run their
// hooks at once: the second waits until the first is settled, then starts
// (before, both hooks ran together, and a hook that restarts the tenant's
// serving stack ran twice over it at once).
func TestHookOneTenantAtATime(t *testing.T) {
	r := newHookRun(t)
	const uuid1 = "GPU-1"
	snap := func() *tenant.Snapshot {
		return snapshot(r.clk.Now(), []gpu.Device{
			{Index: 0, UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(8, nil)}},
			{Index: 1, UUID: uuid1, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(9, nil)}},
		}, []tenant.Usage{{Tenant: "batch", UUID: uuid0, PIDs: []uint32{8}}, {Tenant: "batch", UUID: uuid1, PIDs: []uint32{9}}})
	}
	other := capBatch
	other.GPUIndex = 1
	other.Target = Target{GPU: uuid1, Knob: gpu.KnobMPSActiveThreads, PID: 9}
	restarts := func() []string {
		return slices.DeleteFunc(r.host.Calls(), func(c string) bool { return !strings.HasPrefix(c, "RestartClient") })
	}
	round := func(actions ...Action) []Decision {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		r.tu.o.Policy = fixed(append(actions, other))
		d, err := r.tu.RunOnce(context.Background(), snap())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	round(capBatch)
	r.host.waitStarted(t)
	round()
	if got, want := restarts(), []string{"RestartClient(GPU-0,8)"}; !slices.Equal(got, want) {
		t.Fatalf("restarts while the first hook runs %q, want only %q", got, want)
	}
	if g := r.tu.Status().GPUs; len(g) != 2 || g[1].Kind != RoundWaiting || !strings.Contains(g[1].Why, "waits for the hook under way for batch on GPU 0, started 15s ago") {
		t.Errorf("GPU 1's round %+v, want it to say its restart waits for batch's hook on GPU 0", g)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d := round()
	if got, want := outcomes(d), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
		t.Fatalf("round after the first hook ended: %v, want %v", got, want)
	}
	waitHookEnded(t, r.tu) // (the second's hook answers at once)
	if got, want := restarts(), []string{"RestartClient(GPU-0,8)", "RestartClient(GPU-1,9)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q (the second once the first is settled)", got, want)
	}
}

// A restart that waits for a rebalancing plan running on another GPU says
// so on its GPU's line, whichever of the plan's moves is its tenant's
// (before, only a plan whose first move was the tenant's was named; one
// that moved it second left "asked for already and is waiting to take
// effect").
func TestRestartWaitNamesThePlan(t *testing.T) {
	move := func(tenant string, pid uint32) gpu.Move { return gpu.Move{Tenant: tenant, PID: pid, ToUUID: uuid0} }
	for _, c := range []struct {
		name  string
		moves []gpu.Move
	}{
		{"first move", []gpu.Move{move("batch", 10), move("other", 9)}},
		{"second move", []gpu.Move{move("other", 9), move("batch", 10)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := Action{Target: Target{GPU: "GPU-1", Knob: gpu.KnobPlacement, PID: c.moves[0].PID}, GPUIndex: 1, Tenant: c.moves[0].Tenant,
				Plan: &gpu.Plan{Moves: c.moves}}
			tu := &Tuner{hooks: map[string]*hookCall{plan.Target.String(): {a: plan, started: t0}}}
			rs := gpuRounds(roundInput{snap: roundSnap(), modeOf: func(string, int) Mode { return ModeEnforce }, actions: []Action{capBatch},
				hooks: tu.hookRuns(), holder: tu.holderRun, now: t0.Add(15 * time.Second)})
			want := "the restart of batch's client 8 waits for the rebalancing plan moving batch, started on GPU 1 15s ago"
			if len(rs) != 2 || rs[0].Kind != RoundWaiting || !strings.Contains(rs[0].Why, want) {
				t.Errorf("GPU 0's round %+v, want %s %q", rs, RoundWaiting, want)
			}
		})
	}
}
