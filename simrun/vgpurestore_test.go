package simrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// scripted is a policy that asks, each round, the actions its rounds give
// in turn (then none).
type scripted struct{ rounds [][]tuner.Action }

func (*scripted) Name() string { return "scripted" }
func (p *scripted) Decide(*tuner.State) []tuner.Action {
	if len(p.rounds) == 0 {
		return nil
	}
	a := p.rounds[0]
	p.rounds = p.rounds[1:]
	return a
}

// On the simulator's vGPU host, which refuses a scheduler change while VMs
// run: the tuner changes the scheduler and reverts it before the VM
// starts, and exits while it runs. The exit finds the scheduler at its
// original and closes it restored without a call. (Before, it set the
// scheduler again, was refused as busy until its deadline and counted a
// restore failure.)
func TestExitVGPUSchedulerRevertedWhileVMRuns(t *testing.T) {
	sc, err := sim.ParseScenario("v.yaml", []byte(`name: v
gpus:
  - model: H100-SXM5-80GB
    sharing: vgpu
    vgpu: {policy: best-effort}
tenants:
  - name: a
    stopped: true
    memory: 8GiB
    workload: {type: dnn, flops: 1e12, arrival: {process: poisson, rate: 100}}
events:
  - {at: 20s, tenant: a, action: start}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uuid := sc.GPUs[0].UUID
	sched := func(from, to string, revert bool) tuner.Action {
		return tuner.Action{Target: tuner.Target{GPU: uuid, Knob: gpu.KnobVGPUScheduler}, Current: tuner.Scheduler{Policy: gpu.VGPUPolicy(from)}, Want: tuner.Scheduler{Policy: gpu.VGPUPolicy(to)}, Revert: revert, Reason: "test"}
	}
	clk := gpu.NewManualClock(s.Now())
	tu, err := tuner.New(tuner.Options{Policy: &scripted{rounds: [][]tuner.Action{
		{sched("best-effort", "equal-share", false)}, {sched("equal-share", "best-effort", true)}, nil,
	}}, Actuators: tuner.ActuatorsOf(s), Clock: clk, Mode: tuner.ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := s.Now()
	for _, at := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
		s.AdvanceTo(start.Add(at))
		clk.Set(s.Now())
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := tu.RunOnce(ctx, &tenant.Snapshot{Time: r.Time, Readings: r})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if !d.Applied {
				t.Fatalf("at %v: %v, want it applied", at, d)
			}
		}
	}
	if err := s.SetVGPUScheduler(ctx, uuid, gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyBestEffort}); err == nil {
		t.Fatal("the simulator took a scheduler change with the VM running")
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	ds, err := tu.Restore(rctx)
	if err != nil {
		t.Fatalf("exit's restore: %v", err)
	}
	c := tu.Status().Counts
	if len(ds) != 1 || ds[0].Outcome != tuner.OutcomeRestored || c.Restores != 1 || c.RestoreFailures != 0 {
		t.Errorf("exit's restore %v; restores %d, failures %d; want one restored, no failure", ds, c.Restores, c.RestoreFailures)
	}
}
