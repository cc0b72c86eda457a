package tuner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

const gib = 1 << 30

// rebalanceState is a host of GPU-a (hot: chat missing its SLO beside a
// training job) and GPU-b and GPU-c with the given SM activity.
func rebalanceState(busyB, busyC float64, freeB uint64, chatGood float64) *State {
	dev := func(uuid string, busy float64, free uint64) gpu.Device {
		return gpu.Device{UUID: uuid, Up: true, Mode: gpu.SharingMPS, MemoryTotalBytes: 80 * gib, MemoryUsedBytes: 80*gib - free,
			Activity: gpu.Activity{SMActive: gpu.Float(busy)}}
	}
	snap := snapshot(t0.Add(time.Hour), []gpu.Device{dev("GPU-a", 0.95, 30*gib), dev("GPU-b", busyB, freeB), dev("GPU-c", busyC, 40*gib)},
		[]tenant.Usage{
			{Tenant: "chat", Class: gpu.ClassLatency, UUID: "GPU-a", PIDs: []uint32{10}, MemoryUsedBytes: 20 * gib, SMActive: gpu.Float(0.4)},
			{Tenant: "train", Class: gpu.ClassBatch, UUID: "GPU-a", PIDs: []uint32{20, 21}, MemoryUsedBytes: 24 * gib, SMActive: gpu.Float(0.5)},
			{Tenant: "embed", Class: gpu.ClassBestEffort, UUID: "GPU-a", PIDs: []uint32{30}, MemoryUsedBytes: 2 * gib, SMActive: gpu.Float(0.05)},
		})
	snap.Tenants = []tenant.Info{{Name: "chat", Priority: 10}, {Name: "train", Priority: 1}, {Name: "embed"}}
	snap.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 3, GoodKnown: true}}}
	return &State{Now: snap.Time, Snapshot: snap, Fast: map[string]FastSLO{"chat": {Over: time.Minute, Total: 600, Good: 600 * chatGood}}}
}

func TestPlanRebalance(t *testing.T) {
	r := DefaultRebalance()
	now := t0.Add(time.Hour)
	missing := map[string]time.Time{"chat": now.Add(-5 * time.Minute)}
	tests := []struct {
		name string
		st   *State
		in   RebalanceInput
		cost time.Duration // LoadCost; 0: the default
		want string        // "tenant pid from->to, ..." or "" for no plan
	}{
		{"move the training job to the idlest GPU with room", rebalanceState(0.3, 0.2, 40*gib, 0.9), RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"not before the dwell", rebalanceState(0.3, 0.2, 40*gib, 0.9), RebalanceInput{MissingSince: map[string]time.Time{"chat": now.Add(-time.Minute)}}, 0, ""},
		{"not within the cool-down", rebalanceState(0.3, 0.2, 40*gib, 0.9), RebalanceInput{MissingSince: missing, LastPlan: now.Add(-5 * time.Minute)}, 0, ""},
		{"SLO met: no move", rebalanceState(0.3, 0.2, 40*gib, 0.999), RebalanceInput{MissingSince: missing}, 0, ""},
		{"small miss, cheap move: move", rebalanceState(0.3, 0.2, 40*gib, 0.985), RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"gain below twice the cost: no move", rebalanceState(0.3, 0.2, 40*gib, 0.985), RebalanceInput{MissingSince: missing}, 10 * time.Minute, ""},
		{"no GPU with SM room", rebalanceState(0.7, 0.8, 40*gib, 0.9), RebalanceInput{MissingSince: missing}, 0, ""},
		{"memory decides the target", rebalanceState(0.1, 0.5, 10*gib, 0.9), RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"train moved recently: chat itself goes", rebalanceState(0.3, 0.2, 40*gib, 0.9),
			RebalanceInput{MissingSince: missing, Moved: map[string]time.Time{"train": now.Add(-10 * time.Minute), "embed": now}}, 0,
			"chat 10 GPU-a->GPU-c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := *r
			if tc.cost > 0 {
				r.LoadCost = tc.cost
			}
			p, ok := r.PlanRebalance(tc.st, tc.in)
			var got []string
			for _, m := range p.Moves {
				got = append(got, fmt.Sprintf("%s %d %s->%s", m.Tenant, m.PID, m.FromUUID, m.ToUUID))
			}
			if g := strings.Join(got, ", "); g != tc.want || ok != (tc.want != "") {
				t.Fatalf("plan %q (%v), want %q", g, ok, tc.want)
			}
			if ok && !strings.Contains(p.Reason, "expected gain") {
				t.Errorf("reason %q does not weigh gain against cost", p.Reason)
			}
		})
	}
}

// noDecide decides nothing: only the slow loop acts.
type noDecide struct{}

func (noDecide) Name() string           { return "none" }
func (noDecide) Decide(*State) []Action { return nil }

// recordingPlacement records the moves it is asked for.
type recordingPlacement struct {
	moves []string
	err   error
}

func (r *recordingPlacement) MoveProcess(_ context.Context, pid uint32, to string) error {
	r.moves = append(r.moves, fmt.Sprintf("%d->%s", pid, to))
	return r.err
}

// The tuner's slow loop plans once the dwell has passed, applies the plan
// through the placement actuator in enforce mode, only recommends it in
// recommend mode, and waits out the cool-down before the next.
func TestTunerRebalances(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeRecommend} {
		t.Run(string(mode), func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			pl := &recordingPlacement{}
			tu, err := New(Options{Policy: noDecide{}, Clock: clock, Mode: mode, Actuators: ActuatorsOf(pl), Rebalance: DefaultRebalance(),
				Guards: DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var plans []string
			for i := range 20 { // 20 minutes
				st := rebalanceState(0.3, 0.2, 40*gib, 0.9)
				st.Snapshot.Time = clock.Now()
				n := float64(600 * (i + 1))
				st.Snapshot.SLOs[0].RequestsTotal, st.Snapshot.SLOs[0].GoodRequestsTotal = n, 0.9*n
				decs, err := tu.RunOnce(context.Background(), st.Snapshot)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range decs {
					if d.Knob == gpu.KnobPlacement {
						plans = append(plans, fmt.Sprintf("%v %s %s", clock.Now().Sub(t0), d.Tenant, d.Outcome))
					}
				}
				clock.Advance(time.Minute)
			}
			// Enforced, the training job is held after its move, so the
			// next plan moves the other neighbour.
			want := fmt.Sprintf("[4m0s train %s 14m0s embed %s]", OutcomeApplied, OutcomeApplied)
			wantMoves := "[20->GPU-c 21->GPU-c 30->GPU-c]"
			if mode == ModeRecommend {
				want, wantMoves = fmt.Sprintf("[4m0s train %s 14m0s train %s]", OutcomeRecommended, OutcomeRecommended), "[]"
			}
			if fmt.Sprint(plans) != want {
				t.Errorf("plans %v, want %s", plans, want)
			}
			if fmt.Sprint(pl.moves) != wantMoves {
				t.Errorf("moves %v, want %s", pl.moves, wantMoves)
			}
		})
	}
}
