package tuner

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// An MPS cap set back on a host that cannot restart its client is
// restored pending (settleRestore): the set-back call took, and the
// client gets its original with its next context. A client whose running
// context keeps the cap (one an earlier run's restart hook started with
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, the hook since removed) reads so for
// its lifetime: the daemon is sent nothing for it. Where the readings
// since the restore keep saying so for pendingContradictedAfter, the
// restore was not made: the pending value is dropped (the policies read
// the client as it is, not at the original for good), the original is
// opened again, in the journal too (the next start, perhaps with a hook,
// sets it back), the failure counted and said once (the restore counted
// failed alone: countPending), its decision marked reopened, and this run
// makes the restore no more (kept): not in the rounds, nor at exit, which
// leaves it open with a warning and an error (the exit status non-zero),
// no failure counted again; a reading of the client at the original (a
// new context) closes it as restored (syncKept).

// pendingContradictedAfter is how long the readings of a client after a
// restore settled pending may contradict it before it is taken as not
// made.
const pendingContradictedAfter = GoneAfter

// restoredPending is an MPS restore settled pending: the original it set
// back, when, and when a reading first contradicted it (zero: none yet).
type restoredPending struct {
	o         Original
	at, first time.Time
}

// syncPending drops pending MPS values that the snapshot shows effective,
// and those of restores its readings keep contradicting.
func (t *Tuner) syncPending(snap *tenant.Snapshot) {
	if len(t.pending) == 0 {
		return
	}
	for k, read := range mpsReadings(snap) {
		if f, ok := t.pending[k]; ok && read.Distance(f) < 1e-6 {
			delete(t.pending, k)
			t.countPending(k)
		} else if ok {
			t.pendingContradicted(k, read, snap.Time)
		}
	}
}

// mpsReadings yields, for each process of snap whose active-thread
// fraction is read, the key of its MPS cap's target and that reading.
func mpsReadings(snap *tenant.Snapshot) iter.Seq2[string, Fraction] {
	return func(yield func(string, Fraction) bool) {
		if snap == nil || snap.Readings == nil {
			return
		}
		for i := range snap.Readings.Devices {
			d := &snap.Readings.Devices[i]
			for _, p := range d.Processes {
				if p.MPSActiveThreads == nil {
					continue
				}
				if !yield(Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: p.PID}.String(), Fraction(*p.MPSActiveThreads)) {
					return
				}
			}
		}
	}
}

// notePendingRestore notes the restore of the MPS original o settled
// pending now, till a reading confirms it (syncPending) or readings keep
// contradicting it (pendingContradicted).
func (t *Tuner) notePendingRestore(o Original, now time.Time) {
	if t.restoredPending == nil {
		t.restoredPending = map[string]restoredPending{}
	}
	t.restoredPending[o.Target.String()] = restoredPending{o: o, at: now}
}

// pendingContradicted takes read, a reading taken at at of the client k
// whose pending value it contradicts: where that is a restore's
// (notePendingRestore) and the readings since the restore have
// contradicted it for pendingContradictedAfter, the restore is taken as
// not made.
func (t *Tuner) pendingContradicted(k string, read Fraction, at time.Time) {
	rp, ok := t.restoredPending[k]
	if !ok || !at.After(rp.at) {
		return // (a reading taken as the call ran reads the value before it)
	}
	if f, pending := t.pending[k]; !pending || rp.o.Value == nil || f.Distance(rp.o.Value) > 1e-6 {
		t.countPending(k) // (a change since holds its own)
		return
	}
	if rp.first.IsZero() {
		rp.first = at
		t.restoredPending[k] = rp
	}
	if at.Sub(rp.first) < pendingContradictedAfter {
		return
	}
	delete(t.pending, k)
	o := rp.o
	o.At, o.RestoreFailed = at, true
	o.kept = fmt.Sprintf("readings keep showing %s since its restore to %s, which this host could not pass on (no client restart): the client keeps %s until it is restarted by hand, a restart hook is configured (--mps.restart-hook), or it reads its original (a new context)", read, o.Value, read)
	if _, held := t.originals[k]; held {
		t.countPending(k) // (a change since journaled its own)
		return
	}
	delete(t.restoredPending, k)
	t.reopenDecision(rp, o.kept)
	t.originals[k] = o
	t.trackProc(o.Target, at)
	if err := t.journal(originalRecord(o)); err == nil {
		t.journal(restoreRecord(EventRestoreFailed, o, at, o.kept))
	}
	t.counts.RestoreFailures++
	level.Warn(t.o.Logger).Log("msg", "tuner restore of an MPS client's cap, settled pending on a host without client restarts, did not take: its original is open again, and not set back by this run", "target", k, "tenant", o.Tenant, "value", valueText(o.Value), "why", o.kept)
}

// countPending counts the restore settled pending of the client k
// (notePendingRestore), once, as made: a reading confirmed it, a change
// since holds its own, or the exit came first (countPendingAtExit). One
// the readings contradict is counted failed instead (pendingContradicted):
// counted when settled, it would be counted both ways, and a counter
// cannot take the restore back.
func (t *Tuner) countPending(k string) {
	if _, ok := t.restoredPending[k]; ok {
		delete(t.restoredPending, k)
		t.counts.Restores++
	}
}

// countPendingAtExit counts, at exit, the restores settled pending that
// no reading has confirmed or contradicted yet, as made.
func (t *Tuner) countPendingAtExit() {
	for k := range t.restoredPending {
		t.countPending(k)
	}
}

// reopenDecision marks the decision of the restore rp, in those /tuner
// lists, as failed: reopened, why.
func (t *Tuner) reopenDecision(rp restoredPending, why string) {
	o := rp.o
	for i := len(t.recent) - 1; i >= 0; i-- {
		d := &t.recent[i]
		if d.Outcome == OutcomeRestored && d.GPU == o.Target.GPU && d.Knob == o.Target.Knob && d.Tenant == o.Tenant && !d.Time.After(rp.at) {
			d.Outcome, d.Applied = OutcomeFailed, false
			d.Reason = joinReasons(d.Reason, "reopened: "+why)
			return
		}
	}
}

// syncKept closes the original of each client whose restore this run
// makes no more (kept: pendingContradicted) that a reading of snap shows
// at its original (a new context the client started): restored.
func (t *Tuner) syncKept(snap *tenant.Snapshot) {
	for k, read := range mpsReadings(snap) {
		o, held := t.originals[k]
		f, ok := o.Value.(Fraction)
		if !held || o.kept == "" || !ok || read.Distance(f) >= 1e-6 {
			continue
		}
		why := fmt.Sprintf("the client reads its original %s again (a new context): restored", o.Value)
		t.closeOriginal(k, snap.Time, why)
		level.Info(t.o.Logger).Log("msg", "tuner original of an MPS client, reopened as its restore did not take, is closed: the client reads it again", "target", k, "tenant", o.Tenant, "value", valueText(o.Value))
	}
}

// keptAtExit returns the error the exit reports for the originals whose
// restore this run makes no more (kept), left open for the next start: a
// restore that did not take, so that the exit status says so.
func (t *Tuner) keptAtExit() error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(t.originals)) {
		if o := t.originals[k]; o.kept != "" {
			errs = append(errs, fmt.Errorf("restore %s to %v did not take: %s", o.Target, valueText(o.Value), o.kept))
		}
	}
	return errors.Join(errs...)
}

// leaveKept says, at exit, that the original o, whose restore this run
// makes no more (kept), is left open for the next start.
func (t *Tuner) leaveKept(o Original) {
	level.Warn(t.o.Logger).Log("msg", "tuner leaves open the original of an MPS client whose cap it could not set back on this host: the next start tries again", "target", o.Target.String(), "tenant", o.Tenant, "value", valueText(o.Value), "why", o.kept)
}
