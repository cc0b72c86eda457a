package tuner

import (
	"context"
	"maps"
	"slices"
	"time"
)

// A restore at start deferred to a restarted MPS client's successor (an
// earlier run restarted the client and its successor came after this
// start: findSuccessors) is made by the round that finds the successor.
// On a host whose client restarts run a restart hook, that restore's
// restart runs it as every other hook of the tuner does: off the round
// (hooks.go), so that the round, every GPU's, does not wait for it (up to
// --mps.restart-hook.timeout). It is started once nothing it waits for
// runs (inFlight, as a revert's restart: a hook on its target, another
// restart hook of its tenant or a plan moving it), at a later round where something does
// (restoreWaits), and settled as a restore (restoreSettled: its outcome,
// journal record, counts and log line) at the first round after it ends;
// the dwell holds its knob from its start to then (Started, Ended), and
// the guards learn no outcome of it, as of a restore made in the round.
// A restore that fails stays open, for the restore at exit and the next
// start; the exit's restore waits for one still running once it has set
// back the originals no hook holds, with what is left of its deadline,
// and cuts it past that, left for the next start (exitrestore.go).

// restoreSuccessor sets back, with why, the original k of a successor
// found: in the round, or off it where its restart runs a hook (started
// now, or at a later round while inFlight holds it). It returns the
// decision of a restore made or given up in the round.
func (t *Tuner) restoreSuccessor(ctx context.Context, k, why string, now time.Time) (*Decision, error) {
	delete(t.restoreWaits, k)
	o, held := t.originals[k]
	if !held || !t.enforcedOn(o.Target.GPU) {
		return nil, nil // (set back already, or its GPU no more in enforce: the exit and the next start see to it)
	}
	a, d, left, skip := t.restoreAction(k, now, why)
	switch {
	case skip:
		return nil, nil
	case left != nil || !t.hooked(a):
		return t.restoreApply(ctx, k, a, d, left, false, now)
	case t.inFlight(a):
		if t.restoreWaits == nil {
			t.restoreWaits = map[string]string{}
		}
		t.restoreWaits[k] = why
		return nil, nil
	}
	t.runHook(&hookCall{a: a, d: d, hadOriginal: true, restore: &o}, now)
	return nil, nil
}

// retryRestores starts (or makes) the restores that waited for a hook
// (restoreWaits), oldest target first; those still held wait on.
func (t *Tuner) retryRestores(ctx context.Context, now time.Time) ([]Decision, []error) {
	var out []Decision
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.restoreWaits)) {
		d, err := t.restoreSuccessor(ctx, k, t.restoreWaits[k], now)
		if d != nil {
			out = append(out, *d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errs
}
