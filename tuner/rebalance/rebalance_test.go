package rebalance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

const gib = 1 << 30

// rebalanceState is a host of GPU-a (hot: chat missing its SLO beside a
// training job) and GPU-b and GPU-c with the given SM activity.
func rebalanceState(busyB, busyC float64, freeB uint64, chatGood float64) *tuner.State {
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
	return &tuner.State{Now: snap.Time, Snapshot: snap, Fast: map[string]tuner.FastSLO{"chat": {Over: time.Minute, Total: 600, Good: 600 * chatGood}}}
}

// memoryUnknown marks the named tenants' memory unknown in st (the driver
// gave no process's use: Usage.MemoryUnknown, its bytes 0).
func memoryUnknown(st *tuner.State, names ...string) *tuner.State {
	for i, u := range st.Snapshot.Usage {
		if slices.Contains(names, u.Tenant) {
			st.Snapshot.Usage[i].MemoryUsedBytes, st.Snapshot.Usage[i].MemoryUnknown = 0, true
		}
	}
	return st
}

func TestPlanRebalance(t *testing.T) {
	r := Default()
	now := t0.Add(time.Hour)
	missing := map[string]time.Time{"chat": now.Add(-5 * time.Minute)}
	tests := []struct {
		name string
		st   *tuner.State
		in   tuner.RebalanceInput
		cost time.Duration // LoadCost; 0: the default
		want string        // "tenant pid from->to, ..." or "" for no plan
	}{
		{"move the training job to the idlest GPU with room", rebalanceState(0.3, 0.2, 40*gib, 0.9), tuner.RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"not before the dwell", rebalanceState(0.3, 0.2, 40*gib, 0.9), tuner.RebalanceInput{MissingSince: map[string]time.Time{"chat": now.Add(-time.Minute)}}, 0, ""},
		{"not within the cool-down", rebalanceState(0.3, 0.2, 40*gib, 0.9), tuner.RebalanceInput{MissingSince: missing, LastPlan: now.Add(-5 * time.Minute)}, 0, ""},
		{"SLO met: no move", rebalanceState(0.3, 0.2, 40*gib, 0.999), tuner.RebalanceInput{MissingSince: missing}, 0, ""},
		{"small miss, cheap move: move", rebalanceState(0.3, 0.2, 40*gib, 0.985), tuner.RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"gain below twice the cost: no move", rebalanceState(0.3, 0.2, 40*gib, 0.985), tuner.RebalanceInput{MissingSince: missing}, 10 * time.Minute, ""},
		{"no GPU with SM room", rebalanceState(0.7, 0.8, 40*gib, 0.9), tuner.RebalanceInput{MissingSince: missing}, 0, ""},
		{"memory decides the target", rebalanceState(0.1, 0.5, 10*gib, 0.9), tuner.RebalanceInput{MissingSince: missing}, 0,
			"train 20 GPU-a->GPU-c, train 21 GPU-a->GPU-c"},
		{"memory unknown: nobody moves (no room can be told)", memoryUnknown(rebalanceState(0.3, 0.2, 40*gib, 0.9), "chat", "train", "embed"),
			tuner.RebalanceInput{MissingSince: missing}, 0, ""},
		{"train's memory unknown: it stays, chat goes", memoryUnknown(rebalanceState(0.3, 0.2, 40*gib, 0.9), "train"),
			tuner.RebalanceInput{MissingSince: missing, Moved: map[string]time.Time{"embed": now}}, 0, "chat 10 GPU-a->GPU-c"},
		{"train moved recently: chat itself goes", rebalanceState(0.3, 0.2, 40*gib, 0.9),
			tuner.RebalanceInput{MissingSince: missing, Moved: map[string]time.Time{"train": now.Add(-10 * time.Minute), "embed": now}}, 0,
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

// migState is one MIG GPU with a 3g (60 SMs) and a 1g (16 SMs) instance:
// a in the 3g at busyA of its SMs, b in the 1g at busyB, their fast
// windows aGood and bGood within target.
func migState(busyA, busyB float64, memA uint64, aGood, bGood float64) *tuner.State {
	inst := func(gi int, profile string, sms int, mem uint64, busy float64) gpu.MIGInstance {
		return gpu.MIGInstance{UUID: fmt.Sprintf("MIG-%d", gi), GPUInstanceID: gi, Profile: profile, SMCount: sms, MemoryTotalBytes: mem,
			Activity: gpu.Activity{SMActive: gpu.Float(busy)}}
	}
	d := gpu.Device{UUID: "GPU-m", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		MIG:       []gpu.MIGInstance{inst(1, "3g.40gb", 60, 40*gib, busyA), inst(2, "1g.10gb", 16, 10*gib, busyB)},
		Processes: []gpu.Process{{PID: 1, GPUInstanceID: 1}, {PID: 2, GPUInstanceID: 2}}}
	snap := snapshot(t0.Add(time.Hour), []gpu.Device{d}, []tenant.Usage{
		{Tenant: "a", Class: gpu.ClassLatency, UUID: "GPU-m", GPUInstance: "1", PIDs: []uint32{1}, MemoryUsedBytes: memA, SMActive: gpu.Float(busyA)},
		{Tenant: "b", Class: gpu.ClassLatency, UUID: "GPU-m", GPUInstance: "2", PIDs: []uint32{2}, MemoryUsedBytes: 6 * gib, SMActive: gpu.Float(busyB)},
	})
	snap.Tenants = []tenant.Info{{Name: "a", Priority: 5}, {Name: "b", Priority: 5}}
	snap.SLOs = []tenant.SLOStatus{{Tenant: "a", Status: latency.Status{Quantile: 0.95, TargetSeconds: 0.008, GoodKnown: true}},
		{Tenant: "b", Status: latency.Status{Quantile: 0.95, TargetSeconds: 0.008, GoodKnown: true}}}
	return &tuner.State{Now: snap.Time, Snapshot: snap, Fast: map[string]tuner.FastSLO{"a": {Over: time.Minute, Total: 9000, Good: 9000 * aGood}, "b": {Over: time.Minute, Total: 48000, Good: 48000 * bGood}}}
}

// builtName marks the second MIG instance of st's GPU as named from its
// slices and memory (gpu.MIGInstance.ProfileBuilt).
func builtName(st *tuner.State) *tuner.State {
	st.Snapshot.Readings.Devices[0].MIG[1].ProfileBuilt = true
	return st
}

func TestPlanRelayout(t *testing.T) {
	now := t0.Add(time.Hour)
	// missingFor: tenant has missed its SLO for d.
	missingFor := func(tenant string, d time.Duration) map[string]time.Time {
		return map[string]time.Time{tenant: now.Add(-d)}
	}
	missing := missingFor("b", 2*time.Minute)
	tests := []struct {
		name string
		st   *tuner.State
		in   tuner.RebalanceInput
		// want: the new profiles, "" for no plan; reasons: in its reason
		want    string
		reasons []string
	}{
		{"saturated 1g beside an idle 3g: swap the profiles", migState(0.09, 0.8, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing},
			"1g.10gb 3g.40gb", []string{"b has missed its SLO", "1g.10gb MIG instance, whose SMs are saturated (SM activity 80% of 16 SMs)",
				"the 3g.40gb instance's 9% SM use (5 SMs) fits the 1g.10gb one's 16 SMs", "from [3g.40gb, 1g.10gb] to [1g.10gb, 3g.40gb]", "drained", "expected gain"}},
		{"not before the dwell", migState(0.09, 0.8, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missingFor("b", 30*time.Second)}, "", nil},
		{"the instance is not saturated: more SMs are not the cure", migState(0.09, 0.5, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing}, "", nil},
		{"the other instance's use would not fit the 1g", migState(0.3, 0.8, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing}, "", nil},
		{"the other tenant's memory would not fit the 1g", migState(0.09, 0.8, 12*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing}, "", nil},
		{"SLO met: nothing", migState(0.09, 0.8, 6*gib, 1, 1), tuner.RebalanceInput{MissingSince: missing}, "", nil},
		{"within the cool-down", migState(0.09, 0.8, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing, LastPlan: now.Add(-time.Minute)}, "", nil},
		{"relayouted recently: held", migState(0.09, 0.8, 6*gib, 1, 0.1), tuner.RebalanceInput{MissingSince: missing, Relayouts: map[string]time.Time{"GPU-m": now.Add(-15 * time.Minute)}}, "", nil},
		{"the missing tenant already has the big instance", migState(0.8, 0.1, 6*gib, 0.1, 1), tuner.RebalanceInput{MissingSince: missingFor("a", 2*time.Minute)}, "", nil},
		{"a profile's name built, not read: its variant may be lost", builtName(migState(0.09, 0.8, 6*gib, 1, 0.1)), tuner.RebalanceInput{MissingSince: missing}, "", nil},
		{"the other tenant's memory unknown: whether it fits the 1g cannot be told", memoryUnknown(migState(0.09, 0.8, 6*gib, 1, 0.1), "a"), tuner.RebalanceInput{MissingSince: missing}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := Default().PlanRebalance(tc.st, tc.in)
			got := ""
			if ok && len(p.MIG) == 1 {
				got = strings.Join(p.MIG[0].Profiles, " ")
			}
			if got != tc.want || ok != (tc.want != "") || len(p.Moves) != 0 {
				t.Fatalf("plan %+v (%v), want profiles %q", p, ok, tc.want)
			}
			for _, r := range tc.reasons {
				if !strings.Contains(p.Reason, r) {
					t.Errorf("reason %q lacks %q", p.Reason, r)
				}
			}
		})
	}
}

// relayoutRounds runs four rounds a minute apart in which tenant b misses
// its SLO in its saturated small instance (migState), calling Progress a
// second after each round; note gets every round's and Progress'
// decisions.
func relayoutRounds(t *testing.T, tu *tuner.Tuner, clock *gpu.ManualClock, note func([]tuner.Decision)) {
	t.Helper()
	for i := range 4 {
		st := migState(0.09, 0.8, 6*gib, 1, 0.1)
		st.Snapshot.Time = clock.Now()
		n := float64(48000 * (i + 1))
		st.Snapshot.SLOs[1].RequestsTotal, st.Snapshot.SLOs[1].GoodRequestsTotal = n, 0.1*n
		decs, err := tu.RunOnce(context.Background(), st.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		note(decs)
		clock.Advance(time.Second)
		note(tu.Progress(context.Background()))
		clock.Advance(time.Minute - time.Second)
	}
}

// Without a hook, the tuner carries out a relayout itself: it drains every
// instance, sets the layout once the GPU is empty (Progress between
// rounds) and starts the processes again; in recommend mode it only
// recommends.
func TestTunerRelayouts(t *testing.T) {
	for _, mode := range []tuner.Mode{tuner.ModeEnforce, tuner.ModeRecommend} {
		t.Run(string(mode), func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			host := &migHost{Busy: 1}
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: mode, Actuators: tuner.ActuatorsOf(host), Rebalance: Default(),
				Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			note := func(decs []tuner.Decision) {
				for _, d := range decs {
					got = append(got, fmt.Sprintf("%v %s %s->%s %s", clock.Now().Sub(t0), d.Knob, d.From, d.To, d.Outcome))
				}
			}
			relayoutRounds(t, tu, clock, note)
			want := "[2m0s mig_drain ->every instance applied 2m1s mig_layout [3g.40gb, 1g.10gb]->[1g.10gb, 3g.40gb] applied]"
			wantCalls := "[drain MIG-1 drain MIG-2 configure 1g.10gb 3g.40gb start 1 start 2]"
			if mode == tuner.ModeRecommend {
				want, wantCalls = "[2m0s mig_layout [3g.40gb, 1g.10gb]->[1g.10gb, 3g.40gb] recommended]", "[]"
			}
			if fmt.Sprint(got) != want {
				t.Errorf("decisions %v, want %s", got, want)
			}
			if fmt.Sprint(host.Calls) != wantCalls {
				t.Errorf("calls %v, want %s", host.Calls, wantCalls)
			}
		})
	}
}

// A relayout whose drain fails starts the processes again at once, and a
// start that fails then is in the decision with the drain's error, tried
// again, and after the last try a failed decision of its own: a tenant
// left stopped is never silent.
func TestRelayoutDrainFailureReportsFailedStart(t *testing.T) {
	clock := gpu.NewManualClock(t0)
	// the drain is refused (busy), the starts after it fail: a failure
	host := &migHost{DrainErr: fmt.Errorf("drain refused: %w", gpu.ErrBusy), StartErr: errors.New("no such unit")}
	tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tuner.ModeEnforce, Actuators: tuner.ActuatorsOf(host), Rebalance: Default(),
		Guards: tuner.DefaultGuards(nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var drain *tuner.Decision
	var starts []string
	note := func(decs []tuner.Decision) {
		for _, d := range decs {
			switch d.Knob {
			case gpu.KnobMIGDrain, gpu.KnobMIGLayout:
				drain = &d
			case gpu.KnobProcessLifecycle:
				starts = append(starts, string(d.Outcome))
			}
		}
	}
	relayoutRounds(t, tu, clock, note)
	for i := 0; i < 10 && tu.Underway(); i++ { // past the last try
		clock.Advance(time.Minute)
		note(tu.Progress(context.Background()))
	}
	if drain == nil {
		t.Fatalf("no relayout decision; calls %v", host.Calls)
	}
	if drain.Applied || drain.Outcome != tuner.OutcomeFailed {
		t.Errorf("decision %+v: want failed", *drain)
	}
	for _, want := range []string{"drain refused", "start PID 1: no such unit", "start PID 2: no such unit"} {
		if !strings.Contains(drain.Reason, want) {
			t.Errorf("reason %q does not say %q", drain.Reason, want)
		}
	}
	if want := "[drain MIG-1 drain MIG-2 start 1 start 2 start 1 start 2 start 1 start 2 start 1 start 2 start 1 start 2]"; fmt.Sprint(host.Calls) != want {
		t.Errorf("calls %v, want %s", host.Calls, want)
	}
	if want := []string{"failed", "failed"}; !slices.Equal(starts, want) {
		t.Errorf("start decisions %q, want %q", starts, want)
	}
	if tu.Underway() {
		t.Error("the relayout is still under way after the last try")
	}
}

// TestMovePlanNamesWorkloads: a move names the pod or systemd service the
// attribution found for its process, once per workload; a process with
// neither is moved by its PID.
func TestMovePlanNamesWorkloads(t *testing.T) {
	pod := &gpu.Pod{Namespace: "llm", Name: "chat-0"}
	const uidA, uidB = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	withUID := func(p *gpu.Pod, uid string) *gpu.Pod {
		c := *p
		c.UID = uid
		return &c
	}
	tests := []struct {
		name string
		u    tenant.Usage
		want string
	}{
		{"PIDs only", tenant.Usage{Tenant: "a", UUID: "GPU-0", PIDs: []uint32{3, 4}},
			`[{"tenant":"a","pid":3,"from_uuid":"GPU-0","to_uuid":"GPU-1"},{"tenant":"a","pid":4,"from_uuid":"GPU-0","to_uuid":"GPU-1"}]`},
		{"one pod, two processes", tenant.Usage{Tenant: "a", UUID: "GPU-0", PIDs: []uint32{3, 4},
			Workloads: []tenant.Workload{{PID: 3, Pod: pod}, {PID: 4, Pod: pod}}},
			`[{"tenant":"a","pid":3,"pids":[3,4],"from_uuid":"GPU-0","to_uuid":"GPU-1","pod":{"namespace":"llm","name":"chat-0"}}]`},
		// one replaced under its name (forced out: the new one started
		// while the old one's processes still run): two pods, a move
		// each, each naming its own UID for the eviction to meet
		{"one pod name, two UIDs", tenant.Usage{Tenant: "a", UUID: "GPU-0", PIDs: []uint32{3, 4, 5},
			Workloads: []tenant.Workload{{PID: 3, Pod: withUID(pod, uidA)}, {PID: 4, Pod: withUID(pod, uidB)}, {PID: 5, Pod: withUID(pod, uidA)}}},
			`[{"tenant":"a","pid":3,"pids":[3,5],"from_uuid":"GPU-0","to_uuid":"GPU-1","pod":{"namespace":"llm","name":"chat-0","uid":"` + uidA + `"}},` +
				`{"tenant":"a","pid":4,"from_uuid":"GPU-0","to_uuid":"GPU-1","pod":{"namespace":"llm","name":"chat-0","uid":"` + uidB + `"}}]`},
		// a process whose cgroup was not read: its pod's UID not known
		{"one pod, a process of no known UID", tenant.Usage{Tenant: "a", UUID: "GPU-0", PIDs: []uint32{3, 4},
			Workloads: []tenant.Workload{{PID: 3, Pod: pod}, {PID: 4, Pod: withUID(pod, uidA)}}},
			`[{"tenant":"a","pid":3,"pids":[3,4],"from_uuid":"GPU-0","to_uuid":"GPU-1","pod":{"namespace":"llm","name":"chat-0","uid":"` + uidA + `"}}]`},
		{"a service and a bare process", tenant.Usage{Tenant: "a", UUID: "GPU-0", PIDs: []uint32{3, 4, 5},
			Workloads: []tenant.Workload{{PID: 3, Unit: "train.service"}, {PID: 5, Unit: "train.service"}}},
			`[{"tenant":"a","pid":3,"pids":[3,5],"from_uuid":"GPU-0","to_uuid":"GPU-1","unit":"train.service"},{"tenant":"a","pid":4,"from_uuid":"GPU-0","to_uuid":"GPU-1"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(movePlan("r", tc.u, "GPU-1").Moves)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != tc.want {
				t.Errorf("moves %s, want %s", got, tc.want)
			}
		})
	}
}

// refusingHook is a rebalancing hook that refuses its first refusals
// plans for now, as an eviction under a PodDisruptionBudget is refused
// (gpu.ErrBusy), and applies the others; it records when it ran and what.
type refusingHook struct {
	clock    gpu.Clock
	refusals int
	calls    []string
}

func (h *refusingHook) Rebalance(_ context.Context, p gpu.Plan) error {
	h.calls = append(h.calls, fmt.Sprintf("%v %s", h.clock.Now().Sub(t0), p.Moves[0].Tenant))
	if len(h.calls) <= h.refusals {
		return fmt.Errorf("eviction of %s: refused for now: %w", p.Moves[0].Tenant, gpu.ErrBusy)
	}
	return nil
}

// With the slow loop's timings shortened (as --tuner.slow-loop.* set them),
// a plan the hook refuses is refused once, reported as such, and not
// tried again before the cool-down, however often the tuner runs; once the
// hook takes it, the move is applied and its tenant held.
func TestTunerRebalanceRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refusals  int
		calls     string // the hook's runs: time since start, tenant
		decisions string // the placement decisions: time, tenant, outcome
	}{
		// chat misses from the second round (10 s), the dwell ends at
		// 40 s; then a plan every cool-down (90 s), the fourth held by the
		// back-off guard (30 s, 60 s, then 120 s after the third refusal).
		{"refused every time: once per cool-down", 1000,
			"[40s train 2m10s train 3m40s train]",
			"[40s train refused 2m10s train refused 3m40s train refused 5m10s train guarded]"},
		// train moved is held; the next plans move the others.
		{"refused once, then applied, then the next neighbour", 1,
			"[40s train 2m10s train 3m40s embed 5m10s chat]",
			"[40s train refused 2m10s train applied 3m40s embed applied 5m10s chat applied]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			hook := &refusingHook{clock: clock, refusals: tc.refusals}
			r := Default()
			r.Every, r.Dwell, r.CoolDown, r.Hold = 10*time.Second, 30*time.Second, 90*time.Second, 30*time.Minute
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tuner.ModeEnforce, Actuators: tuner.ActuatorsOf(hook), Rebalance: r,
				Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var decisions []string
			for range 6 * 12 { // 6 minutes, a round every 5 s
				decisions = append(decisions, placementRound(t, tu, clock, 10*(clock.Now().Sub(t0).Seconds()+5))...)
				clock.Advance(5 * time.Second)
			}
			if got := fmt.Sprint(hook.calls); got != tc.calls {
				t.Errorf("hook runs %s, want %s", got, tc.calls)
			}
			if got := fmt.Sprint(decisions); got != tc.decisions {
				t.Errorf("decisions %s, want %s", got, tc.decisions)
			}
		})
	}
}

// partialHook is a rebalancing hook that, as the built-in Kubernetes
// eviction does when a PodDisruptionBudget refuses the second of a plan's
// evictions, makes the first plan's first move only and says so (a
// *gpu.PartialError); it makes every later plan whole. It records the
// moves made. With busy, the refusal is also gpu.ErrBusy.
type partialHook struct {
	busy  bool
	plans int
	moves []string
}

func (h *partialHook) Rebalance(_ context.Context, p gpu.Plan) error {
	h.plans++
	for i, m := range p.Moves {
		if h.plans == 1 && i > 0 {
			err := fmt.Errorf("eviction of PID %d: refused for now (HTTP 429)", m.PID)
			if h.busy {
				err = fmt.Errorf("%w: %w", err, gpu.ErrBusy)
			}
			return &gpu.PartialError{Applied: []int{0}, Err: err}
		}
		h.moves = append(h.moves, fmt.Sprintf("%d->%s", m.PID, m.ToUUID))
	}
	return nil
}

// secondMoveFails is a host's placement that moves processes itself (the
// simulator) and fails its second move, as when the target's memory ran
// out meanwhile. It records the moves made.
type secondMoveFails struct {
	calls int
	moves []string
}

func (s *secondMoveFails) MoveProcess(_ context.Context, pid uint32, to string) error {
	if s.calls++; s.calls == 2 {
		return errors.New("no room")
	}
	s.moves = append(s.moves, fmt.Sprintf("%d->%s", pid, to))
	return nil
}

// A plan applied in part (train's first process moved, the second not)
// has failed, and its decision says so and which moves were made; but
// train has moved, so it is held as a moved tenant is (Hold): the next
// plan, after the cool-down, moves the next neighbour, not train again
// (its pod just evicted, or its replacement). So through a hook and step
// by step; a refusal for now (gpu.ErrBusy) of the moves not made does not
// make the plan refused, which says nothing was changed. Step by step, a
// move of a workload (a systemd service, its two processes) that moved one
// of them is a move made: it was counted as not made, train not held.
func TestTunerRebalancePartlyApplied(t *testing.T) {
	hook, busy, pl, unit := &partialHook{}, &partialHook{busy: true}, &secondMoveFails{}, &secondMoveFails{}
	service := []tenant.Workload{{PID: 20, Unit: "train.service"}, {PID: 21, Unit: "train.service"}}
	for _, tc := range []struct {
		name  string
		ac    any
		moves *[]string         // the moves made
		ws    []tenant.Workload // the processes' workloads
		part  string            // the first decision's reason says
	}{
		{"a hook's second eviction refused", hook, &hook.moves, nil, "applied in part (1 of its 2 moves made; train counted as moved"},
		{"a hook's second eviction refused, busy", busy, &busy.moves, nil, "applied in part (1 of its 2 moves made; train counted as moved"},
		{"the second move fails step by step", pl, &pl.moves, nil, "applied in part (1 of its 2 moves made; train counted as moved"},
		{"a service's second process fails step by step", unit, &unit.moves, service,
			"applied in part (every move made or begun; train counted as moved, not moved again for the hold): move of train (PID 21) to GPU-c, 1 of its 2 processes moved: no room"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			r := Default()
			r.Every, r.Dwell, r.CoolDown, r.Hold = 10*time.Second, 30*time.Second, 90*time.Second, 30*time.Minute
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tuner.ModeEnforce, Actuators: tuner.ActuatorsOf(tc.ac), Rebalance: r,
				Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var decisions []string
			var first *tuner.Decision
			for range 6 * 12 { // 6 minutes, a round every 5 s
				for _, d := range placementDecisions(t, tu, clock, 10*(clock.Now().Sub(t0).Seconds()+5), tc.ws...) {
					decisions = append(decisions, fmt.Sprintf("%v %s %s", clock.Now().Sub(t0), d.Tenant, d.Outcome))
					if first == nil {
						first = &d
					}
				}
				clock.Advance(5 * time.Second)
			}
			if want := "[40s train failed 2m10s embed applied 3m40s chat applied]"; fmt.Sprint(decisions) != want {
				t.Errorf("decisions %v, want %s", decisions, want)
			}
			if want := "[20->GPU-c 30->GPU-c 10->GPU-c]"; fmt.Sprint(*tc.moves) != want {
				t.Errorf("moves %v, want %s", *tc.moves, want)
			}
			if first == nil || first.Applied || !strings.Contains(first.Reason, tc.part) {
				t.Errorf("first decision %+v: want failed, %s", first, tc.part)
			}
		})
	}
}

// squeezedState is rebalanceState with chat meeting its SLO and train
// capped to 12.5% on each of its two clients, squeezed well below its
// share (no share.max: 1), a restart costing it 5 minutes.
func squeezedState() *tuner.State {
	st := rebalanceState(0.3, 0.2, 40*gib, 1)
	st.Snapshot.Readings.Devices[0].Processes = []gpu.Process{mpsProc(10, gpu.Float(1)), mpsProc(20, gpu.Float(0.125)), mpsProc(21, gpu.Float(0.125)), mpsProc(30, gpu.Float(1))}
	st.Snapshot.Tenants[1].RestartCost = 5 * time.Minute
	return st
}

// squeezedSince is the planner's input with train squeezed for 5 minutes
// at now.
func squeezedSince(now time.Time) tuner.RebalanceInput {
	return tuner.RebalanceInput{SqueezedSince: map[string]time.Time{"train": now.Add(-5 * time.Minute)}}
}

// The slow loop plans no move off a GPU whose placement knob the operator
// switched off (--tuner.disable-knob) or its backends cannot turn, and no
// relayout of a GPU whose MIG layout is off or not listed: the tuner drops
// or refuses such a plan, and the planner must not offer it (a plan it
// offers is applied as one action; a switched-off knob is one the tuner
// never changes).
func TestNoPlanOfAKnobOff(t *testing.T) {
	now := t0.Add(time.Hour)
	missing := tuner.RebalanceInput{MissingSince: map[string]time.Time{"chat": now.Add(-5 * time.Minute)}}
	relayout := tuner.RebalanceInput{MissingSince: map[string]time.Time{"b": now.Add(-2 * time.Minute)}}
	off := func(k gpu.Knob) map[gpu.Knob]bool { return map[gpu.Knob]bool{k: false} }
	unlisted := func(uuid string, k gpu.Knob) map[string][]tuner.KnobAvailability {
		return map[string][]tuner.KnobAvailability{uuid: {{Knob: k, Driven: true}}}
	}
	squeezed, squeezedIn := squeezedState, squeezedSince(now)
	tests := []struct {
		name   string
		st     func() *tuner.State
		in     tuner.RebalanceInput
		drives map[gpu.Knob]bool
		knobs  map[string][]tuner.KnobAvailability
		plan   bool
	}{
		{"a violator's move", func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }, missing, nil, nil, true},
		{"a violator's move, placement switched off", func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }, missing, off(gpu.KnobPlacement), nil, false},
		{"a violator's move, placement not listed there", func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }, missing, nil, unlisted("GPU-a", gpu.KnobPlacement), false},
		{"a violator's move, placement driven by nothing (no hook): planned, a recommendation", func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }, missing, nil,
			map[string][]tuner.KnobAvailability{"GPU-a": {{Knob: gpu.KnobPlacement}}}, true},
		{"a relayout, the MIG layout driven by nothing (no hook): planned", func() *tuner.State { return migState(0.09, 0.8, 6*gib, 1, 0.1) }, relayout, nil,
			map[string][]tuner.KnobAvailability{"GPU-m": {{Knob: gpu.KnobMIGLayout}}}, true},
		{"a violator's move, placement not listed elsewhere", func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }, missing, nil, unlisted("GPU-b", gpu.KnobPlacement), true},
		{"a squeezed tenant's move", squeezed, squeezedIn, nil, nil, true},
		{"a squeezed tenant's move, placement switched off", squeezed, squeezedIn, off(gpu.KnobPlacement), nil, false},
		{"a relayout", func() *tuner.State { return migState(0.09, 0.8, 6*gib, 1, 0.1) }, relayout, nil, nil, true},
		{"a relayout, the MIG layout switched off", func() *tuner.State { return migState(0.09, 0.8, 6*gib, 1, 0.1) }, relayout, off(gpu.KnobMIGLayout), nil, false},
		{"a relayout, the MIG layout not listed", func() *tuner.State { return migState(0.09, 0.8, 6*gib, 1, 0.1) }, relayout, nil, unlisted("GPU-m", gpu.KnobMIGLayout), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st()
			st.Drives, st.Knobs = tc.drives, tc.knobs
			p, ok := Default().PlanRebalance(st, tc.in)
			if ok != tc.plan {
				t.Fatalf("plan %+v (%v), want a plan: %v", p, ok, tc.plan)
			}
		})
	}
}

// ignoresSwitches is a planner that plans as if no knob were switched off.
type ignoresSwitches struct{ *Planner }

func (p ignoresSwitches) PlanRebalance(s *tuner.State, in tuner.RebalanceInput) (gpu.Plan, bool) {
	c := *s
	c.Drives = nil
	return p.Planner.PlanRebalance(&c, in)
}

// With placement switched off (--tuner.disable-knob=placement), the tuner
// moves nobody, whether the planner leaves the knob alone (the built-in
// one) or plans a move anyway: the tuner drops that plan, as it drops a
// policy's actions on a switched-off knob.
func TestTunerMovesNobodyWithPlacementOff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		planner tuner.RebalancePlanner
	}{{"built-in planner", Default()}, {"a planner ignoring the switch", ignoresSwitches{Default()}}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			pl := &recordingPlacement{}
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tuner.ModeEnforce, Actuators: tuner.ActuatorsOf(pl), Rebalance: tc.planner,
				Guards: tuner.DefaultGuards(nil, nil), Disabled: []gpu.Knob{gpu.KnobPlacement}})
			if err != nil {
				t.Fatal(err)
			}
			plans := placementRounds(t, tu, clock)
			if len(plans) != 0 || len(pl.moves) != 0 {
				t.Errorf("placement decisions %v, moves %v, want none", plans, pl.moves)
			}
		})
	}
}

// On a host without a rebalancing hook (placement driven by nothing), the
// slow loop's plans are recommended all the same, in enforce too: what
// the operator is told would help, and no change is made.
func TestTunerRecommendsPlansWithoutAHook(t *testing.T) {
	for _, mode := range []tuner.Mode{tuner.ModeEnforce, tuner.ModeRecommend} {
		t.Run(string(mode), func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: mode, Actuators: tuner.ActuatorsOf(), Rebalance: Default(),
				Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			plans := placementRounds(t, tu, clock)
			want := fmt.Sprintf("[4m0s train %s 14m0s train %s]", tuner.OutcomeRecommended, tuner.OutcomeRecommended)
			if fmt.Sprint(plans) != want {
				t.Errorf("plans %v, want %s", plans, want)
			}
		})
	}
}
