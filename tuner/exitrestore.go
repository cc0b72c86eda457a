package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// ExitRestores says what the exit does with the settings the tuner (or an
// earlier run, per the journal) changed and has not restored, in five
// disjoint counts: the restore at exit acts only on a GPU in enforce mode,
// but for a pause, thawed in any mode (restoreLocked).
type ExitRestores struct {
	// AtExit are set back at exit.
	AtExit int
	// WaitingForListing are MPS originals the start left to the rounds
	// whose client no snapshot has listed yet (waitsForListing): restored
	// by the first round that lists it, closed as gone if none does; an
	// exit before either leaves them open, failed restores, for the next
	// start.
	WaitingForListing int
	// ThawPending are pauses an earlier run left whose thaw failed at
	// start: tried again at every round (thawretry.go), and at exit.
	ThawPending int
	// Failed would be set back at exit too, but this run's latest restore
	// (or thaw) of each failed (a GPU gone, an actuator error): the exit
	// tries again, and what still fails stays open for the next start.
	Failed int
	// KeptOpen are left as they are at exit (their GPU is not in enforce
	// mode): the journal keeps their originals for a later start with it in
	// enforce mode.
	KeptOpen int
}

// exitRestores counts the open originals by what the exit would do with
// them now.
func (t *Tuner) exitRestores() ExitRestores {
	var e ExitRestores
	for k, o := range t.originals {
		switch {
		case o.Target.Knob != gpu.KnobPauseDuty && !t.enforcedOn(o.Target.GPU):
			e.KeptOpen++
		case t.waitsForListing(k):
			e.WaitingForListing++
		case t.leftThaw(k, o):
			e.ThawPending++
		case o.RestoreFailed:
			e.Failed++
		default:
			e.AtExit++
		}
	}
	return e
}

// noteRestoreFailed marks the original k as one whose restore failed, until
// a restore of it takes (dropOriginal).
func (t *Tuner) noteRestoreFailed(k string) {
	if o, ok := t.originals[k]; ok {
		o.RestoreFailed = true
		t.originals[k] = o
	}
}

// The hooks still running at exit (hooks.go). A restore's (a successor's,
// restorehook.go) or a change's back to the original (a revert, a policy's
// change back) is what the exit
// would do: cancelled, it would be settled as failed and made again at
// once, the client restarted a second time, a restore failure counted,
// journaled and logged. So the exit cancels the others first (what they
// changed is set back with the rest: cancelHooks), sets back every
// original no call still running holds (the lost GPUs last), and only
// then waits for those restores and changes back, with what is left of
// its share of the restore's deadline (awaitHooks): one ended is settled, the original it
// set back closed as restored; one still running at the deadline is cut
// then and left, with the originals it holds, for the next start. (Waited
// for first, one slow hook, up to its own timeout, would use the whole
// deadline and leave every other GPU's original as the tuner set it.)

// awaitedAtExit reports whether the exit's restore waits for the call h
// rather than cancel it: a restore, or a change whose value is its
// target's original, a revert or a policy's change back (setBack's rule;
// a plan aside, and the kill switch's cut ones).
func (t *Tuner) awaitedAtExit(h *hookCall) bool {
	if h.cut != "" {
		return false
	}
	if h.restore != nil {
		return true
	}
	o, ok := t.originals[h.a.Target.String()]
	return h.a.Plan == nil && ok && t.setsBackHeld(h.a, o)
}

// setsBack reports whether a's value is the original o's.
func setsBack(a Action, o Original) bool {
	return a.Want != nil && o.Value != nil && a.Want.Kind() == o.Value.Kind() && a.Want.Distance(o.Value) < 1e-9
}

// setsBackHeld is setsBack for a change of the original o's setting, an
// MPS client's cap compared as the MPS actuator holds it (State.MPSHeld),
// the change's and the original's alike: under a server at 50%, a cap
// given back as 0.8 runs as the uncapped client's original, 1, does, and
// sets it back (kept open, the exit would restart the client a second
// time for nothing). The server's value is the one last read, however
// old (MPSCachedResolver): it is asked under the tuner's lock, at exit too,
// where a read of it again (a daemon command, under no caller's context)
// would hold the exit past the restore's deadline.
func (t *Tuner) setsBackHeld(a Action, o Original) bool {
	w, wok := a.Want.(Fraction)
	v, vok := o.Value.(Fraction)
	if o.Target.Knob == gpu.KnobMPSActiveThreads && wok && vok {
		st := &State{}
		if c, ok := t.o.MPSStates.(MPSCachedResolver); ok {
			st.MPSResolver = cachedResolver{c} // (never the resolver that reads the server again)
		}
		a.Want, o.Value = st.MPSHeld(o.Target, w), st.MPSHeld(o.Target, v)
	}
	return setsBack(a, o)
}

// cachedResolver is an MPSCachedResolver as the MPSResolver that calls
// nothing.
type cachedResolver struct{ c MPSCachedResolver }

func (r cachedResolver) HeldFraction(uuid string, pid uint32, f float64) float64 {
	return r.c.CachedHeldFraction(uuid, pid, f)
}

// cancelHooks cancels the calls still running that the exit does not wait
// for (awaitedAtExit), waits for them (until ctx is done) and settles
// those that ended, and those that had ended before.
func (t *Tuner) cancelHooks(ctx context.Context, now time.Time) []Decision {
	var cancelled []*hookCall
	for _, h := range t.hooksByAge() {
		if !t.awaitedAtExit(h) {
			h.cancel()
			h.cancelledAtExit = true
			cancelled = append(cancelled, h)
		}
	}
	for _, h := range cancelled {
		select {
		case <-h.done:
		case <-ctx.Done():
		}
	}
	// (a restore settled as failed stays open: the restore at exit sets
	// it back again, and its outcome is the one that counts)
	out, _ := t.collectHooks(ctx, now)
	return out
}

// whileAwaited is ctx, ended at hooks' end too where a call the exit
// waits for (one cancelHooks did not cancel) is still running then: the
// originals no call holds are set back beside those calls until hooks'
// end, leaving the rest of ctx to what they held (awaitHooks, then the
// held pass), and with none of them running until ctx's end. stop ends
// its watch.
func (t *Tuner) whileAwaited(hooks, ctx context.Context) (_ context.Context, stop func()) {
	var awaited []*hookCall
	for _, h := range t.hooksByAge() {
		if !h.cancelledAtExit {
			awaited = append(awaited, h)
		}
	}
	if len(awaited) == 0 {
		return ctx, func() {}
	}
	first, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-first.Done():
			return
		case <-hooks.Done():
		}
		for _, h := range awaited {
			if !h.returned() {
				cancel() // (one still running: the hooks' share is over)
				return
			}
		}
	}()
	return first, cancel
}

// heldAtExit are the originals a call still running holds: its own
// target's, and those whose restore waits for it (inFlight: an MPS
// client's restart of its tenant). The restore sets them back after the
// calls' end, not beside them.
func (t *Tuner) heldAtExit() map[string]bool {
	held := map[string]bool{}
	for k, o := range t.originals {
		if t.holder(restoreWait(o)) != nil {
			held[k] = true
		}
	}
	return held
}

// restoreWait is the action of the restore of o as inFlight weighs it.
func restoreWait(o Original) Action {
	return Action{Target: o.Target, Tenant: o.Tenant, Want: o.Value, Revert: true, Restart: o.Target.Knob == gpu.KnobMPSActiveThreads}
}

// awaitHooks waits for the calls still running, until ctx is done, and
// settles each one that ended: a change (a revert, a policy's change
// back) that set its target's original back closes it as restored (its original is not set back again). Past
// ctx's end, it cuts those still running and returns an error naming
// each, and each original it holds, left for the next start (a second
// call beside the running one, a client restarted twice at once, could
// end before it and be undone by it).
func (t *Tuner) awaitHooks(ctx context.Context) ([]Decision, error) {
	if len(t.hooks) == 0 {
		return nil, nil
	}
	waited := t.hooksByAge()
	level.Info(t.o.Logger).Log("msg", "tuner exit: waiting for the hooks still running (restores, and reverts or changes back setting back an original) until four fifths of what is left of the restore's deadline (--tuner.restore-timeout); past it they are cut and left for the next start", "hooks", len(waited))
	for _, h := range waited {
		select {
		case <-h.done:
		case <-ctx.Done():
		}
	}
	now := t.o.Clock.Now()
	var out []Decision
	for _, h := range waited {
		if !h.returned() {
			continue
		}
		o, back := t.originals[h.a.Target.String()]
		back = back && h.restore == nil && t.awaitedAtExit(h)
		h.atExit = back
		ds, applied, _ := t.settleHook(ctx, h, now)
		out = append(out, ds...)
		if back && applied {
			out = append(out, t.restoredByHook(ctx, h, o, now)...)
		}
	}
	if t.hookStop != nil {
		t.hookStop()                     // (past the deadline, those still running are cut; the node lock waits for their end: hookLive.ended)
		t.hookCtx, t.hookStop = nil, nil // a later hook gets a new parent
	}
	var errs []error
	for _, h := range t.hooksByAge() {
		what := "did not end within the restore's deadline and was cut then"
		if h.cancelledAtExit {
			what = "was cancelled at the start of the exit's restore (it sets back no original) and had not ended by the restore's deadline"
		}
		errs = append(errs, fmt.Errorf("%s of %s: its hook, started %v before, %s; left for the next start", h.a.Knob, h.a.Target, now.Sub(h.started).Round(time.Second), what))
		for _, k := range slices.Sorted(maps.Keys(t.originals)) {
			if o := t.originals[k]; k != h.a.Target.String() && t.holder(restoreWait(o)) == h {
				errs = append(errs, fmt.Errorf("%s: its restore waits for that hook (%s of %s); left for the next start", k, h.a.Knob, h.a.Target))
			}
		}
	}
	return out, errors.Join(errs...)
}

// allClosed is closed once every channel of chs is.
func allClosed(chs []chan struct{}) <-chan struct{} {
	ended := make(chan struct{})
	go func() {
		for _, c := range chs {
			<-c
		}
		close(ended)
	}()
	return ended
}

// restoredByHook closes, as restored, the original o that the change h
// (a revert, a policy's change back) set back through its hook, where it is still open: on its target, or on the
// successor the hook named (followSuccessor moved it there).
func (t *Tuner) restoredByHook(ctx context.Context, h *hookCall, o Original, now time.Time) []Decision {
	k := o.Target.String()
	if _, open := t.originals[k]; !open && h.namedOK {
		tg := o.Target
		tg.PID = h.named
		k = tg.String()
	}
	cur, open := t.originals[k]
	if !open || !t.setsBackHeld(h.a, cur) {
		return nil
	}
	a := h.a
	a.Target = cur.Target
	to, held := t.heldText(h.a, cur)
	d := Decision{Time: now, GPU: cur.Target.GPU, Tenant: cur.Tenant, Knob: cur.Target.Knob, From: h.d.From, To: to,
		Reason: joinReasons("restored at exit: set back by the tuner's change to it (a revert or a policy's change back), whose hook ran at exit and ended within the restore's deadline", held)}
	rd, _ := t.restoreSettled(ctx, cur, a, d, nil, false, now)
	return []Decision{*rd}
}

// heldText is the value the change a, which sets the original o back as
// the MPS controller holds them (setsBackHeld), puts in force, as a
// decision's to says it, and, where that is not o's value itself, what
// the reason adds to say why: the client's server's cap, where it holds
// the client below the change's own value at the whole percentage sent
// (a cap given back as 80% under a server at 50%: the client runs at
// 50%, as its uncapped original does), else the whole percentage itself
// (an original of 12.5% given back runs at 13%, as the exit's restore of
// it would); "" where they are the same.
func (t *Tuner) heldText(a Action, o Original) (to, held string) {
	w, wok := a.Want.(Fraction)
	if o.Target.Knob != gpu.KnobMPSActiveThreads || !wok {
		return valueText(o.Value), ""
	}
	st := &State{}
	if c, ok := t.o.MPSStates.(MPSCachedResolver); ok {
		st.MPSResolver = cachedResolver{c} // (as setsBackHeld asks it)
	}
	runs := st.MPSHeld(o.Target, w)
	switch {
	case setsBack(Action{Want: runs}, o):
		return valueText(o.Value), ""
	case runs < wholePercent(w)-1e-9:
		return runs.String(), fmt.Sprintf("the client runs at %s, as its MPS server's cap holds it, the state of its original %s there; the change asked for %s", runs, valueText(o.Value), a.Want)
	}
	return runs.String(), fmt.Sprintf("the client runs at %s: the MPS control daemon is sent a whole percentage, the change's %s as %s, as a restore of its original %s would be", runs, a.Want, runs, valueText(o.Value))
}

// wholePercent is f as the MPS controller sends it to the control
// daemon (gpu.MPSPercent).
func wholePercent(f Fraction) Fraction {
	return Fraction(float64(gpu.MPSPercent(float64(f))) / 100)
}
