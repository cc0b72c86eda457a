package tuner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A revert due that waits for its tenant's restart hook on another GPU is
// in the published status (HookWaits), with the hook it waits for, and
// its GPU's line says so; once the hook is settled it is gone. (Before,
// the status said nothing of it: the GPU's line gave another reason.)
func TestHookWaitInStatus(t *testing.T) {
	r := newHookRun(t)
	round := func(actions ...Action) {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		r.tu.o.Policy = fixed(actions)
		snap := twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, []proc{{9, "batch"}})
		if _, err := r.tu.RunOnce(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	other := capBatch
	other.GPUIndex = 1
	other.Target = Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 9}
	round(other)
	since := r.clk.Now()
	r.host.waitStarted(t)
	r.revertsDue(relaxedBatch())
	round()
	st := r.tu.Status()
	release := func() {
		r.host.release <- nil
		waitHookEnded(t, r.tu)
	}
	if len(st.HookWaits) != 1 {
		release()
		t.Fatalf("status hook waits %+v, want the revert of PID 8", st.HookWaits)
	}
	w := st.HookWaits[0]
	if w.GPU != uuid0 || w.GPUIndex != 0 || w.Tenant != "batch" || w.Knob != gpu.KnobMPSActiveThreads || w.PID != 8 || w.Restore ||
		w.From != "100%" || w.To != "50%" || w.Hook.GPU != "GPU-1" || w.Hook.Tenant != "batch" || w.Hook.Plan || !w.Hook.Since.Equal(since) {
		t.Errorf("hook wait %+v", w)
	}
	want := "revert of mps_active_threads of batch 100% → 50% waits for batch's restart hook on GPU 1, running since " + since.UTC().Format("15:04:05") + " UTC (15s; due, judged once that hook is settled)"
	if len(st.GPUs) != 2 || st.GPUs[0].Kind != RoundWaiting || st.GPUs[0].Why != want {
		t.Errorf("GPU 0's line %+v, want waiting: %s", st.GPUs, want)
	}
	release()
	round()
	if st := r.tu.Status(); len(st.HookWaits) != 0 || strings.Contains(st.GPUs[0].Why, "waits for") {
		t.Errorf("after the hook was settled: waits %+v, GPU 0's line %q", st.HookWaits, st.GPUs[0].Why)
	}
}

// A wait's words name the hook: a tenant's restart hook, or the plan that
// moves the waiting tenant (whose first move may be another's).
func TestHookWaitWhy(t *testing.T) {
	at := time.Date(2026, 1, 2, 9, 14, 5, 0, time.UTC)
	for _, c := range []struct {
		name string
		w    HookWait
		want string
	}{
		{"a revert beside a restart", HookWait{Tenant: "batch", Knob: gpu.KnobMPSActiveThreads, PID: 8, From: "100%", To: "50%",
			Hook: HookRun{GPUIndex: 1, Tenant: "batch", Since: at}},
			"revert of mps_active_threads of batch 100% → 50% waits for batch's restart hook on GPU 1, running since 09:14:05 UTC (40s; due, judged once that hook is settled)"},
		{"a restore beside a plan", HookWait{Tenant: "batch", Knob: gpu.KnobMPSActiveThreads, PID: 9, Restore: true, From: "50%", To: "100%",
			Hook: HookRun{GPUIndex: 2, Tenant: "other", Plan: true, Since: at}},
			"restore of mps_active_threads of batch 50% → 100% waits for the rebalancing plan moving batch, started on GPU 2, running since 09:14:05 UTC (40s; of PID 9, started once that hook is settled)"},
	} {
		if got := c.w.Why(at.Add(40 * time.Second)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
