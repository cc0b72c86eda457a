package tuner

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A restore at start may be deferred to a later round: to a restarted MPS
// client's successor (an earlier run restarted the client and its
// successor came after this start: findSuccessors), made by the round
// that finds the successor; and to an MPS client the start's first
// snapshot does not list (a sample may miss a running client) and the
// procfs does not tell gone (unlistedGone), journaled with its identity
// (tellsClient: one without is closed as gone at once), made by
// the first round whose snapshot lists it, with the identity check of
// every restore (clientGone), and closed as gone where none has for
// GoneAfter of sample times since a snapshot read its GPU (countAbsence),
// as forgetGone takes any process gone (awaitsListing), also where the
// procfs shows its client running: one that left the GPU and runs on
// would otherwise be waited for for good, every exit failing its restore. Such a restore
// waits in restoreWaits; an exit before
// it is made leaves the unlisted client's original open for the next
// start (restoreAction), rather than close it with a cap the client may
// still run under.
//
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

// restoreDeferred sets back, with why, the original k deferred to a
// round: of a successor found, or of a client a snapshot lists at last;
// in the round, or off it where its restart runs a hook (started now, or
// at a later round while inFlight holds it). It returns the decision of a
// restore made or given up in the round.
func (t *Tuner) restoreDeferred(ctx context.Context, k, why string, now time.Time) (*Decision, error) {
	delete(t.restoreWaits, k)
	o, held := t.originals[k]
	switch {
	case !held || t.outOfEnforce(o.Target.GPU):
		return nil, nil // (set back already, or its GPU no more in enforce: the exit and the next start see to it)
	case !t.enforcedOn(o.Target.GPU):
		t.deferRestore(k, why) // (its GPU not in the readings, its mode by index not told: waits on)
		return nil, nil
	}
	if t.awaitsListing(k) {
		if gone := t.unlistedGone(o); gone != "" {
			t.closeGoneClient(k, gone, now) // (not listed, and /proc tells it gone)
			return nil, nil
		}
		t.deferRestore(k, why) // (not listed yet: a later round's snapshot may)
		return nil, nil
	}
	a, d, left, skip := t.restoreAction(k, now, why)
	switch {
	case skip:
		return nil, nil
	case t.frozenPause(o) != "":
		// its tenant's pause still open (its thaw failed): a client
		// restarted while its processes may be frozen leaves the hook
		// waiting on them; it waits for the thaw, as at exit and start
		t.deferRestore(k, why)
		return nil, nil
	case left != nil || !t.hooked(a):
		return t.restoreApply(ctx, k, a, d, left, false, nil, now)
	case t.inFlight(a):
		t.deferRestore(k, why)
		return nil, nil
	}
	t.runHook(&hookCall{a: a, d: d, hadOriginal: true, restore: &o}, now)
	return nil, nil
}

// deferRestore leaves the restore of the original k, with why, to a later
// round (restoreWaits).
func (t *Tuner) deferRestore(k, why string) {
	if t.restoreWaits == nil {
		t.restoreWaits = map[string]string{}
	}
	t.restoreWaits[k] = why
}

// awaitsListing reports whether the MPS original k is one this run took
// from the journal whose process no snapshot has listed on its GPU since
// (forgetGone marks one listed as seen), and the latest snapshot tells
// nothing of it: it does not read the GPU, or does not list the PID, the
// snapshots that read the GPU having missed it for less than GoneAfter in
// all (procSeen.absent, counted by countAbsence; a sample may miss a
// running client), told by the snapshots' sample times, not the rounds'
// clock (a sampler that stalls repeats one sample, which tells nothing
// new). Past that, the process is gone from its GPU.
func (t *Tuner) awaitsListing(k string) bool {
	p, ok := t.procs[k]
	o := t.originals[k]
	if !ok || p.observed || p.tg.Knob != gpu.KnobMPSActiveThreads || !t.tellsClient(o) {
		return false
	}
	present, known := t.processPresent(p.tg)
	switch {
	case !known:
		return true
	case present:
		return false
	}
	return p.absent < GoneAfter // (known: a snapshot read the GPU, and noteRecent counted it)
}

// waitsForListing reports whether the restore of the MPS original k waits
// in restoreWaits for a snapshot to list its client (awaitsListing): one
// whose restore was given up (a failed restore) waits for none.
func (t *Tuner) waitsForListing(k string) bool {
	_, waits := t.restoreWaits[k]
	return waits && !t.originals[k].RestoreFailed && t.awaitsListing(k)
}

// tellsClient reports whether the MPS original o names its client (the
// boot ID and start time journaled with it) and the MPS actuator reads
// processes' identities (mpsidentity.go): only such an original is left
// to the rounds while no snapshot lists its PID (awaitsListing), its
// client told from a later process of the PID when one does. One without
// (an earlier version's journal, an actuator that cannot read the procfs)
// is closed as gone at once, as before: a later snapshot listing its PID
// could list another tenant's process, which a restart by PID would
// restart.
func (t *Tuner) tellsClient(o Original) bool {
	_, ok := t.clientStarter()
	return ok && o.Boot != "" && len(o.Starts) == 1
}

// unlistedGone says why the PID of the MPS original o, which the latest
// snapshot reads the GPU of and does not list, no longer names the client
// journaled with it, where the procfs tells: another boot; no process, or
// another start time, under a procfs root that shows the GPU's processes
// (rootBlind). "" where it still names that client or cannot be told (no
// identity, unreadable, a root blind to the GPU's processes), or the
// snapshot lists the PID or does not read its GPU.
func (t *Tuner) unlistedGone(o Original) string {
	if present, known := t.processPresent(o.Target); present || !known || !t.tellsClient(o) {
		return ""
	}
	boot, start, ok, err := t.clientStart(o.Target.PID)
	switch {
	case err != nil || !ok:
		return ""
	case boot != o.Boot:
		return "journaled before the host's last boot"
	case start != o.Starts[0] && !t.rootBlind(o.Target, start == 0):
		return "another process holds it now, or none"
	}
	return ""
}

// awaitListing defers the start's restore of the MPS original k, whose
// process the first snapshot does not list (or whose GPU it does not
// read), to the rounds, and says so.
func (t *Tuner) awaitListing(k, why string) {
	t.deferRestore(k, why)
	o := t.originals[k]
	level.Info(t.o.Logger).Log("msg", "the first snapshot does not list the MPS client whose cap an earlier run changed, or does not read its GPU (a sample may miss a running client): its cap is set back, the client restarted, once a snapshot lists it, and its original closed as gone if none does within "+GoneAfter.String()+" of samples reading its GPU while the procfs does not show the client running",
		"target", o.Target.String(), "tenant", o.Tenant, "pid", o.Target.PID)
}

// retryRestores makes (or starts) the restores deferred to a round
// (restoreWaits), oldest target first; those still held wait on.
func (t *Tuner) retryRestores(ctx context.Context, now time.Time) ([]Decision, []error) {
	var out []Decision
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.restoreWaits)) {
		d, err := t.restoreDeferred(ctx, k, t.restoreWaits[k], now)
		if d != nil {
			out = append(out, *d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errs
}

// A restore made in a round (of a client a snapshot lists at last, of a
// successor found, or the start's own in the first round) works from the
// same snapshot as the round's policies, which still see the target as it
// was before: a client the restore has just restarted would be restarted
// again by a policy's change of its cap in the same round, decided from
// its cap before the restore. So a target set back by a restore (or
// tried) gets no action of a round's until a snapshot sampled after the
// restore: the executor passes over it, as over one a restore's hook
// still runs on (holder), in that round and in those after it that get
// a sample from before (--sample.interval longer than --tuner.interval),
// and the first round with a later sample decides on it.

// noteRestoredNow marks the target k as set back by a restore now.
func (t *Tuner) noteRestoredNow(k string, now time.Time) {
	if t.restoredNow == nil {
		t.restoredNow = map[string]time.Time{}
	}
	t.restoredNow[k] = now
}

// endRestoreHolds ends the holds of the targets set back by a restore
// before snap was sampled (noteRestoredNow); a snapshot without a sample
// time ends every one.
func (t *Tuner) endRestoreHolds(snap *tenant.Snapshot) {
	maps.DeleteFunc(t.restoredNow, func(_ string, at time.Time) bool {
		return snap != nil && (snap.Time.IsZero() || snap.Time.After(at))
	})
}

// heldByRestore reports whether a's target was set back (or tried) by a
// restore after the round's snapshot was sampled (noteRestoredNow), which
// a, decided from that snapshot, is not made beside: a
// revert due keeps its judgement for a later round, another action is
// logged at debug.
func (t *Tuner) heldByRestore(a Action) bool {
	if _, held := t.restoredNow[a.Target.String()]; !held {
		return false
	}
	if !t.keepJudgement(a) {
		level.Debug(t.o.Logger).Log("msg", "tuner change of a target a restore set back after this round's snapshot was sampled; not made this round, decided again from a snapshot sampled after the restore",
			"gpu", a.GPU, "knob", a.Knob, "tenant", a.Tenant, "pid", a.PID, "to", a.Want)
	}
	return true
}
