package tuner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// relaxedBatch is capBatch relaxed: batch's cap from 50% back to 100%.
func relaxedBatch() Action {
	a := capBatch
	a.Current, a.Want, a.Relax = Fraction(0.5), Fraction(1), true
	return a
}

// revertsDue makes the reverts of the relaxations due now, as if each had
// made things worse.
func (r *hookRun) revertsDue(relaxed ...Action) {
	r.tu.mu.Lock()
	defer r.tu.mu.Unlock()
	for _, a := range relaxed {
		r.tu.evals = append(r.tu.evals, evaluation{a: a, before: -1, due: r.clk.Now()})
	}
}

// restartCalls are the host's client restarts.
func restartCalls(h *hookHost) []string {
	return slices.DeleteFunc(h.Calls(), func(c string) bool { return !strings.HasPrefix(c, "RestartClient") })
}

// waitHookOn waits until the hook running on tg, if any, has returned.
func waitHookOn(t *testing.T, tu *Tuner, tg Target) {
	t.Helper()
	tu.mu.Lock()
	h := tu.hooks[tg.String()]
	tu.mu.Unlock()
	if h == nil {
		return
	}
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		t.Fatalf("the hook on %s did not return", tg)
	}
}

// twoGPUSnap is a snapshot at at of GPU-0 and GPU-1 running procs0 and
// procs1, attributed to their tenants.
func twoGPUSnap(at time.Time, procs0, procs1 []proc) *tenant.Snapshot {
	var devs []gpu.Device
	var usage []tenant.Usage
	for i, procs := range [][]proc{procs0, procs1} {
		uuid := []string{uuid0, "GPU-1"}[i]
		d := gpu.Device{Index: i, UUID: uuid, Up: true, Mode: gpu.SharingMPS}
		for _, p := range procs {
			d.Processes = append(d.Processes, mpsProc(p.pid, nil))
			usage = append(usage, tenant.Usage{Tenant: p.tenant, UUID: uuid, PIDs: []uint32{p.pid}})
		}
		devs = append(devs, d)
	}
	return snapshot(at, devs, usage)
}

// A revert's client restart waits, as any restart of the tenant does,
// for another restart hook of its tenant still running on another GPU
// (the hook is told the tenant: two at once restart its serving stack
// twice over, together), its judgement kept until then; it is made at
// the first round after that hook is settled. (Before, the revert's hook
// ran beside the other.)
func TestRevertHookOneTenantAtATime(t *testing.T) {
	r := newHookRun(t)
	snap := func() *tenant.Snapshot {
		return twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, []proc{{9, "batch"}})
	}
	other := capBatch
	other.GPUIndex = 1
	other.Target = Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 9}
	round := func(actions ...Action) []Decision {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		r.tu.o.Policy = fixed(actions)
		d, err := r.tu.RunOnce(context.Background(), snap())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	round(other)
	r.host.waitStarted(t)
	// batch's cap on GPU-0 relaxed to 100% made things worse: its revert is due
	r.revertsDue(relaxedBatch())
	round()
	waitHookOn(t, r.tu, capBatch.Target) // (a revert's hook answers at once)
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-1,9)"}; !slices.Equal(got, want) {
		r.host.release <- nil
		waitHookEnded(t, r.tu)
		t.Fatalf("restarts while batch's hook on GPU-1 runs %q, want only %q (the revert waiting)", got, want)
	}
	r.tu.mu.Lock()
	kept := len(r.tu.evals)
	r.tu.mu.Unlock()
	if kept != 1 {
		t.Errorf("%d judgements kept while the revert waits, want 1", kept)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d := round()
	if got, want := outcomes(d), []string{"mps_active_threads applied"}; !slices.Equal(got, want) || d[0].GPU != "GPU-1" {
		t.Fatalf("round after the first hook ended: %v, want it settled (the revert started)", got)
	}
	waitHookEnded(t, r.tu) // (the revert's hook answers at once)
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-1,9)", "RestartClient(GPU-0,8)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q (the revert's once the first is settled)", got, want)
	}
	if d := round(); len(d) != 1 || d[0].GPU != uuid0 || d[0].Outcome != OutcomeApplied || d[0].To != "50%" || r.tu.Status().Counts.Reverts != 1 {
		t.Errorf("next round: %+v, %d reverts; want the revert of PID 8 to 50%% applied, counted", d, r.tu.Status().Counts.Reverts)
	}
}

// A restore at start deferred to a restarted client's successor waits,
// as a revert's restart does, for another restart hook of its tenant
// still running on another GPU, and starts at the first round after that
// hook is settled. (Before, its hook ran beside the other.)
func TestSuccessorRestoreWaitsForTenantHook(t *testing.T) {
	r, restartAt := hookRunAfterCrash(t)
	gpu1 := []proc{{20, "embed"}}
	if _, err := r.tu.Recover(context.Background(), twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, gpu1)); err != nil {
		t.Fatal(err)
	}
	after := []proc{{8, "batch"}, {9, "embed"}}
	round := func(actions ...Action) []Decision {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		r.tu.o.Policy = fixed(actions)
		d, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), after, gpu1))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	embed20 := Action{Target: Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 20}, GPUIndex: 1, Tenant: "embed", Current: Fraction(1), Want: Fraction(0.5), Restart: true, Reason: "test"}
	round(embed20) // embed's client on GPU-1 restarted: its hook runs on
	r.host.waitStarted(t)
	for r.clk.Now().Sub(restartAt) <= successorWithin {
		round()
	}
	waitHookOn(t, r.tu, Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}) // (a restore's hook answers at once)
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-1,20)"}; !slices.Equal(got, want) {
		r.host.release <- nil
		waitHookEnded(t, r.tu)
		t.Fatalf("restarts once the successor is told, embed's hook on GPU-1 running: %q, want only %q (the restore waiting)", got, want)
	}
	if o := mpsOriginals(r.j); !slices.ContainsFunc(o, func(o Original) bool { return o.Target.GPU == uuid0 && o.Target.PID == 9 }) {
		t.Fatalf("journaled MPS originals %+v, want PID 9's open (followed, its restore waiting)", o)
	}
	if w := r.tu.Status().HookWaits; len(w) != 1 || !w[0].Restore || w[0].GPU != uuid0 || w[0].PID != 9 || w[0].Tenant != "embed" || w[0].Hook.GPU != "GPU-1" {
		t.Errorf("status hook waits %+v, want PID 9's restore waiting for embed's hook on GPU-1", w)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if got, want := outcomes(round()), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
		t.Fatalf("round after embed's hook ended: %v, want it settled (the restore started)", got)
	}
	waitHookEnded(t, r.tu)
	if d := round(); len(d) != 1 || d[0].Outcome != OutcomeRestored || d[0].GPU != uuid0 {
		t.Fatalf("next round: %+v, want PID 9 restored", d)
	}
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-1,20)", "RestartClient(GPU-0,9)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q", got, want)
	}
}

// Two reverts of one tenant due in the same round (its clients on two
// GPUs): the first starts its restart hook, the second, which would run
// beside it, keeps its judgement for a later round, its value not held
// as bad yet; once the first is settled it is judged again and made.
// (Before, both were taken from the judgements and their values held,
// and the second, waiting for the first's hook, was dropped: never made,
// the harmful value left in force and held against the tuner.)
func TestTwoRevertsOfATenantInOneRound(t *testing.T) {
	r := newHookRun(t)
	hold := &RevertHold{Hold: 10 * time.Minute}
	r.tu.o.Hold = hold
	round := func() []Decision {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		d, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, []proc{{9, "batch"}}))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	other := relaxedBatch()
	other.GPUIndex, other.Target = 1, Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 9}
	r.revertsDue(relaxedBatch(), other)
	round()
	r.host.waitStarted(t)
	release := func() {
		r.host.release <- nil
		waitHookEnded(t, r.tu)
	}
	r.tu.mu.Lock()
	kept := slices.Clone(r.tu.evals)
	r.tu.mu.Unlock()
	if len(kept) != 1 || kept[0].a.Target != other.Target {
		release()
		t.Fatalf("judgements kept while PID 8's revert runs: %+v, want PID 9's (its revert would wait)", kept)
	}
	if ok, why := hold.Admit(nil, other, r.clk.Now()); !ok {
		t.Errorf("PID 9's 100%% held as bad before its revert was judged: %s", why)
	}
	if w := r.tu.Status().HookWaits; len(w) != 1 || w[0].PID != 9 || w[0].Hook.PID != 8 {
		t.Errorf("status hook waits %+v, want PID 9's revert waiting for PID 8's", w)
	}
	release()
	if got, want := outcomes(round()), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
		t.Fatalf("round after PID 8's hook ended: %v, want it settled (PID 9's revert started)", got)
	}
	waitHookEnded(t, r.tu) // (the second hook answers at once)
	round()
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-0,8)", "RestartClient(GPU-1,9)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q", got, want)
	}
	if n := r.tu.Status().Counts.Reverts; n != 2 {
		t.Errorf("%d reverts counted, want 2", n)
	}
	if ok, _ := hold.Admit(nil, other, r.clk.Now()); ok {
		t.Error("PID 9's 100% not held once reverted")
	}
}

// The executor makes no decision on an action that waits for a hook, and
// drops none silently: a revert due keeps its judgement, judged again at
// a later round, and says so in the log. (Before, it was dropped with no
// word: its judgement gone, the harmful value left in force.)
func TestExecuteKeepsAWaitingRevert(t *testing.T) {
	r := newHookRun(t)
	other := capBatch
	other.GPUIndex, other.Target = 1, Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 9}
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = fixed([]Action{other})
	if _, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, []proc{{9, "batch"}})); err != nil {
		t.Fatal(err)
	}
	r.host.waitStarted(t)
	relaxed := relaxedBatch()
	e := evaluation{a: relaxed, before: -1, due: r.clk.Now()}
	back := revertOf(relaxed)
	var buf bytes.Buffer
	r.tu.mu.Lock()
	r.tu.o.Logger = log.NewLogfmtLogger(log.NewSyncWriter(&buf))
	r.tu.judged = map[string]evaluation{back.Target.String(): e}
	d := r.tu.handle(context.Background(), &State{Now: r.clk.Now()}, []Action{back}, r.clk.Now())
	kept := slices.Clone(r.tu.evals)
	r.tu.mu.Unlock()
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if len(d) != 0 || len(kept) != 1 || kept[0].a.Target != e.a.Target {
		t.Errorf("decisions %+v, judgements %+v; want none, PID 8's judgement kept", d, kept)
	}
	if !strings.Contains(buf.String(), "tuner revert due waits for a hook") || !strings.Contains(buf.String(), "hook_gpu=GPU-1") {
		t.Errorf("log %q, want the revert's wait", buf.String())
	}
}
