package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The executor is the only code of the product that changes a GPU: every
// action (a policy's, a revert, a rollback, a restore, a rebalancing plan,
// a MIG relayout) goes through execute, or through restoreLocked at exit
// and after a crash, and reaches the actuators through apply and the
// mechanism table (Mechanisms). One action's way:
//
//	mode -> guard chain but the budgets -> journal "planned" -> the
//	budgets (rate, cap), unless the journal did not take it -> the knob
//	available on the GPU? -> (recommend, or the journal did not take it)
//	-> journal the original -> apply -> on failure roll back what this
//	round applied on the GPU -> journal, count, log and teach the guards
//	the outcome.

// handle guards and applies the actions, GPU by GPU: when one action of a
// GPU fails, those applied before it on that GPU in this round are rolled
// back, and those after it that the guards admit are refused untried (the
// GPU keeps neither the plan's head nor its tail), a revert excepted.
func (t *Tuner) handle(ctx context.Context, st *State, actions []Action, now time.Time) []Decision {
	var out []Decision
	appliedOn := map[string][]Action{}
	failedOn := map[string]Action{}
	for _, a := range actions {
		var after *Action
		if f, failed := failedOn[a.GPU]; failed && !a.Revert {
			after = &f
		}
		d, _ := t.execute(ctx, st, a, now, appliedOn, after)
		if slices.ContainsFunc(d, func(d Decision) bool { return d.GPU == a.GPU && d.Outcome == OutcomeFailed }) {
			failedOn[a.GPU] = a
		}
		out = append(out, d...)
	}
	return out
}

// refuseAfterFailure refuses a, an action of a GPU on which failed, an
// action before it in the round, failed: what the round applied there was
// rolled back, and a goes with it. It is journaled and counted as a
// refusal, but teaches the guards nothing: a is not backed off (nor
// marked asked for by the baselines' retry), so that it is tried in the
// rounds failed's target backs off, not behind it at every one of its
// tries (one target failing at every try would keep the GPU's other
// changes for good).
func (t *Tuner) refuseAfterFailure(a, failed Action, now time.Time) Decision {
	why := failed.Target.String() + " failed before it in the round, and what the round applied on the GPU was rolled back"
	t.trackProc(a.Target, now)
	t.journalPlanned(a, now)
	d := Decision{Time: now, GPU: a.GPU, Tenant: a.Tenant, Knob: a.Knob, From: valueText(a.Current), To: a.Want.String(),
		Outcome: OutcomeRefused, Reason: joinReasons(a.Reason, "refused, not tried: "+why)}
	return t.conclude(a, nil, d, now, nil) // no guard learns of it
}

// execute runs one action through the guard chain and, where its GPU's
// mode allows (a plan's: every GPU's it changes, actionMode), applies it.
// appliedOn holds the actions applied in this round by GPU, which a
// failure rolls back; after, where not nil, the action of its GPU that
// failed before it in the round, which refuses it once the guards admit
// it (a hook's wait, a restore's hold and a guard's refusal, the kill
// switch's, come first, as for any action). It returns the decisions and
// whether the action took (or, for a MIG relayout, started).
func (t *Tuner) execute(ctx context.Context, st *State, a Action, now time.Time, appliedOn map[string][]Action, after *Action) ([]Decision, bool) {
	mode := t.actionMode(a)
	if mode == ModeOff {
		return nil, false
	}
	if h := t.holder(a); h != nil {
		t.waitsForHook(a, h) // (its hook's outcome comes at a later round, hooks.go)
		return nil, false
	}
	if t.heldByRestore(a) {
		return nil, false // (set back by a restore this round: restorehook.go)
	}
	ok, guard, why, quiet := t.chain().Judge(st, a, now)
	if quiet {
		t.keepJudgement(a)
		return nil, false // asked for already, and waiting: not a new decision
	}
	if ok && after != nil {
		return []Decision{t.refuseAfterFailure(a, *after, now)}, false
	}
	jerr := t.journalPlanned(a, now)
	// A change the journal did not take is not made (below): it spends
	// no budget, so that an outage neither shows as the rate's refusals
	// nor leaves the first change after the repair waiting for tokens.
	unjournaled := mode == ModeEnforce && jerr != nil && !a.Revert
	if ok && !unjournaled {
		ok, guard, why, _ = t.chain().Spend(st, a, now)
	}
	// The target becomes the action's value only where it is set or
	// recommended below: a change refused (by a guard or the actuator) or
	// failed leaves the target the tuner holds, so that its gauges and page
	// never show as decided a value nothing put in force.
	t.trackProc(a.Target, now) // (whatever the outcome: the guards keep its refusals, failures)
	d := Decision{Time: now, GPU: a.GPU, Tenant: a.Tenant, Knob: a.Knob, From: valueText(a.Current), To: a.Want.String(), Reason: a.Reason}
	if !ok {
		t.keepJudgement(a) // (a revert due that a guard refused is judged again at the next round)
		d.Outcome, d.Guard = OutcomeGuarded, guard
		d.Reason = joinReasons(a.Reason, "refused by "+guard+": "+why)
		t.counts.Refusals[guard]++
		return []Decision{t.finish(a, d, now, nil)}, false
	}
	if why, err := t.notTried(st, a); err != nil {
		d.Outcome = OutcomeRefused
		d.Reason = joinReasons(a.Reason, "refused, not tried: "+why)
		return []Decision{t.finish(a, d, now, err)}, false
	}
	if mode == ModeRecommend || !t.canApply(a) || unjournaled {
		d.Outcome = OutcomeRecommended
		t.noteJournalHeld(a.GPU, unjournaled)
		if unjournaled {
			d.Reason = joinReasons(a.Reason, journalHeld+": "+jerr.Error())
		} else if mode == ModeEnforce {
			d.Reason = joinReasons(a.Reason, "recommended only: this host has no rebalancing hook (--tuner.rebalance-hook)")
		}
		t.setTarget(a, ModeRecommend) // (in enforce mode too: nothing is set)
		return []Decision{t.finish(a, d, now, nil)}, false
	}
	_, hadOriginal := t.originals[a.Target.String()]
	if why := unreadOriginal(a, hadOriginal); why != "" {
		d.Outcome = OutcomeRefused
		d.Reason = joinReasons(a.Reason, "refused, not tried: "+why)
		return []Decision{t.finish(a, d, now, errors.New(why))}, false
	}
	asked, near := a.Want, ""
	err := t.keepOriginal(ctx, a, now)
	if err == nil {
		err = t.widenHeld(a, now, false)
	}
	if err == nil {
		err = t.journalRestart(a, now)
	}
	if err == nil {
		if a.Plan != nil && t.selfRelayout(*a.Plan) {
			if err = t.startRelayout(ctx, st, a, a.Plan.MIG[0], now); err == nil {
				t.setTarget(a, ModeEnforce)
				return t.relayoutStarted(ctx, a, now), true
			}
		} else if mode == ModeEnforce && t.hooked(a) {
			t.startHook(st, a, d, hadOriginal, now)
			return nil, true
		} else if a, near, err = t.applyReachable(ctx, a); near != "" {
			d.To, d.Reason = a.Want.String(), joinReasons(d.Reason, near)
		}
	}
	out, took := t.settle(ctx, st, a, d, err, hadOriginal, now, appliedOn, nil)
	if took && near != "" {
		t.closeUnreachable(a.Target.String(), asked, near, now)
	}
	return out, took
}

// notTried is why the action a is refused before it is tried, as its
// decision says it and as its error: the knob is not available on its GPU
// (errUnavailable), or a pause would freeze a group that holds another
// tenant's process (errSharedGroup); a nil error where it may be tried.
func (t *Tuner) notTried(st *State, a Action) (string, error) {
	if why, ok := t.unavailable(st, a); ok {
		return why, fmt.Errorf("%s: %w", why, errUnavailable)
	}
	if why := t.pauseShared(st, a); why != "" {
		return sharedText(why), fmt.Errorf("%s: %w", why, errSharedGroup)
	}
	return "", nil
}

// settle ends an action the actuator was called for, err its outcome:
// journaled, counted and taught to the guards as every decision, and, on
// success, the target set and followed; on failure, what the round
// applied on the GPU before it (appliedOn) is rolled back. h is the call
// off the round it ended, nil for one in the round.
func (t *Tuner) settle(ctx context.Context, st *State, a Action, d Decision, err error, hadOriginal bool, now time.Time, appliedOn map[string][]Action, h *hookCall) ([]Decision, bool) {
	a, d, err = pendingRestart(a, d, err) // (set, and waiting for the client's own next context)
	d.Outcome = outcomeOf(err)
	if h, ok := holdOf(a.Knob); err != nil && ok && h.releases(a) {
		t.releaseFailed(a.Target.String())
	}
	if err != nil {
		if made := movesMade(a, err); len(made) > 0 {
			// a plan applied in part: failed, but its tenants moved are
			// held as a plan applied would hold them
			d.Reason = joinReasons(a.Reason, string(d.Outcome)+", "+partText(a, made)+": "+err.Error())
			t.notePlanApplied(gpu.Plan{Moves: made}, now)
		} else {
			d.Reason = joinReasons(a.Reason, string(d.Outcome)+", not applied: "+err.Error())
		}
		if d.Outcome != OutcomeRefused {
			t.noteInForce(a, false, now) // (a device setting refused changed nothing)
		}
		if d.Outcome == OutcomeRefused && !hadOriginal && oneCall(a.Knob) {
			// refused whole: nothing was changed, so nothing is left to
			// restore (kept, the exit and every start would try to set
			// back a value in force, as refused as the change was)
			if _, kept := t.originals[a.Target.String()]; kept {
				t.closeOriginal(a.Target.String(), now, "not changed: the change was refused")
			}
		}
		out := []Decision{t.finish(a, d, now, err)}
		t.watchFailedRestart(a, now, h, err) // (its hook may have started the successor all the same)
		if d.Outcome == OutcomeFailed {
			out = append(out, t.rollback(ctx, appliedOn[a.GPU], a, now)...)
			appliedOn[a.GPU] = nil
		}
		return out, false
	}
	d.Applied = true
	asked := a
	a, d, known := t.readBackKnown(ctx, a, d)
	t.noteInForce(a, known, now)
	t.setTarget(a, ModeEnforce)
	appliedOn[a.GPU] = append(appliedOn[a.GPU], a)
	t.noteApplied(st, a, now)
	o, back := t.setBack(a, h) // (before followSuccessor: no original to follow)
	t.followSuccessor(a, now, h)
	t.noteHeld(a, now)
	out := []Decision{t.finishAsked(a, asked, d, now, nil)}
	if back {
		t.closeSetBack(o, now)
	}
	return out, true
}

// journalHeld is what the reason of a change recommended only because the
// journal did not take it says after the action's own (in enforce mode; a
// revert is made all the same); noteJournalHeld marks one.
const journalHeld = "recommended only: the tuner journal cannot be written, so no change is made until a write succeeds"

// noteJournalHeld keeps whether the change the round recommends on GPU
// uuid, its latest there, was held back by the journal (held): its log
// line (finish) and the GPU's round say so by this mark, not by its
// reason's words.
func (t *Tuner) noteJournalHeld(uuid string, held bool) {
	if t.journalHeldOn == nil {
		t.journalHeldOn = map[string]bool{}
	}
	t.journalHeldOn[uuid] = held
}

// journalRefusal stands for the journal among the guards whose repeated
// refusals are logged at debug (refusalLevel); forgotten when it is
// writable again (noteJournal), so that the next outage is logged.
const journalRefusal = "(journal)"

// chain is the tuner's guard chain.
func (t *Tuner) chain() Chain { return Chain(t.o.Guards) }

// refusalLevel is the level a refusal is logged at: info the first time
// a target's change is refused by a guard, or recommended only because the
// journal cannot be written, debug while the same refusal repeats round
// after round (a held-back change would otherwise log the same line every
// interval). by is the guard, or journalRefusal.
func (t *Tuner) refusalLevel(a Action, d Decision, by string) func(log.Logger) log.Logger {
	if t.refused == nil {
		t.refused = map[string]string{}
	}
	k, v := a.Target.String(), by+" "+d.To
	if t.refused[k] == v {
		return level.Debug
	}
	t.refused[k] = v
	return level.Info
}

// finish journals, counts, logs and teaches the guards one outcome (err:
// the actuator's error, if any).
func (t *Tuner) finish(a Action, d Decision, now time.Time, err error) Decision {
	return t.finishAsked(a, a, d, now, err)
}

// finishAsked is finish of a change whose value in force, a's, was read
// back other than the one asked, asked's: the guards learn what was asked
// (the baselines' retry does not ask it again at once), the journal and
// the log what is in force.
func (t *Tuner) finishAsked(a, asked Action, d Decision, now time.Time, err error) Decision {
	return t.conclude(a, &asked, d, now, err)
}

// conclude is finishAsked; asked nil: no guard learns the outcome.
func (t *Tuner) conclude(a Action, asked *Action, d Decision, now time.Time, err error) Decision {
	t.journal(Record{Time: now, Event: string(d.Outcome), Target: a.Target, Tenant: a.Tenant,
		From: encodeValue(a.Current), To: encodeValue(a.Want), Guard: d.Guard, Reason: d.Reason, Moved: movedTenants(a, d, err)})
	t.counts.Actions[ActionKey{Knob: a.Knob, Outcome: d.Outcome}]++
	if a.Revert && d.Applied {
		t.counts.Reverts++
	}
	if a.HoldLeft && d.Applied && t.o.Hold != nil && a.Current != nil {
		t.o.Hold.Block(a.Target, a.Current, now)
	}
	if asked != nil {
		t.chain().Record(*asked, d.Outcome, err, now)
	}
	unjournaled := d.Outcome == OutcomeRecommended && t.journalHeldOn[a.GPU]
	if d.Outcome != OutcomeGuarded && !unjournaled {
		delete(t.refused, a.Target.String())
	}
	lv := level.Info
	switch {
	case d.Outcome == OutcomeGuarded:
		lv = t.refusalLevel(a, d, d.Guard)
	case unjournaled:
		lv = t.refusalLevel(a, d, journalRefusal)
	case d.Outcome == OutcomeFailed, d.Outcome == OutcomeRolledBack:
		lv = level.Warn
	}
	kv := []any{"msg", "tuner decision", "outcome", d.Outcome, "gpu", a.GPU, "knob", a.Knob, "from", d.From, "to", d.To, "reason", d.Reason}
	if a.Tenant != "" {
		kv = append(kv, "tenant", a.Tenant)
	}
	if d.Guard != "" {
		kv = append(kv, "guard", d.Guard)
	}
	lv(t.o.Logger).Log(kv...)
	return d
}

// rollback undoes the actions applied on a GPU in this round, newest
// first, after failed failed. Each one undone is then taught to the guards
// as a failure, so that the plan is not retried at once.
func (t *Tuner) rollback(ctx context.Context, done []Action, failed Action, now time.Time) []Decision {
	var out []Decision
	for i := len(done) - 1; i >= 0; i-- {
		a := done[i]
		if a.Current == nil {
			continue
		}
		back := a
		back.Current, back.Want, back.Revert = a.Want, a.Current, true
		back.Reason = "rollback: " + failed.Target.String() + " failed in the same plan"
		d := Decision{Time: now, GPU: a.GPU, Tenant: a.Tenant, Knob: a.Knob, From: back.Current.String(), To: back.Want.String(), Reason: back.Reason}
		asked := back
		err := t.apply(ctx, back)
		var o Original
		var setBack bool
		if err != nil {
			d.Outcome = OutcomeFailed
			d.Reason = joinReasons(d.Reason, "failed: "+err.Error())
			t.noteInForce(back, false, now)
			t.watchFailedRestart(back, now, nil, err)
		} else {
			d.Outcome, d.Applied = OutcomeRolledBack, true
			var known bool
			back, d, known = t.readBackKnown(ctx, back, d)
			t.noteInForce(back, known, now)
			t.setTarget(back, ModeEnforce)
			t.noteApplied(nil, back, now)
			o, setBack = t.setBack(back, nil)
			t.followSuccessor(back, now, nil)
		}
		out = append(out, t.finishAsked(back, asked, d, now, err))
		if setBack {
			t.closeSetBack(o, now)
		}
	}
	for _, a := range done {
		t.chain().Record(a, OutcomeFailed, nil, now)
	}
	return out
}

// oneCall says whether a change of knob is one call that a refusal
// leaves undone whole (a device setting), unlike a pause, an MPS cap and
// its client's restart, or a plan, whose refusal may come after a part.
func oneCall(knob gpu.Knob) bool {
	switch knob {
	case gpu.KnobVGPUScheduler, gpu.KnobComputeTimeSlice, gpu.KnobLockedClocks, gpu.KnobPowerLimit:
		return true
	}
	return false
}

func outcomeOf(err error) Outcome {
	var partial *gpu.PartialError
	switch {
	case err == nil:
		return OutcomeApplied
	case errors.As(err, &partial) && len(partial.Applied) > 0:
		return OutcomeFailed // (something was changed: not refused, whatever the rest was)
	case errors.Is(err, gpu.ErrNotSupported), errors.Is(err, gpu.ErrBusy):
		return OutcomeRefused
	default:
		return OutcomeFailed
	}
}

// apply sets the action's value through the mechanism of its knob, or
// applies the rebalancing plan it carries.
func (t *Tuner) apply(ctx context.Context, a Action) error {
	defer t.calling(callText(a))()
	return applyOn(ctx, t.o.Actuators, a)
}

// applyOn is apply through the actuators ac (a call off the round keeps
// those bound at its start).
func applyOn(ctx context.Context, ac Actuators, a Action) error {
	if a.Plan != nil {
		return applyPlan(ctx, ac, *a.Plan)
	}
	if a.Knob == gpu.KnobProcessLifecycle {
		return startProcess(ctx, ac, a.PID) // the restore of a process a relayout stopped
	}
	m, ok := mechanismOf(a.Knob)
	if !ok {
		return fmt.Errorf("tuner: no mechanism sets %s", a.Knob)
	}
	return m.apply(ctx, ac, a)
}

// Mechanisms is the mechanism table, the one list of the knobs the tuner
// changes: adding a knob adds its entry here (beside the gpu actuator
// interface it names and the backends that implement it). Each entry names
// its mechanism, says how the executor sets a value of its knob through
// the host's actuator of its interface (nil for the slow loop's, whose
// actions carry a plan: applyPlan), and gives each knob's unit and the
// sharing modes of the GPUs it applies to. The order is the order of
// knobs in flags and metrics.
var Mechanisms = []Mechanism{
	mechanism("mps", valued(applyMPS), knob(gpu.KnobMPSActiveThreads, "ratio", gpu.SharingMPS).ofProcess()),
	mechanism("timeslice", valued(func(ctx context.Context, ts gpu.TimeSliceActuator, a Action, l Level) error {
		return ts.SetComputeTimeSlice(ctx, a.GPU, gpu.TimeSliceLevel(l))
	}), knob(gpu.KnobComputeTimeSlice, "level", gpu.SharingTimeSlice)),
	mechanism("vgpu-scheduler", valued(func(ctx context.Context, vs gpu.VGPUSchedulerActuator, a Action, s Scheduler) error {
		return vs.SetVGPUScheduler(ctx, a.GPU, s.Setting())
	}), knob(gpu.KnobVGPUScheduler, "policy", gpu.SharingVGPU)),
	mechanism("clock-power", applyClockPower,
		knob(gpu.KnobLockedClocks, "mhz", everyMode...), knob(gpu.KnobPowerLimit, "watts", everyMode...)),
	mechanism("pause", valued(applyPause), knob(gpu.KnobPauseDuty, "ratio", gpu.SharingMPS, gpu.SharingTimeSlice, gpu.SharingVGPU)).
		holding(processHold{pids: pausedPIDs, releases: thaws}),
	mechanism[gpu.PlacementActuator]("placement", nil, knob(gpu.KnobPlacement, "").ofProcess()),
	mechanism[gpu.MIGActuator]("mig", nil, knob(gpu.KnobMIGLayout, "", gpu.SharingMIG)),
	mechanism[gpu.Rebalancer]("rebalance", nil, knob(gpu.KnobPlacement, "").ofProcess(), knob(gpu.KnobMIGLayout, "", gpu.SharingMIG)),
	mechanism[gpu.MIGDrainActuator]("mig-drain", nil),
	mechanism[gpu.TenantLifecycleActuator]("lifecycle", nil),
}

// applyMPS sets an MPS client's fraction and, with a.Restart, restarts the
// client (naming the action's tenant, for the restart hook) so that it
// takes effect; when the restart fails, the previous
// fraction is set back, so that the new one does not wait for a later
// restart. A host without client restarts leaves a restore's original
// pending (errRestartPending); a change there is refused untried (withheld).
func applyMPS(ctx context.Context, mps gpu.MPSActuator, a Action, f Fraction) error {
	if err := mps.SetMPSActiveThreads(ctx, a.GPU, a.PID, float64(f)); err != nil {
		return err
	}
	if !a.Restart {
		return nil
	}
	if err := mps.RestartClient(ctx, a.GPU, a.PID, a.Tenant); err != nil {
		if errors.Is(err, gpu.ErrNotSupported) {
			return errRestartPending
		}
		if c, ok := a.Current.(Fraction); ok {
			if rerr := mps.SetMPSActiveThreads(ctx, a.GPU, a.PID, float64(c)); rerr != nil {
				return fmt.Errorf("%w: %w; setting back %v: %v", errRestartTried, err, c, rerr)
			}
		}
		return fmt.Errorf("%w: %w", errRestartTried, err)
	}
	return nil
}

// applyClockPower locks a GPU's SM clocks or sets its power limit.
func applyClockPower(ctx context.Context, cp gpu.ClockPowerActuator, a Action) error {
	switch v := a.Want.(type) {
	case ClockRange:
		return cp.LockClocks(ctx, a.GPU, gpu.ClockLock(v))
	case Watts:
		return cp.SetPowerLimit(ctx, a.GPU, float64(v))
	}
	return fmt.Errorf("tuner: %s takes a clock range or watts, not %T", a.Knob, a.Want)
}

// applyPause sets a tenant's pause duty on all its processes (a restore:
// those the journal names, else the target's PID, whose group, cgroup or
// process group, the actuator resolves and thaws).
func applyPause(ctx context.Context, p gpu.PauseActuator, a Action, d Duty) error {
	return p.SetPauseDuty(ctx, a.GPU, a.Tenant, pausedPIDs(a), float64(d))
}

// thaws says whether a pause action lets its processes go: a duty of 0
// (a value of another kind, which the actuator refuses, sets none). A
// negative duty, refused too (Bounds, the actuators), is not a thaw.
func thaws(a Action) bool {
	d, _ := a.Want.(Duty)
	return d == 0
}

// pausedPIDs are the processes a pause action names: its PIDs, else its
// target's.
func pausedPIDs(a Action) []uint32 {
	if len(a.PIDs) == 0 && a.PID != 0 {
		return []uint32{a.PID}
	}
	return a.PIDs
}

// errRestartPending: an MPS fraction was set and the host cannot restart
// the client, so it waits for the client's next context.
var errRestartPending = errors.New("MPS fraction pending: the host has no client restart")

// pendingRestart takes err, the outcome of a's call: where it says the
// MPS fraction was set and the host cannot restart the client
// (errRestartPending), the call took, and the fraction waits for the
// client's next context: a without its restart, d's reason saying so,
// and no error. A change is applied so (settle), a restore restored
// (settleRestore). Any other outcome is returned as it is.
func pendingRestart(a Action, d Decision, err error) (Action, Decision, error) {
	if !errors.Is(err, errRestartPending) {
		return a, d, err
	}
	a.Restart = false
	d.Reason = joinReasons(d.Reason, whyPending)
	return a, d, nil
}

// whyPending is what the reason of an MPS fraction set on a host without
// client restarts says after the action's own.
const whyPending = "no client restart on this host: pending until the client starts a new context"

// canApply reports whether this host has a way to apply the action: a
// rebalancing plan needs a hook, or Placement or MIG, or a relayout the
// tuner carries out itself. A knob's missing actuator is found by apply,
// as not supported.
func (t *Tuner) canApply(a Action) bool {
	if a.Plan == nil {
		return true
	}
	ac := t.o.Actuators
	return has[gpu.Rebalancer](ac) || has[gpu.PlacementActuator](ac) || has[gpu.MIGActuator](ac) || t.selfRelayout(*a.Plan)
}

// selfRelayout reports whether the tuner carries out the plan's MIG
// relayout itself over the next rounds (drain, set, start): the host has
// no hook but its backends drain instances and restart processes.
func (t *Tuner) selfRelayout(p gpu.Plan) bool {
	ac := t.o.Actuators
	return len(p.MIG) > 0 && !has[gpu.Rebalancer](ac) && has[gpu.MIGActuator](ac) && has[gpu.MIGDrainActuator](ac) && has[gpu.TenantLifecycleActuator](ac)
}

// applyPlan hands a rebalancing plan to the host's hook or, without one,
// applies it step by step: each move through Placement (by its PIDs), then each
// MIG layout through MIG, stopping at the first step that fails; with
// moves made before it, the error is a *gpu.PartialError naming them, a
// move some of whose processes moved among them. A dry run changes
// nothing.
func applyPlan(ctx context.Context, ac Actuators, plan gpu.Plan) error {
	if hook, ok := actuator[gpu.Rebalancer](ac); ok {
		return hook.Rebalance(ctx, plan)
	}
	if plan.DryRun {
		return nil
	}
	made := func(n int, err error) error { // (the first n moves made)
		if n == 0 {
			return err
		}
		applied := make([]int, n)
		for i := range applied {
			applied[i] = i
		}
		return &gpu.PartialError{Applied: applied, Err: err}
	}
	for i, m := range plan.Moves {
		pl, ok := actuator[gpu.PlacementActuator](ac)
		if !ok || m.PID == 0 || m.ToUUID == "" {
			return made(i, fmt.Errorf("move of %s (PID %d) to %q: %w", m.Tenant, m.PID, m.ToUUID, notSupported(gpu.KnobPlacement)))
		}
		pids := m.Processes()
		for j, pid := range pids {
			if err := pl.MoveProcess(ctx, pid, m.ToUUID); err != nil {
				if j > 0 { // the workload moved in part: a move made, for the hold
					return made(i+1, fmt.Errorf("move of %s (PID %d) to %s, %d of its %d processes moved: %w", m.Tenant, pid, m.ToUUID, j, len(pids), err))
				}
				return made(i, fmt.Errorf("move of %s (PID %d) to %s: %w", m.Tenant, pid, m.ToUUID, err))
			}
		}
	}
	for _, l := range plan.MIG {
		if err := setLayout(ctx, ac, l.UUID, l.Profiles); err != nil {
			return made(len(plan.Moves), fmt.Errorf("MIG layout of %s: %w", l.UUID, err))
		}
	}
	return nil
}

func valueText(v Value) string {
	if v == nil {
		return ""
	}
	return v.String()
}

// tooManyProcesses is the error of a record that names more processes
// than one record holds (maxJournalPIDs): the change it journals is not
// made, and the error names the tenant, how many and the bound.
func tooManyProcesses(rec Record) error {
	n := pidsNamed(rec)
	if n <= maxJournalPIDs {
		return nil
	}
	return fmt.Errorf("tenant %q has %d processes on %s, more than the %d one tuner journal record holds: not journaled, so not changed", rec.Tenant, n, rec.Target.GPU, maxJournalPIDs)
}

// journal appends rec when a journal is configured. A write failure is
// counted and logged (once until a write succeeds again) and returned:
// while the journal cannot be written the tuner does not act (execute),
// and the originals stay in memory; a restored record is kept, written
// once the journal can be written again (unwritten.go).
func (t *Tuner) journal(rec Record) error {
	if t.o.Journal == nil {
		return nil
	}
	if err := tooManyProcesses(rec); err != nil {
		return err // (the journal is not at fault: it goes on being written)
	}
	err := t.o.Journal.Append(rec)
	t.keepUnwritten(rec, err) // (before noteJournal, which writes those kept once a write succeeds)
	t.noteJournal(err)
	if r := t.o.Journal.takeRelinked(); r.Replaced {
		t.relinked(r) // (what it kept adopted before another change)
	}
	return err
}
