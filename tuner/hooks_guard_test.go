package tuner

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// holding is a policy asking for its actions, held where the state's
// waits hold them (as the built-in policies do), that keeps the waits it
// was given.
type holding struct {
	actions []Action
	waits   *map[string]Wait
}

func (holding) Name() string { return "holding" }
func (p holding) Decide(s *State) []Action {
	*p.waits = s.Waits
	return s.HoldWaiting(slices.Clone(p.actions))
}

// A change whose hook runs off the round keeps its GPU's knob in its
// dwell until its outcome, and the dwell counts from that outcome: a
// second MPS client of the GPU is not restarted in the same round, nor in
// the rounds while the first one's hook runs (the policy is told, and
// holds), as with the change made in the round. (Before, the dwell was
// taught only at the settling round: both clients were restarted at once,
// the second in the same round as the first.)
func TestHookKeepsItsKnobInItsDwell(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	r := &hookRun{host: newHookHost(), clk: gpu.NewManualClock(t0), j: j}
	var err error
	r.tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(r.host), Journal: j, Clock: r.clk, Mode: ModeEnforce, Guards: DefaultGuards(nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	capEmbed := capBatch
	capEmbed.PID, capEmbed.Tenant = 7, "embed"
	d := r.round(t, capBatch, capEmbed)
	r.host.waitStarted(t)
	if len(d) != 1 || d[0].Tenant != "embed" || d[0].Outcome != OutcomeGuarded || d[0].Guard != GuardDwell {
		t.Fatalf("round starting PID 8's hook: %+v, want embed's cap refused by the dwell", d)
	}
	var waits map[string]Wait
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = holding{actions: []Action{capEmbed}, waits: &waits}
	if _, err := r.tu.RunOnce(t.Context(), tenantSnap(r.clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
		t.Fatal(err)
	}
	if w, ok := waits[capBatch.DomainKey()]; !ok || !w.Running || !w.Since.Equal(t0.Add(15*time.Second)) {
		t.Errorf("waits while the hook runs: %+v, want the MPS knob of the GPU waiting on the hook started at +15s", waits)
	}
	if got := r.tu.Status().GPUs[0].Kind; got != RoundHook {
		t.Errorf("GPU round while the hook runs: %s, want %s", got, RoundHook)
	}
	if n := slices.IndexFunc(r.host.Calls(), func(c string) bool { return c == "RestartClient(GPU-0,7)" }); n >= 0 {
		t.Fatalf("calls %q: embed's client restarted while batch's hook runs", r.host.Calls())
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d = r.round(t, capEmbed)
	if got, want := outcomes(d), []string{"mps_active_threads applied", "mps_active_threads guarded"}; !slices.Equal(got, want) {
		t.Fatalf("round settling the hook: %v, want %v (the dwell from the outcome)", got, want)
	}
	r.round(t) // +20 s after the outcome: the dwell has passed
	r.clk.Advance(5 * time.Second)
	r.round(t, capEmbed) // starts embed's hook
	waitHookEnded(t, r.tu)
	if d = r.round(t); len(d) != 1 || d[0].Tenant != "embed" || d[0].Outcome != OutcomeApplied {
		t.Fatalf("rounds past the dwell: %v, want embed's cap applied", outcomes(d))
	}
}

// failingPlanHook is a rebalancing hook (gpu.Hooked) whose plans run
// until the test releases them, with what it returns.
type failingPlanHook struct {
	started chan struct{}
	release chan error
}

func (failingPlanHook) RunsHooks() bool { return true }
func (h failingPlanHook) Rebalance(ctx context.Context, _ gpu.Plan) error {
	h.started <- struct{}{}
	select {
	case err := <-h.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// movePlanner plans a move of batch at every period, and keeps what it
// was told of the tenants moved.
type movePlanner struct{ moved *[]map[string]time.Time }

func (movePlanner) Period() time.Duration              { return 15 * time.Second }
func (movePlanner) MoveHold() time.Duration            { return time.Hour }
func (movePlanner) Missing(*State) map[string]bool     { return nil }
func (movePlanner) Squeezed(*State) map[string]float64 { return nil }
func (p movePlanner) PlanRebalance(_ *State, in RebalanceInput) (gpu.Plan, bool) {
	*p.moved = append(*p.moved, maps.Clone(in.Moved))
	return gpu.Plan{Reason: "test", Moves: []gpu.Move{{Tenant: "batch", PID: 8, FromUUID: uuid0, ToUUID: "GPU-1"}}}, true
}

// A rebalancing plan whose hook fails is no move: the slow loop's memory
// of the tenants moved (which the planner holds a tenant moved by, 30
// minutes by default) is not told of it; one that succeeds is, at its
// outcome. (Before, a plan started off the round counted as a move as it
// started: a failed one held the tenant as if it had moved.)
func TestFailedPlanHookIsNoMove(t *testing.T) {
	for _, fail := range []bool{true, false} {
		clk := gpu.NewManualClock(t0)
		h := failingPlanHook{started: make(chan struct{}, 1), release: make(chan error, 1)}
		var moved []map[string]time.Time
		tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(h), Clock: clk, Mode: ModeEnforce, Rebalance: movePlanner{moved: &moved}})
		if err != nil {
			t.Fatal(err)
		}
		round := func() []Decision { t.Helper(); return tenantRound(t, tu, clk) }
		round()
		<-h.started
		var res error
		if fail {
			res = errors.New("exit status 1")
		}
		h.release <- res
		waitHookEnded(t, tu)
		d := round() // settles the plan, and plans again
		if len(d) != 1 || d[0].Knob != gpu.KnobPlacement || d[0].Applied == fail {
			t.Fatalf("fail=%v: round settling the plan: %+v", fail, d)
		}
		if len(moved) != 2 {
			t.Fatalf("fail=%v: planned %d times, want 2", fail, len(moved))
		}
		if _, held := moved[1]["batch"]; held == fail {
			t.Errorf("fail=%v: moved told to the planner after the plan's outcome: %v", fail, moved[1])
		}
		tu.Restore(context.Background())
	}
}

// deafHost is a hookHost whose first restart hook does not end when
// cancelled (it waits for the test alone).
type deafHost struct{ *hookHost }

func (h deafHost) RestartClient(_ context.Context, uuid string, pid uint32, tenant string) error {
	return h.hookHost.RestartClient(context.Background(), uuid, pid, tenant)
}

// The restore at exit leaves alone a target whose hook did not end when
// cancelled: its original stays open in the journal, for the next start,
// and the client is not restarted a second time while the first restart
// still runs. (Before, the original was set back through a second restart
// beside the running one and closed as restored, though the running one
// could still start the client's successor with the new cap.)
func TestRestoreLeavesAHookThatDidNotEnd(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	host := deafHost{newHookHost()}
	r := &hookRun{host: host.hookHost, clk: gpu.NewManualClock(t0), j: j}
	var err error
	r.tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: r.clk, Mode: ModeEnforce, Guards: budgets()})
	if err != nil {
		t.Fatal(err)
	}
	r.round(t, capBatch)
	r.host.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d, err := r.tu.Restore(ctx)
	if err == nil {
		t.Error("the restore says nothing of the hook that did not end")
	}
	if n := len(r.host.Calls()); n != 2 {
		t.Errorf("calls %q, want only the running hook's (no second restart of PID 8)", r.host.Calls())
	}
	if len(d) != 0 {
		t.Errorf("restore decided %v, want nothing for PID 8", outcomes(d))
	}
	if o := r.j.Originals(); len(o) != 1 || o[0].Target != capBatch.Target {
		t.Errorf("journaled originals %+v, want PID 8's left open", o)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
}
