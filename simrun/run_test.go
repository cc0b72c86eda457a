package simrun_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// BenchmarkEightGPUHot runs the benchmark scenario (8 GPUs, 32 tenants) for
// its 10 virtual minutes with a policy, sampling every second, without
// writing files: the cost of the whole observe-decide-record loop.
func BenchmarkEightGPUHot(b *testing.B) {
	for _, policy := range []string{"best-effort", "static-equal"} {
		b.Run(policy, func(b *testing.B) {
			cfg := simrun.Config{Scenario: "../scenarios/eight-gpu-hot.yaml", Policy: policy, Step: time.Second}
			b.ReportAllocs()
			for b.Loop() {
				res, err := simrun.Run(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if n := len(res.Recorder.Steps()); n != 600 {
					b.Fatalf("%d steps", n)
				}
			}
		})
	}
}

// recorder is a policy that records the actuators it is given and what it
// observes.
type recorder struct {
	act   []tuner.Actuators
	snaps int
}

func (*recorder) Name() string { return "recorder" }

func (r *recorder) Init(_ context.Context, act tuner.Actuators, _ *tenant.Snapshot) error {
	r.act = append(r.act, act)
	return nil
}

func (r *recorder) Observe(_ context.Context, act tuner.Actuators, _ *tenant.Snapshot) ([]tuner.Decision, error) {
	r.act = append(r.act, act)
	r.snaps++
	// One applied change and one that was not: only the first is marked
	// on the plots.
	return []tuner.Decision{{GPU: "g", Applied: true, To: "applied"}, {GPU: "g", To: "refused"}}, nil
}

// A registered planner is given the run's scenario, seed, duration and
// actuators; the run is of the scenario it returns, under the policy it
// makes, acting through the actuators Config.Actuators wraps the run's
// simulator into, one observation a step.
func TestRunPlanner(t *testing.T) {
	var setup simrun.Setup
	pol := &recorder{}
	wrapped := 0
	simrun.RegisterPlanner("test-planner", func(_ context.Context, s simrun.Setup) (*simrun.Plan, error) {
		setup = s
		sc := *s.Scenario
		sc.Name = "planned"
		return &simrun.Plan{
			Scenario: &sc,
			Policy:   func() tuner.Policy { return pol },
			Write:    func(w io.Writer) { io.WriteString(w, "planned\n") },
		}, nil
	})
	if !slices.Contains(simrun.PolicyNames(), "test-planner") || !slices.Contains(simrun.PolicyNames(), baseline.StaticEqualName) {
		t.Errorf("policy names %v lack the planner or a tuner policy", simrun.PolicyNames())
	}
	cfg := simrun.Config{
		Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "test-planner", Duration: 10 * time.Second, Step: 2 * time.Second,
		Seed: 5, SeedSet: true,
		Actuators: func(s *sim.Simulator) tuner.Actuators { wrapped++; return tuner.ActuatorsOf(s) },
	}
	res, err := simrun.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup.Scenario == nil || setup.Scenario.Name != "noisy-neighbour" || setup.Seed != 5 || setup.Duration != 10*time.Second || setup.Step != 2*time.Second || setup.Actuators == nil {
		t.Errorf("planner setup %+v", setup)
	}
	if m := res.Recorder.Meta(); m.Scenario != "planned" || m.Policy != "recorder" || m.Seed != 5 {
		t.Errorf("run meta %+v: want the planned scenario under the planner's policy", m)
	}
	if pol.snaps != 5 || len(res.Decisions) != 10 || len(res.Recorder.Steps()) != 5 {
		t.Errorf("%d observations, %d decisions, %d steps; want 5, 10, 5", pol.snaps, len(res.Decisions), len(res.Recorder.Steps()))
	}
	if ch := res.Recorder.Changes(); len(ch) != 5 || slices.ContainsFunc(ch, func(c report.Change) bool { return c.To != "applied" }) {
		t.Errorf("changes marked on the plots: %+v; want the 5 applied ones", ch)
	}
	if len(pol.act) == 0 || !slices.Contains(pol.act[0].Knobs(), gpu.KnobMPSActiveThreads) {
		t.Error("the planner's policy was not given the run's actuators")
	}
	if wrapped != 1 {
		t.Errorf("Config.Actuators called %d times, want once for the run", wrapped)
	}
	var out strings.Builder
	res.Plan.Write(&out)
	if out.String() != "planned\n" {
		t.Errorf("plan writes %q", out.String())
	}

	cfg.DisabledKnobs = []string{"locked_clocks"}
	if _, err := simrun.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "only a tuner policy") {
		t.Errorf("a planner with --disable-knob: %v", err)
	}
	cfg.DisabledKnobs, cfg.Policy = nil, "magic"
	if _, err := simrun.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `unknown policy "magic"`) {
		t.Errorf("unknown policy: %v", err)
	}
}

// An unknown policy's error lists every policy a run takes, planners
// (the oracle) included.
func TestUnknownPolicyListsAll(t *testing.T) {
	simrun.RegisterPlanner("test-listed", func(context.Context, simrun.Setup) (*simrun.Plan, error) { return nil, nil })
	_, err := simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "autotun", Duration: time.Second, Step: time.Second})
	if err == nil || !strings.Contains(err.Error(), `unknown policy "autotun"`) || !strings.Contains(err.Error(), "test-listed") || !strings.Contains(err.Error(), "autotune") {
		t.Errorf("error %v: want the unknown name and every policy, planners included", err)
	}
}
