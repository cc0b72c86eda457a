package tuner

import (
	"fmt"
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
// sets it back), the failure counted and said once, and this run makes
// the restore no more (kept): not in the rounds, nor at exit, which
// leaves it open with a warning, no failure counted again.

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
	if len(t.pending) == 0 || snap.Readings == nil {
		return
	}
	for i := range snap.Readings.Devices {
		d := &snap.Readings.Devices[i]
		for _, p := range d.Processes {
			k := Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: p.PID}.String()
			if f, ok := t.pending[k]; ok && p.MPSActiveThreads != nil && Fraction(*p.MPSActiveThreads).Distance(f) < 1e-6 {
				delete(t.pending, k)
				delete(t.restoredPending, k)
			} else if ok && p.MPSActiveThreads != nil {
				t.pendingContradicted(k, Fraction(*p.MPSActiveThreads), snap.Time)
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
		delete(t.restoredPending, k) // (a change since holds its own)
		return
	}
	if rp.first.IsZero() {
		rp.first = at
		t.restoredPending[k] = rp
	}
	if at.Sub(rp.first) < pendingContradictedAfter {
		return
	}
	delete(t.restoredPending, k)
	delete(t.pending, k)
	o := rp.o
	o.At, o.RestoreFailed = at, true
	o.kept = fmt.Sprintf("readings keep showing %s since its restore to %s, which this host could not pass on (no client restart): the client keeps %s until it is restarted by hand or a restart hook is configured (--mps.restart-hook)", read, o.Value, read)
	if _, held := t.originals[k]; held {
		return // (a change since journaled its own)
	}
	t.originals[k] = o
	t.trackProc(o.Target, at)
	if err := t.journal(originalRecord(o)); err == nil {
		t.journal(restoreRecord(EventRestoreFailed, o, at, o.kept))
	}
	t.counts.RestoreFailures++
	level.Warn(t.o.Logger).Log("msg", "tuner restore of an MPS client's cap, settled pending on a host without client restarts, did not take: its original is open again, and not set back by this run", "target", k, "tenant", o.Tenant, "value", valueText(o.Value), "why", o.kept)
}

// leaveKept says, at exit, that the original o, whose restore this run
// makes no more (kept), is left open for the next start.
func (t *Tuner) leaveKept(o Original) {
	level.Warn(t.o.Logger).Log("msg", "tuner leaves open the original of an MPS client whose cap it could not set back on this host: the next start tries again", "target", o.Target.String(), "tenant", o.Tenant, "value", valueText(o.Value), "why", o.kept)
}
