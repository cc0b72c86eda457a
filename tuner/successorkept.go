package tuner

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// No successor of an MPS client keeps a cap of the tuner's with no
// original anywhere, whatever became of the restart (successor.go): one
// that failed may have started the successor before it did, which is
// looked for as after a restart whose hook named none
// (watchFailedRestart); a successor told whose original the journal does
// not take keeps the search, the follow tried again until it does
// (followTold); and the original of a client restarted less than
// successorWithin ago is not closed as gone (restartedLately), its
// successor perhaps not told yet.

// errRestartTried marks the error of an MPS client's restart that was
// tried and failed (applyMPS): its hook ran, and may have started the
// successor before it failed (restartTried).
var errRestartTried = errors.New("restart client")

// restartTried reports whether err is a client restart's that was tried
// (errRestartTried), not refused as busy before it ran.
func restartTried(err error) bool {
	return errors.Is(err, errRestartTried) && !errors.Is(err, gpu.ErrBusy)
}

// watchFailedRestart looks for the successor of a's client after a
// restart that was tried and failed (err, restartTried), where the
// original is held: a hook that started the successor, with the new cap,
// and then failed (killed at its timeout, a health check that never
// passed, the old client's stop refused) leaves it running with no
// original of its own. The search is the one of a restart whose hook
// named none (a failed hook's output is not read): the one new process
// of the tenant takes the original; where the client runs on under its
// own PID the search ends quietly. It replaces a search of an earlier
// restart (counted from this one), not a successor told whose follow
// waits for the journal. A hook the exit cancelled starts none: the exit
// sets the client back itself, as it did (a search begun then would
// leave the original open, a failed restore, its successor not told
// before the minute has passed). h is as for restartSeen.
func (t *Tuner) watchFailedRestart(a Action, now time.Time, h *hookCall, err error) {
	k := a.Target.String()
	if _, ok := t.successors(a); !ok || a.Tenant == "" || !restartTried(err) || t.exiting {
		return
	}
	if _, held := t.originals[k]; !held {
		return
	}
	if w := t.watches[k]; w != nil && w.to != 0 {
		return
	}
	t.watches[k] = &successorWatch{Restart: t.restartSeen(a, now, h), tg: a.Target, tenant: a.Tenant}
}

// followTold follows w's client (w.tg) to its successor pid, told: named
// by the hook (named; then watched until a snapshot lists it, as
// followSuccessor says), or found. Where the journal cannot take the
// successor's original (followAs: it stays with the old PID), w is kept,
// with pid as its to and the identity read when it was told as its toID,
// and the follow tried again, while pid is still that process (toListed),
// by the rounds (findSuccessors) after followRetryFirst, twice as long
// after each failure up to followRetryMax (followAt), at the first round
// that finds the journal writable again, and at exit (followAtRestore),
// with that identity (one read later could be another process's): closed as
// gone meanwhile, or given up, the original would be lost while the
// successor runs on with the tuner's cap. It reports whether the
// successor was followed.
func (t *Tuner) followTold(w *successorWatch, pid uint32, named bool, now time.Time) bool {
	k := w.tg.String()
	id := w.toID
	if w.to != pid {
		id = t.successorIdentity(pid) // (mpsidentity.go) read once, when told
		w.toSeen = time.Time{}
		if !named && t.last != nil {
			w.toSeen = t.last.Time // (found: listed by the snapshot it was found in)
		}
	}
	if !t.followAs(w.tg, pid, &id, now) {
		w.to, w.toID, w.named = pid, id, named
		t.watches[k] = w
		t.followFailed(k, now)
		return false
	}
	delete(t.watches, k)
	delete(t.followAt, k)
	if !named || w.tenant == "" {
		return true
	}
	tg := w.tg
	tg.PID = pid
	if t.watches[tg.String()] != nil {
		return true // the same PID named again: checked from its first naming
	}
	t.watches[tg.String()] = &successorWatch{Restart: w.Restart, tg: tg, tenant: w.tenant, old: w.tg.PID, oldID: w.oldID}
	return true
}

// retryFollow tries again the follow of w's client to its successor
// told, w.to, that the journal did not take (followTold), once its wait
// (followAt) has passed, or at once where the journal has been written
// (or probed writable) since, where it is still the process told
// (toListed); it reports whether it was followed.
func (t *Tuner) retryFollow(w *successorWatch, now time.Time) bool {
	if !t.toListed(w) {
		return false
	}
	if t.journalBroken && now.Before(t.followAt[w.tg.String()].at) {
		return false
	}
	return t.followTold(w, w.to, w.named, now)
}

// restartedLately reports whether the client of the MPS original k was
// restarted (or its restart tried) less than successorWithin before now,
// as its restarted record says (journalRestart; one an earlier run
// journaled, adopted): its successor may not be told yet, and the
// original is not closed as gone meanwhile (forgetGone, restoreAction),
// whatever else says so: closed, it would be lost, the successor running
// on with the tuner's cap. A record dated after now beyond clockSkew
// tells nothing (its bound cannot be counted: successorOf).
func (t *Tuner) restartedLately(k string, now time.Time) bool {
	o, ok := t.originals[k]
	if !ok || o.Restart == nil {
		return false
	}
	ago := now.Sub(o.Restart.At)
	return ago >= -clockSkew && ago <= successorWithin
}

// toListed reports whether w.to, the successor told whose original the
// journal did not take, is still the process told, as the latest snapshot
// lists it: on the client's GPU, under its tenant. Its PID may be taken by
// another process once it exits, and the follow (later, or at exit) would
// move the original there, and the exit restart that process. A PID the
// snapshot lists under another tenant, or one not listed under the
// client's for GoneAfter of sample time (counted, for a named successor
// not listed yet, from when the bound within which it is told has passed;
// a sampler that stalls, the rounds seeing one snapshot while their clock
// moves on, counts nothing: only newer samples that keep missing it do,
// as for awaitsListing), is given up,
// said at warning level: the original stays with the old PID, closed as
// gone once that is taken for gone (the successor is gone with its cap);
// a snapshot that does not read the GPU, or samples that miss the
// successor (or its tenant) for less, tell nothing yet (false, kept). The identity journaled with a follow is the
// one read when the successor was told (toID): a same tenant's process
// that took the PID is told from it by the restore (clientGone).
func (t *Tuner) toListed(w *successorWatch) bool {
	snap := t.last
	if snap == nil || snap.Readings == nil || !snap.Time.After(w.At) {
		return false
	}
	up, running := runningProcs(snap)
	if !up[w.tg.GPU].holds(procSeen{tg: w.tg}) {
		return false
	}
	key := pidKey{w.tg.GPU, w.to}
	tn := pidTenants(snap)[key]
	switch {
	case running[key] && (w.tenant == "" || tn == w.tenant):
		w.toSeen = snap.Time
		return true
	case running[key] && tn != "":
	default: // (not listed, or not attributed to a tenant: a sample may miss it)
		since := w.toSeen
		if since.IsZero() {
			since = w.At.Add(successorWithin)
		}
		if snap.Time.Sub(since) <= GoneAfter {
			return false
		}
	}
	level.Warn(t.o.Logger).Log("msg", "the successor of an MPS client, told while the journal could not take its original, is not listed on its GPU under its tenant any more (gone, or its PID taken by another process): not followed; the original stays with the old PID, closed once that is taken for gone",
		"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.tg.PID, "successor", w.to, "listed_tenant", tn, "listed", running[key])
	k := w.tg.String()
	delete(t.watches, k)
	delete(t.followAt, k)
	return false
}

// toListedAtExit reports whether the exit takes w.to as the successor
// told: listed by the latest snapshot (toListed), or, where that sample
// misses it (a sample may miss a running client), not given up and last
// listed under the client's tenant within GoneAfter of it (sample time).
// A process that took the PID meanwhile is told from the successor by
// the identity read when it was told (toID; clientGone), not set back.
func (t *Tuner) toListedAtExit(w *successorWatch) bool {
	if t.toListed(w) {
		return true
	}
	k := w.tg.String()
	return t.watches[k] == w && !w.toSeen.IsZero() && t.last != nil &&
		t.last.Time.Sub(w.toSeen) <= GoneAfter
}

// followUnjournaled moves, at exit, the original of w's client to its
// successor told, w.to (still that process: toListed), where the journal
// does not take the successor's original even then: the exit sets the
// successor back all the same (restores go on while the journal cannot be
// written), with the identity read when it was told, and the old PID's
// original, open in the journal, is closed once that restore is made
// (closeMovedAtExit). Left for the next start instead, it would be lost:
// the next start looks for a successor only within successorWithin of the
// restart, and the journal names none, so it would close the original as
// gone, the successor keeping the tuner's cap for good.
func (t *Tuner) followUnjournaled(w *successorWatch, now time.Time) bool {
	ko := w.tg.String()
	o, held := t.originals[ko]
	nt := w.tg
	nt.PID = w.to
	nk := nt.String()
	if _, has := t.originals[nk]; !held || has || !t.exiting {
		return false
	}
	t.originals[nk] = Original{Target: nt, Tenant: o.Tenant, Value: o.Value, At: now, Identity: w.toID}
	t.dropOriginal(ko)
	t.trackProc(nt, now)
	t.observeProc(nt, now) // (listed, or last seen within GoneAfter: toListedAtExit)
	if t.movedAtExit == nil {
		t.movedAtExit = map[string]movedOriginal{}
	}
	t.movedAtExit[nk] = movedOriginal{o, w.to}
	level.Warn(t.o.Logger).Log("msg", "tuner journal cannot take the original of an MPS client's successor at exit: the successor is set back all the same, and the old PID's original closed once the journal takes it",
		"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.tg.PID, "successor", w.to)
	return true
}

// closeMovedAtExit closes in the journal (or keeps to write later:
// unwritten.go) the original of each client whose successor the exit
// set back, or found gone, after moving its original there without a
// record (followUnjournaled). One whose successor's restore failed stays
// open: the next start takes it up.
func (t *Tuner) closeMovedAtExit(now time.Time) {
	for _, nk := range slices.Sorted(maps.Keys(t.movedAtExit)) {
		if _, held := t.originals[nk]; held {
			continue
		}
		m := t.movedAtExit[nk]
		delete(t.movedAtExit, nk)
		t.journal(restoreRecord(EventRestored, m.old, now, fmt.Sprintf("the client went on as PID %d, whose original the exit took up", m.to)))
	}
}

// movedOriginal is an original the exit moved to the successor to
// (followUnjournaled).
type movedOriginal struct {
	old Original
	to  uint32
}
