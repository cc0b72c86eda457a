package rebalance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The slow loop's plans through the tuner: the rounds of a host whose
// placement the tuner applies (recordingPlacement).

// noDecide decides nothing: only the slow loop acts.
type noDecide struct{}

func (noDecide) Name() string                       { return "none" }
func (noDecide) Decide(*tuner.State) []tuner.Action { return nil }

// recordingPlacement records the moves it is asked for.
type recordingPlacement struct {
	moves []string
	err   error
}

func (r *recordingPlacement) MoveProcess(_ context.Context, pid uint32, to string) error {
	r.moves = append(r.moves, fmt.Sprintf("%d->%s", pid, to))
	return r.err
}

// placementRounds runs placementRound every minute for 20 minutes, chat's
// counters growing by 600 requests a minute, and returns the placement
// decisions of them all.
func placementRounds(t *testing.T, tu *tuner.Tuner, clock *gpu.ManualClock) []string {
	t.Helper()
	var plans []string
	for i := range 20 {
		plans = append(plans, placementRound(t, tu, clock, float64(600*(i+1)))...)
		clock.Advance(time.Minute)
	}
	return plans
}

// placementRound runs one round of tu on rebalanceState at the clock's
// time, the chat tenant's counters at n requests, 90% of them good, and
// returns the round's placement decisions as "<time since t0> <tenant>
// <outcome>".
func placementRound(t *testing.T, tu *tuner.Tuner, clock gpu.Clock, n float64) []string {
	t.Helper()
	var out []string
	for _, d := range placementDecisions(t, tu, clock, n) {
		out = append(out, fmt.Sprintf("%v %s %s", clock.Now().Sub(t0), d.Tenant, d.Outcome))
	}
	return out
}

// placementDecisions runs the round of placementRound, its processes in
// the workloads ws (inWorkloads), and returns its placement decisions.
func placementDecisions(t *testing.T, tu *tuner.Tuner, clock gpu.Clock, n float64, ws ...tenant.Workload) []tuner.Decision {
	t.Helper()
	st := inWorkloads(rebalanceState(0.3, 0.2, 40*gib, 0.9), ws...)
	st.Snapshot.Time = clock.Now()
	st.Snapshot.SLOs[0].RequestsTotal, st.Snapshot.SLOs[0].GoodRequestsTotal = n, 0.9*n
	decs, err := tu.RunOnce(context.Background(), st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(decs, func(d tuner.Decision) bool { return d.Knob != gpu.KnobPlacement })
}

// The tuner's slow loop plans once the dwell has passed, applies the plan
// through the placement actuator in enforce mode, only recommends it in
// recommend mode, and waits out the cool-down before the next. A GPU in
// off or recommend (--tuner.gpu-mode) receives no tenant: the planner
// moves it to another GPU in enforce, and a plan onto such a GPU all the
// same (a planner that ignores the modes) is made in the safest mode of
// the GPUs it changes: dropped onto one off, recommended onto one in
// recommend.
func TestTunerRebalances(t *testing.T) {
	applied, recommended := tuner.OutcomeApplied, tuner.OutcomeRecommended
	for _, tc := range []struct {
		name      string
		mode      tuner.Mode
		gpuModes  map[string]tuner.Mode
		planner   tuner.RebalancePlanner
		want      string
		wantMoves string
	}{
		{"enforce", tuner.ModeEnforce, nil, Default(), fmt.Sprintf("[4m0s train %s 14m0s embed %s]", applied, applied), "[20->GPU-c 21->GPU-c 30->GPU-c]"},
		{"recommend", tuner.ModeRecommend, nil, Default(), fmt.Sprintf("[4m0s train %s 14m0s train %s]", recommended, recommended), "[]"},
		{"GPU-c off", tuner.ModeEnforce, map[string]tuner.Mode{"GPU-c": tuner.ModeOff}, Default(),
			fmt.Sprintf("[4m0s train %s 14m0s embed %s]", applied, applied), "[20->GPU-b 21->GPU-b 30->GPU-b]"},
		{"GPU-c recommend", tuner.ModeEnforce, map[string]tuner.Mode{"GPU-c": tuner.ModeRecommend}, Default(),
			fmt.Sprintf("[4m0s train %s 14m0s embed %s]", applied, applied), "[20->GPU-b 21->GPU-b 30->GPU-b]"},
		{"GPU-c off, a planner ignoring the modes", tuner.ModeEnforce, map[string]tuner.Mode{"GPU-c": tuner.ModeOff}, ignoresModes{Default()}, "[]", "[]"},
		{"GPU-c recommend, a planner ignoring the modes", tuner.ModeEnforce, map[string]tuner.Mode{"GPU-c": tuner.ModeRecommend}, ignoresModes{Default()},
			fmt.Sprintf("[4m0s train %s 14m0s train %s]", recommended, recommended), "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			pl := &recordingPlacement{}
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tc.mode, GPUModes: tc.gpuModes, Actuators: tuner.ActuatorsOf(pl), Rebalance: tc.planner,
				Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			// Enforced, the training job is held after its move, so the
			// next plan moves the other neighbour.
			if plans := placementRounds(t, tu, clock); fmt.Sprint(plans) != tc.want {
				t.Errorf("plans %v, want %s", plans, tc.want)
			}
			if fmt.Sprint(pl.moves) != tc.wantMoves {
				t.Errorf("moves %v, want %s", pl.moves, tc.wantMoves)
			}
		})
	}
}

// ignoresModes is a planner that plans as if every GPU were in enforce.
type ignoresModes struct{ *Planner }

func (p ignoresModes) PlanRebalance(s *tuner.State, in tuner.RebalanceInput) (gpu.Plan, bool) {
	c := *s
	c.Modes = nil
	return p.Planner.PlanRebalance(&c, in)
}
