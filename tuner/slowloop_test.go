package tuner

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// movesEach is a slow loop that moves, every round, each batch tenant on
// GPU-0 the engine does not report moved (RebalanceInput.Moved), as the
// built-in planner holds a tenant moved for its Hold.
type movesEach struct{ hold time.Duration }

func (movesEach) Period() time.Duration              { return 15 * time.Second }
func (m movesEach) MoveHold() time.Duration          { return m.hold }
func (movesEach) Missing(*State) map[string]bool     { return nil }
func (movesEach) Squeezed(*State) map[string]float64 { return nil }
func (movesEach) PlanRebalance(s *State, in RebalanceInput) (gpu.Plan, bool) {
	for _, u := range s.Snapshot.Usage {
		if _, held := in.Moved[u.Tenant]; !held && len(u.PIDs) > 0 {
			return gpu.Plan{Reason: "test", Moves: []gpu.Move{{Tenant: u.Tenant, PID: u.PIDs[0], FromUUID: uuid0, ToUUID: "GPU-1"}}}, true
		}
	}
	return gpu.Plan{}, false
}

// movesApplied is a rebalancer whose plans apply at once.
type movesApplied struct{}

func (movesApplied) Rebalance(context.Context, gpu.Plan) error { return nil }

// Batch jobs that come and go as tenants of their own, each moved once by
// the slow loop, leave its memory of the tenants moved no entry of each:
// 300 jobs, two minutes each, left 300; now a move is kept while its
// tenant runs, a pause original names it, or the planner still heeds it
// (MoveHold), and a tenant held keeps its hold.
func TestSlowLoopForgetsGoneTenantsMoves(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(movesApplied{}), Clock: clk, Mode: ModeEnforce, Rebalance: movesEach{hold: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	round := func(procs ...proc) {
		t.Helper()
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), procs...)); err != nil {
			t.Fatal(err)
		}
	}
	moves := 0
	for i := range 300 {
		job := proc{uint32(100 + i), fmt.Sprintf("job-%d", i)}
		for range 8 {
			round(job)
			if at, ok := tu.reb.moved[job.tenant]; ok && at.Equal(clk.Now()) {
				moves++
			}
		}
	}
	if moves != 300 {
		t.Fatalf("%d jobs moved, want each of the 300 once (held after)", moves)
	}
	// ten minutes' jobs, two each, and the one running
	if n := len(tu.reb.moved); n > 6 {
		t.Errorf("%d moves kept after 300 jobs, want those within the hold of 10m (at most 6)", n)
	}
	// a job that runs on keeps its move, held, past the hold
	long := proc{99, "long"}
	for range 60 {
		round(long)
	}
	if _, ok := tu.reb.moved["long"]; !ok {
		t.Errorf("the move of a tenant still running was forgotten")
	}
	round()
	if _, ok := tu.reb.moved["long"]; ok {
		t.Errorf("the move of a tenant gone, older than the hold, kept")
	}
}

// A move older than the hold, of a tenant gone from every GPU, is kept
// while a pause original names the tenant (left reads it), and dropped
// once none does.
func TestSlowLoopKeepsMoveOfPausedTenant(t *testing.T) {
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(movesApplied{}), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Rebalance: movesEach{hold: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	st := &State{Now: now, Snapshot: tenantSnap(now, proc{7, "embed"})}
	pause := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 5}
	tu.reb.moved = map[string]time.Time{"paused": t0, "embed": t0, "recent": now.Add(-time.Minute), "gone": t0}
	tu.originals[pause.String()] = Original{Target: pause, Tenant: "paused"}
	tu.forgetMoved(st, now, 10*time.Minute)
	for name, want := range map[string]bool{"paused": true, "embed": true, "recent": true, "gone": false} {
		if _, ok := tu.reb.moved[name]; ok != want {
			t.Errorf("%s's move kept: %v, want %v", name, ok, want)
		}
	}
	delete(tu.originals, pause.String())
	tu.forgetMoved(st, now, 10*time.Minute)
	if _, ok := tu.reb.moved["paused"]; ok {
		t.Errorf("the move of a tenant gone, no pause original naming it, kept")
	}
}

// movesAll is movesEach planning one plan that moves every tenant not held.
type movesAll struct{ movesEach }

func (movesAll) PlanRebalance(s *State, in RebalanceInput) (gpu.Plan, bool) {
	p := gpu.Plan{Reason: "test"}
	for _, u := range s.Snapshot.Usage {
		if _, held := in.Moved[u.Tenant]; !held && len(u.PIDs) > 0 {
			p.Moves = append(p.Moves, gpu.Move{Tenant: u.Tenant, PID: u.PIDs[0], FromUUID: uuid0, ToUUID: "GPU-1"})
		}
	}
	return p, len(p.Moves) > 0
}

// A plan that moves two tenants holds both, not only its first move's
// (a planner other than the built-in one may plan such a plan).
func TestSlowLoopHoldsEveryTenantAPlanMoved(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(movesApplied{}), Clock: clk, Mode: ModeEnforce, Rebalance: movesAll{movesEach{hold: 10 * time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "train"})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"embed", "train"} {
		if at, ok := tu.reb.moved[name]; !ok || !at.Equal(clk.Now()) {
			t.Errorf("%s moved at %v (%v), want held from %v", name, at, ok, clk.Now())
		}
	}
}

// The slow loop's cool-down starts with its plan's planned record, which
// a restart resumes it from: a plan whose action writes none (its GPU's
// mode off, held by a hook or a restore, a guard's quiet), or whose
// record the journal did not take, starts none, so that the tuner running
// on and one started again agree.
func TestSlowLoopCoolDownAsJournaled(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes map[string]Mode
		want  time.Time // the cool-down's start, in memory and in the journal
		fail  bool      // the journal's writes fail (closed)
	}{
		{"planned", nil, t0.Add(15 * time.Second), false},
		{"its target GPU off: no planned record", map[string]Mode{"GPU-1": ModeOff}, time.Time{}, false},
		{"its planned record not written", nil, time.Time{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(movesApplied{}), Clock: clk, Mode: ModeEnforce, GPUModes: c.modes,
				Rebalance: movesEach{hold: 10 * time.Minute}, Journal: j})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(15 * time.Second)
			if c.fail {
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "train"})); err != nil {
				t.Fatal(err)
			}
			if got := tu.reb.lastPlan; !got.Equal(c.want) {
				t.Errorf("cool-down from %v in memory, want %v", got, c.want)
			}
			if got := j.slowLoop().lastPlan; !got.Equal(c.want) {
				t.Errorf("cool-down from %v in the journal, want %v", got, c.want)
			}
		})
	}
}
