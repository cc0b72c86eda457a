package oracle

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// fixedPlan is the plan the planner fixed-plan runs (TestOracleFiguresAreTheReports).
var fixedPlan *Plan

func init() {
	simrun.RegisterPlanner("fixed-plan", func(_ context.Context, s simrun.Setup) (*simrun.Plan, error) {
		p := fixedPlan
		return &simrun.Plan{Scenario: placed(s.Scenario, p), Policy: func() tuner.Policy { return policy(p) }}, nil
	})
}

// TestOracleFiguresAreTheReports: the figures a search ranks a plan by
// over the whole run (the replay's phases summed) are those the run
// report gives the same plan run as the tables run it: each tenant's work
// and goodput, and the SLO tenant's attainment, verdict, dropped and
// overdue requests. The plan caps the training job at the last phase's
// start, which restarts it: it has steps to redo at the run's end, which
// the report takes from its work and goodput. Where the phase starts on
// the minute, the restart takes virtual time, and the report counts the
// run's step that ends after it (the second before the phase) in the
// phase's first minute, in which the chat misses its SLO.
func TestOracleFiguresAreTheReports(t *testing.T) {
	if testing.Short() {
		t.Skip("two runs of 3 virtual minutes")
	}
	tests := []struct {
		name string
		at   string // the event that starts the last phase
	}{
		{"a restart inside a minute", "2m30s"},
		{"a restart on the minute", "2m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "redo.yaml")
			src := `name: redo
duration: 3m
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: chat, process: {pid: 11}, memory: 8GiB, slo: {quantile: 0.9, target: 60ms}, workload: {type: dnn, flops: 2e12, max_batch: 8, arrival: {process: poisson, rate: 100}}}
  - {name: train, process: {pid: 12}, memory: 8GiB, workload: {type: training, flops: 2e13, checkpoint_interval: 2m}}
events:
  - {at: ` + tc.at + `, tenant: chat, action: rate, rate: 400}
`
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			sc, err := sim.LoadScenario(path)
			if err != nil {
				t.Fatal(err)
			}
			o := &oracleSearch{sc: sc, seed: 1, dur: sc.Duration, phases: phaseBounds(sc, sc.Duration),
				actuators: func(s *sim.Simulator) tuner.Actuators { return tuner.ActuatorsOf(s) }}
			p := &Plan{Phases: o.phases}
			p.Phases[1].GPUs[0].Caps = map[uint32]float64{12: 0.3}
			phases, err := o.replayAll(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			got := mergedRun(phases)
			fixedPlan = p
			res, err := simrun.Run(context.Background(), simrun.Config{Scenario: path, Policy: "fixed-plan", Seed: 1, SeedSet: true, Step: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			sum := res.Recorder.Summary()
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(math.Abs(a), math.Abs(b)) }
			for _, ts := range sum.Tenants {
				var tw sim.TenantWindow
				for _, w := range got.Tenants {
					if w.Tenant == ts.Tenant {
						tw = w
					}
				}
				if ts.Tenant == "train" && tw.Redo == 0 {
					t.Errorf("train has no step to redo at the end: the plan tests nothing")
				}
				if w := got.work[ts.Tenant] / sum.Seconds; !near(w, ts.WorkRate) {
					t.Errorf("%s: work %v/s, the report's %v/s", ts.Tenant, w, ts.WorkRate)
				}
				if g := got.heldWork[ts.Tenant] / sum.Seconds; !near(g, ts.Goodput) {
					t.Errorf("%s: goodput %v/s, the report's %v/s", ts.Tenant, g, ts.Goodput)
				}
				if tw.SLOTarget == 0 {
					continue
				}
				att := float64(tw.Good) / float64(tw.Ended()+tw.Overdue)
				if ts.Attainment == nil || !near(att, *ts.Attainment) || ts.SLOMet == nil || report.RunMet(tw) != *ts.SLOMet ||
					tw.Dropped != ts.Dropped || tw.Overdue != ts.Overdue {
					t.Errorf("%s: attainment %v, met %v, dropped %d, overdue %d; the report's %v, %v, %d, %d",
						ts.Tenant, att, report.RunMet(tw), tw.Dropped, tw.Overdue, ts.Attainment, ts.SLOMet, ts.Dropped, ts.Overdue)
				}
			}
		})
	}
}
