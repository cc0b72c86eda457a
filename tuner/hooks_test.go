package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// hookHost is a host whose MPS client restarts run a hook (gpu.Hooked):
// the first blocks until the test releases it (or its context is done),
// the later ones answer at once; its power limit answers at once. Safe
// for the hook's goroutine.
type hookHost struct {
	mu       sync.Mutex
	calls    []string
	restarts int
	release  chan error    // what the blocked hook returns
	started  chan struct{} // told when a hook starts
	// onCall, if set, is told each call after it is noted (on the
	// caller's goroutine)
	onCall func(call string)
}

func newHookHost() *hookHost {
	return &hookHost{release: make(chan error, 1), started: make(chan struct{}, 4)}
}

func (h *hookHost) RunsHooks() bool { return true }

func (h *hookHost) note(c string) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	on := h.onCall
	h.mu.Unlock()
	if on != nil {
		on(c)
	}
}

// blockNext makes the next client restart the one that blocks.
func (h *hookHost) blockNext() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarts = 0
}

func (h *hookHost) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func (h *hookHost) SetMPSActiveThreads(_ context.Context, uuid string, pid uint32, f float64) error {
	h.note(fmt.Sprintf("SetMPSActiveThreads(%s,%d,%.2f)", uuid, pid, f))
	return nil
}

func (h *hookHost) RestartClient(ctx context.Context, uuid string, pid uint32, _ string) error {
	h.note(fmt.Sprintf("RestartClient(%s,%d)", uuid, pid))
	h.mu.Lock()
	h.restarts++
	first := h.restarts == 1
	h.mu.Unlock()
	if !first {
		return nil
	}
	h.started <- struct{}{}
	select {
	case err := <-h.release:
		return err
	case <-ctx.Done():
		return fmt.Errorf("hook killed: %w", ctx.Err())
	}
}

func (h *hookHost) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }

func (h *hookHost) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if err := ctx.Err(); err != nil {
		return err // (called past the restore's deadline)
	}
	h.note(fmt.Sprintf("SetPowerLimit(%s,%g)", uuid, w))
	return nil
}

// waitStarted waits for the host's hook to start.
func (h *hookHost) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(time.Minute):
		t.Fatal("the hook did not start")
	}
}

// hookRun is a tuner in enforce mode over a hookHost, journaling, whose
// policy the test sets round by round.
type hookRun struct {
	tu   *Tuner
	host *hookHost
	clk  *gpu.ManualClock
	j    *Journal
	// index is the GPU's index in the snapshots of snapOf
	index int
}

func newHookRun(t *testing.T) *hookRun {
	t.Helper()
	return newHookRunAt(t, filepath.Join(t.TempDir(), "journal"))
}

// newHookRunAt is newHookRun over the journal at path.
func newHookRunAt(t *testing.T, path string) *hookRun {
	t.Helper()
	j := openJournal(t, path)
	t.Cleanup(func() { j.Close() })
	r := &hookRun{host: newHookHost(), clk: gpu.NewManualClock(t0), j: j}
	var err error
	r.tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(r.host), Journal: j, Clock: r.clk, Mode: ModeEnforce, Guards: budgets(), Enabled: []gpu.Knob{gpu.KnobPauseDuty}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// snapOf is tenantSnap now, its GPU listed at the run's index.
func (r *hookRun) snapOf(procs ...proc) *tenant.Snapshot {
	s := tenantSnap(r.clk.Now(), procs...)
	s.Readings.Devices[0].Index = r.index
	return s
}

// round is roundOn on the snapshot of the embed client PID 7 and the
// batch client PID 8.
func (r *hookRun) round(t *testing.T, actions ...Action) []Decision {
	t.Helper()
	return r.roundOn(t, []proc{{7, "embed"}, {8, "batch"}}, actions...)
}

// roundOn runs a round 15 s after the last on the snapshot of procs with
// the policy asking for actions, and returns its decisions; it fails the
// test if the round does not return within a minute (it waits for the
// hook), after letting the hook go so that the round ends.
func (r *hookRun) roundOn(t *testing.T, procs []proc, actions ...Action) []Decision {
	t.Helper()
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = fixed(actions)
	type result struct {
		d   []Decision
		err error
	}
	res := make(chan result, 1)
	go func() {
		d, err := r.tu.RunOnce(context.Background(), r.snapOf(procs...))
		res <- result{d, err}
	}()
	select {
	case x := <-res:
		if x.err != nil {
			t.Fatal(x.err)
		}
		return x.d
	case <-time.After(time.Minute):
		r.host.release <- nil
		<-res
		t.Fatal("the round waited for the hook")
	}
	return nil
}

var (
	capBatch = Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "batch", Current: Fraction(1), Want: Fraction(0.5), Restart: true, Reason: "test"}
	power    = Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(600), Reason: "test"}
)

// outcomes are the decisions' knobs and outcomes.
func outcomes(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Knob)+" "+string(d.Outcome))
	}
	return out
}

// An MPS client's restart through a hook runs off the round: the round
// that starts it returns at once (journaled planned, original and
// restarted as before), the next rounds decide the rest (another knob of
// the same GPU is set while the hook runs; the same target asked for
// again is no decision), the status and the GPU's round line say the hook
// runs, and the first round after it ends settles it as the round would
// have: applied, the target set, the guards taught. (Before, the round ran
// the hook to its end: the power limit waited for it.)
func TestHookRunsOffTheRound(t *testing.T) {
	r := newHookRun(t)
	if d := r.round(t, capBatch); len(d) != 0 {
		t.Fatalf("round starting the hook decided %v, want nothing yet", outcomes(d))
	}
	r.host.waitStarted(t)
	st := r.tu.Status()
	if len(st.Hooks) != 1 || st.Hooks[0].PID != 8 || st.Hooks[0].To != "50%" {
		t.Fatalf("status hooks %+v, want the restart of PID 8 to 50%%", st.Hooks)
	}
	if len(st.GPUs) != 1 || st.GPUs[0].Kind != RoundHook {
		t.Fatalf("GPU round %+v, want %s", st.GPUs, RoundHook)
	}
	if o := r.j.Originals(); len(o) != 1 || o[0].Target != capBatch.Target {
		t.Fatalf("journaled originals %+v, want PID 8's before its hook ends", o)
	}
	d := r.round(t, capBatch, power)
	if got, want := outcomes(d), []string{"power_limit applied"}; !slices.Equal(got, want) {
		t.Fatalf("round while the hook runs: %v, want %v", got, want)
	}
	if got := r.tu.Status().GPUs[0].Kind; got != RoundActing {
		t.Errorf("GPU round kind %s while it set the power limit, want %s", got, RoundActing)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d = r.round(t)
	if got, want := outcomes(d), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
		t.Fatalf("round after the hook ended: %v, want %v", got, want)
	}
	if !d[0].Time.Equal(r.clk.Now()) || d[0].From != "100%" || d[0].To != "50%" {
		t.Errorf("settled decision %+v, want dated at the settling round, 100%% -> 50%%", d[0])
	}
	st = r.tu.Status()
	if len(st.Hooks) != 0 {
		t.Errorf("status hooks %+v after settling, want none", st.Hooks)
	}
	if i := slices.IndexFunc(st.Settings, func(s Setting) bool { return s.Knob == gpu.KnobMPSActiveThreads && s.PID == 8 }); i < 0 || st.Settings[i].Target != Fraction(0.5) {
		t.Errorf("settings %+v, want PID 8 targeted at 50%%", st.Settings)
	}
	want := []string{"SetMPSActiveThreads(GPU-0,8,0.50)", "RestartClient(GPU-0,8)", "SetPowerLimit(GPU-0,600)"}
	if got := r.host.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// waitHookEnded waits until every hook the tuner started has returned.
func waitHookEnded(t *testing.T, tu *Tuner) {
	t.Helper()
	tu.mu.Lock()
	hs := tu.hooksByAge()
	tu.mu.Unlock()
	for _, h := range hs {
		select {
		case <-h.done:
		case <-time.After(time.Minute):
			t.Fatal("the hook did not return")
		}
	}
}

// A hook that fails is settled as failed at the round after it: the
// previous fraction is set back (as applyMPS does in the round) and the
// target is not set; a failure collected later rolls back nothing else
// (the power limit set beside it stays).
func TestHookFailureSettledLater(t *testing.T) {
	r := newHookRun(t)
	r.round(t, capBatch, power)
	r.host.waitStarted(t)
	r.host.release <- errors.New("exit status 3")
	waitHookEnded(t, r.tu)
	d := r.round(t)
	if got, want := outcomes(d), []string{"mps_active_threads failed"}; !slices.Equal(got, want) {
		t.Fatalf("round after the failed hook: %v, want %v", got, want)
	}
	want := []string{"SetMPSActiveThreads(GPU-0,8,0.50)", "SetPowerLimit(GPU-0,600)", "RestartClient(GPU-0,8)", "SetMPSActiveThreads(GPU-0,8,1.00)"}
	got := r.host.Calls()
	// the power limit may be set before or after the hook's first call:
	// the order of the other three is the hook's own
	if len(got) != len(want) || !slices.Equal(slices.DeleteFunc(slices.Clone(got), isPower), slices.DeleteFunc(slices.Clone(want), isPower)) || !slices.ContainsFunc(got, isPower) {
		t.Errorf("calls %q, want %q (power in any place)", got, want)
	}
	if i := slices.IndexFunc(r.tu.Status().Settings, func(s Setting) bool { return s.Knob == gpu.KnobMPSActiveThreads }); i >= 0 {
		t.Errorf("settings %+v: a failed cap targeted", r.tu.Status().Settings)
	}
}

func isPower(c string) bool { return len(c) > 13 && c[:13] == "SetPowerLimit" }

// The restore at exit cancels a change's hook still running, settles it, and sets
// the original back (through the hook again, which now answers): nothing
// the tuner changed is left behind, and the journal holds nothing open.
func TestRestoreCancelsRunningHook(t *testing.T) {
	r := newHookRun(t)
	r.round(t, capBatch)
	r.host.waitStarted(t)
	type result struct {
		d   []Decision
		err error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d, err := r.tu.Restore(ctx)
		res <- result{d, err}
	}()
	var x result
	select {
	case x = <-res:
	case <-time.After(2 * time.Minute):
		t.Fatal("the restore did not return")
	}
	if x.err != nil {
		t.Fatal(x.err)
	}
	if got, want := outcomes(x.d), []string{"mps_active_threads failed", "mps_active_threads restored"}; !slices.Equal(got, want) {
		t.Errorf("restore: %v, want the hook settled (failed when cancelled), then the original restored", got)
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore, want none", o)
	}
	if got := r.host.Calls(); got[len(got)-2] != "SetMPSActiveThreads(GPU-0,8,1.00)" || got[len(got)-1] != "RestartClient(GPU-0,8)" {
		t.Errorf("calls %q, want the restore's 100%% and restart last", got)
	}
}

// clockHook is a host whose MPS client restart runs a hook taking took of
// the clock's time, and whose power limit notes when it was set.
type clockHook struct {
	clk      *gpu.ManualClock
	took     time.Duration
	mu       sync.Mutex
	powerAt  []time.Time
	hookDone []time.Time
}

func (h *clockHook) RunsHooks() bool { return true }
func (h *clockHook) SetMPSActiveThreads(context.Context, string, uint32, float64) error {
	return nil
}
func (h *clockHook) RestartClient(ctx context.Context, _ string, _ uint32, _ string) error {
	select {
	case <-h.clk.After(h.took):
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	h.hookDone = append(h.hookDone, h.clk.Now())
	h.mu.Unlock()
	return nil
}
func (h *clockHook) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (h *clockHook) SetPowerLimit(context.Context, string, float64) error {
	h.mu.Lock()
	h.powerAt = append(h.powerAt, h.clk.Now())
	h.mu.Unlock()
	return nil
}

// burstPolicy asks for the batch client's capped restart from the first
// round on, and from burst on for a power limit too (standing for any
// other decision a burst calls for: another tenant's pause, a revert).
type burstPolicy struct {
	clk   *gpu.ManualClock
	burst time.Time
}

func (burstPolicy) Name() string { return "burst" }
func (p burstPolicy) Decide(*State) []Action {
	if p.clk.Now().Before(p.burst) {
		return []Action{capBatch}
	}
	return []Action{capBatch, power}
}

// quiet waits until the goroutines driven by clk are parked on it: its
// waiters the same, and at least one, over a few polls.
func quiet(t *testing.T, clk *gpu.ManualClock) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last, same := -1, 0
	for same < 4 {
		if time.Now().After(deadline) {
			t.Fatal("nothing parked on the clock for a minute")
		}
		time.Sleep(2 * time.Millisecond)
		n := clk.Waiters()
		if n > 0 && n == last {
			same++
		} else {
			same = 0
		}
		last = n
	}
}

// The real Runner on an injected clock, a restart hook that takes 2
// minutes (the default --mps.restart-hook.timeout) started at the first
// round, and a burst 1 s after it: the burst's decision is made at the
// next round, within one interval, while the hook still runs; the restart
// is settled at the first round after the hook returns. (Before, the
// round waited for the hook: the burst's decision came 2 m 14 s after it.)
func TestRunnerDecidesWhileHookRuns(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	host := &clockHook{clk: clk, took: 2 * time.Minute}
	const interval = 15 * time.Second
	burst := t0.Add(interval + time.Second)
	tu, err := New(Options{Policy: burstPolicy{clk: clk, burst: burst}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	snap := func() *tenant.Snapshot { return tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"}) }
	r := NewRunner(tu, nil, clk, interval, snap, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for clk.Now().Before(t0.Add(3 * time.Minute)) {
		quiet(t, clk)
		clk.Advance(time.Second)
	}
	quiet(t, clk)
	cancel()
	<-done
	host.mu.Lock()
	powerAt, hookDone := slices.Clone(host.powerAt), slices.Clone(host.hookDone)
	host.mu.Unlock()
	t.Logf("burst at +%v; its decision at %v; the hook returned at %v", burst.Sub(t0), offsets(powerAt[:min(1, len(powerAt))]), offsets(hookDone))
	if len(powerAt) == 0 || powerAt[0].Sub(burst) > interval {
		t.Fatalf("the burst's decision at %v (burst at +%v), want within one interval (%v) of it", offsets(powerAt), burst.Sub(t0), interval)
	}
	if len(hookDone) != 1 || !powerAt[0].Before(hookDone[0]) {
		t.Errorf("hook returned at %v, want once, after the burst's decision at %v", offsets(hookDone), offsets(powerAt))
	}
	st := tu.Status()
	i := slices.IndexFunc(st.Recent, func(d Decision) bool { return d.Knob == gpu.KnobMPSActiveThreads })
	if i < 0 || st.Recent[i].Outcome != OutcomeApplied || st.Recent[i].Time.Sub(hookDone[0]) > interval || st.Recent[i].Time.Before(hookDone[0]) {
		t.Errorf("recent decisions %+v: want the restart applied at the first round after the hook returned (+%v)", st.Recent, hookDone[0].Sub(t0))
	}
}

// offsets are the times from t0.
func offsets(ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, x := range ts {
		out = append(out, x.Sub(t0))
	}
	return out
}

func (h *hookHost) SetPauseDuty(_ context.Context, uuid, tenant string, _ []uint32, duty float64) error {
	h.note(fmt.Sprintf("SetPauseDuty(%s,%s,%g)", uuid, tenant, duty))
	return nil
}

// pauseOf is a pause of tenant's process pid on GPU-0 to duty.
func pauseOf(tenant string, pid uint32, duty Duty) Action {
	return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: pid}, Tenant: tenant, Class: gpu.ClassBatch,
		PIDs: []uint32{pid}, Current: Duty(0), Want: duty, Reason: "test"}
}

// While a tenant's client restarts through a hook off the round, a pause
// of that tenant on the GPU waits for the hook (freezing the client the
// hook stops, or the successor it starts, would hold the hook up), where
// another tenant's pause is set at once; the waiting pause is set at the
// first round after the hook is settled. (Before, it was set while the
// hook ran.)
func TestHookHoldsItsTenantsPause(t *testing.T) {
	r := newHookRun(t)
	r.round(t, capBatch)
	r.host.waitStarted(t)
	d := r.round(t, capBatch, pauseOf("batch", 8, 0.5), pauseOf("other", 9, 0.5))
	if got, want := outcomes(d), []string{"pause_duty applied"}; !slices.Equal(got, want) || d[0].Tenant != "other" {
		t.Fatalf("round while batch's hook runs: %v (%+v), want other's pause alone", got, d)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d = r.round(t, pauseOf("batch", 8, 0.5))
	if got, want := outcomes(d), []string{"mps_active_threads applied", "pause_duty applied"}; !slices.Equal(got, want) || d[1].Tenant != "batch" {
		t.Fatalf("round after the hook: %v, want the restart settled, then batch's pause", got)
	}
}

// A change's pending judgement (a relaxed value reverted if it did harm)
// waits while a hook still changes its target, as it waits for a
// restarted client's successor: reverting it then would be skipped as in
// flight and its value held as bad, never reverted. (Before, the
// judgement was dropped and its value held.)
func TestRevertWaitsForTheHook(t *testing.T) {
	r := newHookRun(t)
	r.round(t, capBatch)
	r.host.waitStarted(t)
	e := evaluation{a: capBatch, before: -1, due: r.clk.Now()}
	r.tu.mu.Lock()
	r.tu.evals = append(r.tu.evals, e)
	got := r.tu.dueReverts(&State{Now: r.clk.Now()}, r.clk.Now())
	kept := len(r.tu.evals)
	r.tu.mu.Unlock()
	if len(got) != 0 || kept != 1 {
		t.Errorf("due reverts %v, %d judgements kept; want none due while the hook runs, the judgement kept", got, kept)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
}

// What waits for a hook still running, and what does not (table).
func TestInFlight(t *testing.T) {
	restart := &hookCall{a: capBatch}
	plan := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: 9}, Tenant: "other", Plan: &gpu.Plan{Moves: []gpu.Move{{Tenant: "other", PID: 9, ToUUID: "GPU-1"}}}}
	planOf := func(tenant string) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: 10}, Tenant: tenant, Plan: &gpu.Plan{Moves: []gpu.Move{{Tenant: tenant, PID: 10, ToUUID: "GPU-1"}}}}
	}
	thaw := pauseOf("batch", 8, 0)
	revert := pauseOf("batch", 8, 0.2)
	revert.Revert = true
	onGPU1 := pauseOf("batch", 8, 0.5)
	onGPU1.GPU = "GPU-1"
	otherOnGPU1 := pauseOf("other", 11, 0.5)
	otherOnGPU1.GPU = "GPU-1"
	// a plan whose first move (the one its action names) is other's, and
	// whose second moves batch
	revertCap := capBatch
	revertCap.Current, revertCap.Want, revertCap.Revert = capBatch.Want, capBatch.Current, true
	batchOnGPU1 := capBatch
	batchOnGPU1.Target.GPU = "GPU-1"
	revertOnGPU1 := batchOnGPU1
	revertOnGPU1.Revert = true
	planOf2 := plan
	planOf2.Plan = &gpu.Plan{Moves: []gpu.Move{plan.Plan.Moves[0], {Tenant: "batch", PID: 8, ToUUID: "GPU-1"}}}
	for _, c := range []struct {
		name    string
		running *hookCall
		a       Action
		want    bool
	}{
		{"its own target", restart, capBatch, true},
		{"another client's cap", restart, mpsAction(7, 1, 0.5), false},
		{"a pause of its tenant on its GPU", restart, pauseOf("batch", 8, 0.5), true},
		{"a thaw of its tenant", restart, thaw, false},
		{"a revert of its tenant's pause", restart, revert, false},
		// a tenant is paused as a whole (its processes on every GPU, at the
		// largest duty any asks for): a pause raised on another GPU of it
		// freezes the client the hook restarts
		{"a pause of its tenant on another GPU", restart, onGPU1, true},
		{"another tenant's pause", restart, pauseOf("other", 9, 0.5), false},
		{"a plan moving its tenant", restart, planOf("batch"), true},
		{"a plan moving another tenant", restart, planOf("embed"), false},
		{"a second plan", &hookCall{a: plan}, planOf("embed"), true},
		{"a pause beside a plan of another tenant", &hookCall{a: plan}, pauseOf("batch", 8, 0.5), false},
		{"a pause of the tenant a plan moves", &hookCall{a: plan}, pauseOf("other", 9, 0.5), true},
		{"a pause of a tenant a plan moves second", &hookCall{a: planOf2}, pauseOf("batch", 8, 0.5), true},
		{"a pause of the tenant a plan moves, on the GPU it goes to", &hookCall{a: plan}, otherOnGPU1, true},
		{"a thaw of the tenant a plan moves", &hookCall{a: plan}, pauseOf("other", 9, 0), false},
		// the eviction stops the client the restart hook would restart
		{"a restart of a tenant a plan moves", &hookCall{a: planOf("batch")}, capBatch, true},
		{"a restart of a tenant a plan moves second", &hookCall{a: planOf2}, capBatch, true},
		// and it would stop the client a revert's restart hook restarts:
		// the revert waits, as the plan waits for the revert's restart
		{"a revert's restart of a tenant a plan moves", &hookCall{a: planOf("batch")}, revertCap, true},
		{"a revert's restart of a tenant a plan moves second", &hookCall{a: planOf2}, revertCap, true},
		{"a plan moving a tenant whose revert restarts", &hookCall{a: revertCap}, planOf("batch"), true},
		// the restart hook is told the tenant: one at a time, reverts too
		{"a revert's restart beside its tenant's restart on another GPU", &hookCall{a: batchOnGPU1}, revertCap, true},
		{"a restart beside its tenant's revert on another GPU", &hookCall{a: revertOnGPU1}, capBatch, true},
		{"a revert's restart beside another tenant's restart", &hookCall{a: mpsAction(7, 1, 0.5)}, revertCap, false},
		{"a restart of another tenant beside a plan", &hookCall{a: planOf("batch")}, mpsAction(7, 1, 0.5), false},
	} {
		tu := &Tuner{hooks: map[string]*hookCall{c.running.a.Target.String(): c.running}}
		if got := tu.inFlight(c.a); got != c.want {
			t.Errorf("%s: in flight %v, want %v", c.name, got, c.want)
		}
	}
}
