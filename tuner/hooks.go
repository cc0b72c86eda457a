package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Hooks off the round. On a host, an MPS client's restart and a
// rebalancing plan run an outside program (gpu.Hooked) for as long as it
// takes, up to its timeout (minutes). Run inside the round, every other
// decision would wait for it: another tenant's pause, a revert, the kill
// switch's thaw. So the executor starts such a call on its own goroutine,
// once the action has passed the guards and is journaled (planned, the
// original, the restart: a crash while it runs leaves what a crash in the
// round left), and the round goes on; the rounds after it skip what its
// outcome bears on (inFlight: its target, a second plan or one moving its
// tenant, a restart of a tenant its plan moves or another restart of its
// tenant, a revert's too, a pause raised on its tenant; the dwell holds its knob on its GPU, Dwell.Started), and the
// first round to find the call ended settles it as the round would have
// (outcome, journal, guards, the successor of a restarted client). A
// failure found then rolls back nothing else: the actions applied beside
// it were judged in their own round. The exit's restore cancels the calls
// still running and settles them, but the restores and reverts setting
// back what it would set back, which it waits for once it has set back
// the rest (exitrestore.go); the kill switch, engaged, cuts them
// (cutHooks), and they are settled as failed at the next round.

// hookCall is a call of an action's actuator running off the round.
type hookCall struct {
	a Action
	d Decision
	// st is the round's state at the start, what the change is judged
	// against (its objective before, its request counters).
	st          *State
	hadOriginal bool
	started     time.Time
	// restart is what was on the GPU at an MPS client's restart, and
	// seen the processes the rounds had seen there then: what the
	// successor is told from, not what the rounds saw while the hook ran
	// (the successor itself, started by the hook).
	restart Restart
	seen    map[pidKey]recentProc
	succ    gpu.MPSSuccessors // (nil: none to ask)
	// restore is the original the call sets back (restoreDeferred), nil for
	// a change: settled as a restore, not as a change
	restore *Original
	done    chan struct{}
	// cancel ends the call (its hook's process group is killed); cut
	// says why it was cut short, "" while it was not (cutHooks).
	cancel context.CancelFunc
	cut    string
	// err and ended are the call's, set before done is closed; named
	// (where namedOK) is the successor the restart hook named, asked at
	// its return (followSuccessor).
	err     error
	ended   time.Time
	named   uint32
	namedOK bool
	// atExit marks a change to its target's original (a revert, a
	// policy's change back) that the exit's restore waited for
	// (awaitHooks): settled as the restore it made (restoredByHook), not
	// closed by the round's rule (setBack).
	atExit bool
	// cancelledAtExit: the exit's restore cancelled it at its start
	// (cancelHooks); still running at the deadline, it is named so.
	cancelledAtExit bool
}

// HookRun is a call of a hook the tuner started and has not settled: an
// MPS client's restart or a rebalancing plan, running off the round.
type HookRun struct {
	GPU      string
	GPUIndex int
	Tenant   string
	Knob     gpu.Knob
	PID      uint32
	// Plan is a rebalancing plan's call (its hook, or the eviction), not
	// an MPS client's restart.
	Plan     bool
	From, To string
	Since    time.Time
}

// hooked reports whether a's actuator call runs a hook on this host: an
// MPS cap with its client's restart through a restart hook, or a plan
// handed to a hook or an eviction (not a relayout the tuner carries out
// itself, which is its own job over the rounds).
func (t *Tuner) hooked(a Action) bool {
	ac := t.o.Actuators
	switch {
	case a.Plan != nil:
		if t.selfRelayout(*a.Plan) {
			return false
		}
		if r, ok := actuator[gpu.Rebalancer](ac); ok {
			return runsHooks(r)
		}
		p, _ := actuator[gpu.PlacementActuator](ac)
		return runsHooks(p)
	case a.Knob == gpu.KnobMPSActiveThreads && a.Restart:
		m, _ := actuator[gpu.MPSActuator](ac)
		return runsHooks(m)
	}
	return false
}

// runsHooks reports whether the actuator x runs hooks.
func runsHooks(x any) bool {
	h, ok := x.(gpu.Hooked)
	return ok && h.RunsHooks()
}

// inFlight reports whether a's change waits for a call of a hook still
// running: one on its target; for a plan, any plan's, or a restart of a
// tenant the plan moves; for an MPS client's restart, a revert's and a
// restore's too, the restart of another client of its tenant, on whatever
// GPU (the restart hook is told the tenant: two at once would restart its
// serving stack twice over, together), or a plan that moves its tenant
// (the hook would restart a client the eviction is stopping, or the
// successor the plan starts; the plan waits for a revert's restart as
// well, and waits up to its timeout as a restart hook does); for a pause
// raised (not a thaw, not a revert),
// a restart of the same tenant or a plan that moves it, on whatever GPU
// (a tenant is paused as a whole, every process of it on every GPU at
// the largest duty any asks for: freezing a client the hook is stopping,
// or the successor it is starting, would hold the hook up; before hooks
// ran off the round, the pause came after it).
func (t *Tuner) inFlight(a Action) bool { return t.holder(a) != nil }

// holder is the call a's change waits for (inFlight): the one on its
// target, else the oldest that holds it; nil for none.
func (t *Tuner) holder(a Action) *hookCall {
	if h, ok := t.hooks[a.Target.String()]; ok || len(t.hooks) == 0 {
		return h
	}
	for _, h := range t.hooksByAge() {
		if waitsFor(a, h.a) {
			return h
		}
	}
	return nil
}

// holderRun is the call a's change waits for (holder), as the status
// tells it; nil for none.
func (t *Tuner) holderRun(a Action) *HookRun {
	h := t.holder(a)
	if h == nil {
		return nil
	}
	r := h.run()
	return &r
}

// waitsFor reports whether a's change waits for the hooked change run
// (inFlight's rule over two actions): on the same target, or, for a plan,
// any plan or a restart of a tenant it moves; for a pause raised or an MPS
// client's restart, a change of its tenant's processes.
func waitsFor(a, run Action) bool {
	switch {
	case a.Target == run.Target:
		return true
	case a.Plan != nil:
		return run.Plan != nil || run.Tenant != "" && moves(*a.Plan, run.Tenant)
	case a.Knob == gpu.KnobPauseDuty && !thaws(a) && !a.Revert,
		a.Knob == gpu.KnobMPSActiveThreads && a.Restart:
		return changes(run, a.Tenant)
	}
	return false
}

// changes reports whether the hooked change run changes processes of
// tenant: the restart of its client, or a plan that moves it (any of the
// plan's moves, not only the first, which the plan's action names).
func changes(run Action, tenant string) bool {
	switch {
	case tenant == "":
		return false
	case run.Plan != nil:
		return moves(*run.Plan, tenant)
	}
	return run.Tenant == tenant
}

// moves reports whether plan moves a process of tenant.
func moves(plan gpu.Plan, tenant string) bool {
	return slices.ContainsFunc(plan.Moves, func(m gpu.Move) bool { return m.Tenant == tenant })
}

// planInFlight reports whether a rebalancing plan's hook runs.
func (t *Tuner) planInFlight() bool {
	for _, h := range t.hooks {
		if h.a.Plan != nil {
			return true
		}
	}
	return false
}

// startHook starts a's actuator call off the round, with a context the
// tuner owns (cancelled at exit: cancelHooks, awaitHooks; after a round
// stuck at exit, hookLive.stop), through the actuators bound now.
func (t *Tuner) startHook(st *State, a Action, d Decision, hadOriginal bool, now time.Time) {
	h := &hookCall{a: a, d: d, hadOriginal: hadOriginal, st: &State{Now: st.Now, Snapshot: st.Snapshot, Fast: st.Fast}}
	if succ, ok := t.successors(a); ok {
		h.succ = succ
		h.restart = t.restartOf(a, now, now)
		h.seen = maps.Clone(t.onGPU)
		maps.DeleteFunc(h.seen, func(k pidKey, _ recentProc) bool { return k.gpu != a.GPU })
	}
	t.runHook(h, now)
}

// runHook runs h's actuator call on its own goroutine, from now.
func (t *Tuner) runHook(h *hookCall, now time.Time) {
	if t.hookCtx == nil {
		t.hookCtx, t.hookStop = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithCancel(t.hookCtx)
	h.started, h.done, h.cancel = now, make(chan struct{}), cancel
	a := h.a
	if t.hooks == nil {
		t.hooks = map[string]*hookCall{}
	}
	t.hooks[a.Target.String()] = h
	t.chain().Started(a, now)
	ac, clock, succ, runs := t.o.Actuators, t.o.Clock, h.succ, &t.hookLive
	runs.add(h.done, cancel, fmt.Sprintf("the hook on %s", a.Target))
	go func() {
		defer close(h.done)
		defer cancel()
		defer runs.remove(h.done)
		h.err = applyOn(ctx, ac, a)
		h.ended = clock.Now()
		if succ != nil && h.err == nil {
			h.named, h.namedOK = succ.Successor(a.GPU, a.PID)
		}
	}()
	level.Info(t.o.Logger).Log("msg", "tuner hook started off the round; its outcome is settled at the first round after it ends",
		"gpu", a.GPU, "knob", a.Knob, "tenant", a.Tenant, "from", h.d.From, "to", h.d.To)
}

// hookLive are the hooks' calls still running, each's end (done),
// cancel and name, under their own lock: the exit after a round stuck
// holding the tuner's cancels them and waits for their end (stop), and
// the shutdown for those the exit left running (Runner.Late). The zero
// value is ready.
type hookLive struct {
	mu      sync.Mutex
	running map[chan struct{}]liveCall
	stopped bool // stop was called: a call started since is cancelled at once
}

// liveCall is a call running: its cancel and what the log calls it.
type liveCall struct {
	cancel context.CancelFunc
	name   string
}

// add counts the call ending with done, cancelled by cancel, called name.
func (r *hookLive) add(done chan struct{}, cancel context.CancelFunc, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		cancel()
	}
	if r.running == nil {
		r.running = map[chan struct{}]liveCall{}
	}
	r.running[done] = liveCall{cancel, name}
}

// names are the calls running, sorted.
func (r *hookLive) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.running {
		out = append(out, c.name)
	}
	slices.Sort(out)
	return out
}

// remove forgets the call ending with done.
func (r *hookLive) remove(done chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, done)
}

// stop cancels the calls running, and those started from now on; the
// channel it returns (never nil) is closed once those running now have
// ended.
func (r *hookLive) stop() <-chan struct{} {
	r.mu.Lock()
	r.stopped = true
	dones := slices.Collect(maps.Keys(r.running))
	for _, c := range r.running {
		c.cancel()
	}
	r.mu.Unlock()
	return allClosed(dones)
}

// ended is closed once every call running now has ended (those the exit
// cut: awaitHooks), nil where none runs: the node lock is released after
// it (Runner.closeAll), not while what a cut hook does (its process group
// still dying) may still land. (A call is removed only once its actuator
// and its successor's call have returned: nothing of it lands after.)
func (r *hookLive) ended() <-chan struct{} {
	r.mu.Lock()
	dones := slices.Collect(maps.Keys(r.running))
	r.mu.Unlock()
	if len(dones) == 0 {
		return nil
	}
	return allClosed(dones)
}

// collectHooks settles the calls that have ended, oldest first; the error
// joins the restores that failed (restoreSettled).
func (t *Tuner) collectHooks(ctx context.Context, now time.Time) ([]Decision, error) {
	var out []Decision
	var errs []error
	for _, h := range t.hooksByAge() {
		if !h.returned() {
			continue
		}
		d, _, err := t.settleHook(ctx, h, now)
		out = append(out, d...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// settleHook settles the call h, ended: a restore through settleRestore
// (err, its failure), a change as the round would have (applied, that
// it took).
func (t *Tuner) settleHook(ctx context.Context, h *hookCall, now time.Time) (ds []Decision, applied bool, err error) {
	delete(t.hooks, h.a.Target.String())
	d := h.d
	d.Time = now
	a := h.a
	if h.restore != nil {
		rd, err := t.settleRestore(ctx, *h.restore, a, d, h.err, now)
		t.chain().Ended(a) // (a restore teaches the guards nothing, as in the round)
		return []Decision{*rd}, err == nil, err
	}
	if h.cut != "" && h.err != nil {
		a.Reason = joinReasons(a.Reason, h.cut)
	}
	ds, applied = t.settle(ctx, h.st, a, d, h.err, h.hadOriginal, now, map[string][]Action{}, h)
	if applied && h.a.Plan != nil {
		t.notePlanApplied(*h.a.Plan, now)
	}
	return ds, applied, nil
}

// cutHooks cancels, while the kill switch is engaged, the calls still
// running but reverts (which the switch lets through): each hook's process group is killed (the command's context
// ends), and the first round to find it ended settles it as failed, its
// reason saying what was cut. A hook killed half way may leave its target
// in a state nobody knows (a client stopped and no successor started, a
// plan's moves partly made): its original stays open in the journal, so
// the restore at exit, or at the next start, sets it back; the kill switch
// itself sets back nothing but a pause (thawed) and lets reverts through.
func (t *Tuner) cutHooks(now time.Time) {
	if len(t.hooks) == 0 || !t.chain().Stopped() {
		return
	}
	for _, h := range t.hooksByAge() {
		if h.returned() {
			continue // ended by itself: settled as it returned
		}
		if h.cut != "" || h.a.Revert {
			continue // (a revert goes on: the kill switch lets reverts through)
		}
		ran := now.Sub(h.started).Round(time.Second)
		h.cut = fmt.Sprintf("cut by the kill switch after %v: its hook's processes were killed half way, so what it had done is not known (%s); the original stays in the journal, set back at exit or at the next start", ran, cutLeaves(h.a))
		h.cancel()
		level.Warn(t.o.Logger).Log("msg", "tuner kill switch engaged: killing a hook under way; what it had done is not known, its original stays in the journal for the restore at exit or at the next start",
			"gpu", h.a.GPU, "knob", h.a.Knob, "tenant", h.a.Tenant, "pid", h.a.PID, "from", h.d.From, "to", h.d.To, "ran", ran)
	}
}

// cutLeaves says what a hook cut half way may have left.
func cutLeaves(a Action) string {
	if a.Plan != nil {
		return "some of the plan's moves may be made, others not"
	}
	return fmt.Sprintf("client %d may be stopped, its successor started or not", a.PID)
}

// hooksByAge are the calls running or not yet settled, oldest first.
func (t *Tuner) hooksByAge() []*hookCall {
	hs := slices.Collect(maps.Values(t.hooks))
	slices.SortFunc(hs, func(a, b *hookCall) int {
		return cmp.Or(a.started.Compare(b.started), cmp.Compare(a.a.Target.String(), b.a.Target.String()))
	})
	return hs
}

// returned says whether h's call has returned.
func (h *hookCall) returned() bool {
	return isClosed(h.done)
}

// hookRuns are the calls running, for the status, oldest first.
func (t *Tuner) hookRuns() []HookRun {
	var out []HookRun
	for _, h := range t.hooksByAge() {
		out = append(out, h.run())
	}
	return out
}

// run is the call as the status tells it.
func (h *hookCall) run() HookRun {
	a := h.a
	return HookRun{GPU: a.GPU, GPUIndex: a.GPUIndex, Tenant: a.Tenant, Knob: a.Knob, PID: a.PID, Plan: a.Plan != nil, From: h.d.From, To: h.d.To, Since: h.started}
}

// hookWhy says what hook runs on a GPU, for its round's line ("" for
// none): the oldest, and how many more.
func hookWhy(runs []HookRun, uuid string, now time.Time) string {
	return firstOnGPU(runs, uuid, func(r HookRun) string { return r.GPU }, func(r HookRun) string {
		return fmt.Sprintf("a hook runs for %s, started %v ago (the round's other decisions do not wait for it; its outcome comes at the first round after it ends)",
			describeDecision(Decision{Knob: r.Knob, Tenant: r.Tenant, From: r.From, To: r.To}), now.Sub(r.Since).Round(time.Second))
	})
}

// Starter is a guard that learns of a change started off the round, whose
// outcome Record teaches at a later round, or which Ended ends with no
// outcome to learn (a restore's).
type Starter interface {
	Started(a Action, now time.Time)
	Ended(a Action)
}

// Started tells every Starter of the chain that a's change has started.
func (c Chain) Started(a Action, now time.Time) {
	for _, g := range c {
		if s, ok := g.(Starter); ok {
			s.Started(a, now)
		}
	}
}

// Ended tells every Starter of the chain that a's change started off the
// round has ended, with nothing to learn from it.
func (c Chain) Ended(a Action) {
	for _, g := range c {
		if s, ok := g.(Starter); ok {
			s.Ended(a)
		}
	}
}

// Started notes a's change under way (Starter): until its outcome is
// recorded, the dwell refuses every other change of its GPU's knob (a
// revert excepted), as it would have from the change in the round, and
// it counts For from that outcome. (Without it, a second client of the
// GPU was restarted in the same round as the first, or in the next,
// while the first one's hook ran.)
func (d *Dwell) Started(a Action, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running == nil {
		d.running = map[string]applied{}
	}
	d.running[a.Target.String()] = applied{at: now, knob: a.Knob, sign: Direction(a), domain: a.DomainKey()}
}

// Ended ends a change started off the round (Starter).
func (d *Dwell) Ended(a Action) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.running, a.Target.String())
}

// Record ends a change started off the round, and remembers one applied.
func (d *Dwell) Record(a Action, o Outcome, err error, now time.Time) {
	d.Ended(a)
	d.history.Record(a, o, err, now)
}

// runningOn returns a change of the GPU knob domain still running.
func (d *Dwell) runningOn(domain string) (applied, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.running {
		if r.domain == domain {
			return r, true
		}
	}
	return applied{}, false
}
