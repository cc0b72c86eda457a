package tuner

import (
	"maps"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A pause an earlier run left open in the journal (a crash, a kill -9
// mid-pause, a thaw that failed at its exit) is thawed at start, by the
// start's restore and again by the first round (thawPauses). A thaw that
// fails there (a freezer write refused once: EBUSY, a transient
// permission or I/O error) is tried again at every round of the run, not
// only at exit and at the next start, so that the tenant stays frozen no
// longer than the fault: each try is a decision, journaled (restored
// once it takes, restore_failed until then), counted and logged with the
// tenant, its GPU and the error, and the status counts the pause apart
// (ExitRestores.ThawPending, served as vgpu_tuner_pause_thaws_pending). It is the earlier run's pause only: once
// this run sets a value on its target (the policy pauses the tenant
// again, or gives the pause back), the pause is the policy's own, thawed
// where the policy, or another reason of thawWhy's, says so.
//
// The tenant's MPS caps whose restore at start waited for the thaw
// (frozenPause: a client restarted while its processes may be frozen
// leaves the restart hook waiting on them) are set back once it takes,
// by the same round, as the start would have set them back (restoreWaits,
// restorehook.go): not where this run changed the cap since.

// A pause the policy gives back to 0 (the tenant thawed by a change
// that took) keeps its original open, the tenant's pause target, as every
// pause's is kept; its tenant is thawed all the same, so its failed thaw
// is over (the status no longer counts it failed) and the MPS caps that
// waited for the thaw are set back by the rounds after (thawedByChange),
// a pause whose value in force is 0 holding none (frozenPause).

// whyThawAgain is the reason of a thaw of a pause an earlier run left,
// tried again after its thaw at start failed (leftThaw).
const whyThawAgain = "thawed: a pause an earlier run left, whose thaw at start failed, tried again at every round until it takes"

// leftThaw reports whether the pause original o (key k) is one an earlier
// run left whose thaw this run tried and failed, and on whose target this
// run has set nothing since (the policy's pause, or its thaw, makes it the
// policy's own).
func (t *Tuner) leftThaw(k string, o Original) bool {
	return o.Target.Knob == gpu.KnobPauseDuty && o.RestoreFailed && t.changes[k].To == nil
}

// nextThaw says when a pause whose thaw by a round (thawPauses) failed is
// tried again, as the log says it: a pause an earlier run left at every
// round (leftThaw), one thawed for another reason (the kill switch, the
// GPU's mode, a latency tenant, a tenant moved) at every round while the
// reason holds (thawWhy asks it each round), and both at exit; once the
// exit has begun, at the next start.
func (t *Tuner) nextThaw(k string) string {
	o, ok := t.originals[k]
	switch {
	case t.exiting:
		return "at the next start"
	case ok && t.leftThaw(k, o):
		return "at the next round, and at exit"
	}
	return "at the next round while its reason holds, and at exit"
}

// awaitThaw keeps the MPS original k, whose restore with why is not tried
// while its tenant's pause is open, for the round that thaws the tenant
// (thawedNow), and says when it is tried again, as its reason says it.
func (t *Tuner) awaitThaw(k, why string) string {
	if why != whyRecovered {
		return "at the next start"
	}
	if t.thawWaits == nil {
		t.thawWaits = map[string]string{}
	}
	t.thawWaits[k] = why
	return "by the round that thaws it, at exit otherwise"
}

// thawedNow hands the restores that waited for a thaw (awaitThaw) to the
// round (restoreWaits) once no pause that holds them is open
// (frozenPause); one whose cap this run changed since is left to the
// policy (and to the exit).
func (t *Tuner) thawedNow() {
	for _, k := range slices.Sorted(maps.Keys(t.thawWaits)) {
		o, ok := t.originals[k]
		switch {
		case !ok || t.changes[k].To != nil:
			delete(t.thawWaits, k)
		case t.frozenPause(o) == "":
			t.deferRestore(k, t.thawWaits[k])
			delete(t.thawWaits, k)
		}
	}
}

// thawedByChange clears, after the change a took, the failed thaw of the
// pause original a set to 0 (a thaw) and hands on the restores that
// waited for it (thawedNow), as the thaw of thawPauses does.
func (t *Tuner) thawedByChange(a Action) {
	k := a.Target.String()
	o, ok := t.originals[k]
	if !ok || a.Target.Knob != gpu.KnobPauseDuty || !t.thawedInForce(k) {
		return
	}
	o.RestoreFailed = false
	t.originals[k] = o
	t.thawedNow()
}

// thawedInForce reports whether the pause original k's value in force is
// 0, a change of this run's that took: its tenant is not frozen.
func (t *Tuner) thawedInForce(k string) bool {
	d, ok := t.changes[k].To.(Duty)
	return ok && d <= 0
}
