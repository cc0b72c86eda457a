package tuner

import (
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
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	r := &hookRun{host: newHookHost(), clk: gpu.NewManualClock(t0), j: j}
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
