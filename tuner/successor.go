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
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// An MPS cap reaches a client through a restart, and a restarted client
// may go on under another PID. What the tuner keeps of the client (its
// original, which the restore sets back, its change and the pending
// judgement of a relaxed cap) goes on with the successor (follow), after
// a restart that failed too (its hook may have started the successor:
// watchFailedRestart), and once the journal takes the successor's
// original where it did not at first (followTold). The
// restart hook may name the successor (pid=N: gpu.MPSSuccessors); where
// it names none, the tuner looks for it in the rounds after the restart,
// by the tenants' attribution, and decides once successorWithin has
// passed: the successor is the one process of the restarted tenant on
// the client's GPU that was not there at the restart and appeared within
// successorWithin of it, the client's own process gone and every other
// process of the tenant there seen again since (a multi-process job
// restarted as a whole leaves no telling which new process succeeds
// which). "Not there at the restart" is not one sample's word: a sample
// may miss a process (seenLately), so what was there is every process the
// rounds saw on the GPU within GoneAfter before the restart (noteRecent).
// The decision waits out the bound: a new replica of the tenant scheduled
// while the client drains may come before the successor, and the first
// lone new process is not yet the only one. A new process counts as having
// appeared even where it is gone again by the end: it may have been the
// successor, failed and been replaced, or a replica that came and went,
// and either way which one succeeds the client cannot be told. With none
// within the bound, or several, the tuner keeps what it did before (the
// client's original is closed once its process is gone, and the
// successor keeps the cap it was started with) and says so once, naming
// the candidates, so that the operator can have the hook print pid=N.
// What the restart left on the GPU is journaled with the original before
// the restart, so that a start after a crash goes on looking.

// successorWithin is how long after an MPS client's restart a new process
// of its tenant may appear and be taken for its successor. The simulator's
// restart costs bound it: a restart without memory for a warm standby
// drains the client (sim defaultDrainTimeout, 30 s, Kubernetes'
// terminationGracePeriodSeconds) and starts the successor, which is on
// the GPU's process list once its CUDA context is up (sim
// defaultStartTime, 5 s, before its model loads); a switch-over to a
// warmed standby takes far less (MPS restart_time, 100 us). 35 s, plus
// one round of the tuner (DefaultInterval, 15 s) to see it, is within a
// minute, which is also how long the tuner keeps a process missing from
// the readings (GoneAfter). A process that comes later is taken for a
// new one, not the successor. The successor is told in the first round
// past the bound.
const successorWithin = time.Minute

// clockSkew is how far after the tuner's clock a restart may be dated and
// still be looked for: one dated later was journaled by a run whose clock
// was ahead of this one's (the host's clock set back across a crash), and
// its bound cannot be counted.
const clockSkew = 5 * time.Second

// Restart is what was on an MPS client's GPU when the tuner restarted it
// through an actuator whose restarts may go on under another PID: the
// restarted tenant's processes there (Kin, the client's own included)
// and the GPU's other processes, each seen there within GoneAfter before
// At. A process of the tenant in neither that appears within
// successorWithin of At may be the client's successor.
type Restart struct {
	At          time.Time
	Kin, Others []uint32
}

// successorWatch is a restarted MPS client whose successor is looked for,
// and what the snapshots taken since the restart showed of its GPU.
type successorWatch struct {
	Restart
	tg     Target
	tenant string
	// old is the restarted client's PID, where the hook named tg.PID its
	// successor (0: the watch is the client's own, tg.PID is old): the
	// watch ends once a snapshot lists tg.PID (listed).
	old    uint32
	listed bool
	// foreign is the tenant a snapshot attributes the named PID to where
	// that is not the client's tenant (unname); oldID the identity
	// journaled with old's original, given back to it there (old's
	// process, restarted, tells none by then)
	foreign string
	oldID   Identity
	// restore is, for a client whose original an earlier run left open,
	// the reason it is set back on the successor once found ("": it is
	// not, it stays the tuner's change).
	restore string
	// read is whether a snapshot since the restart read the GPU, running
	// whether the latest of them listed the client's own process; cands
	// are the new processes of the tenant any of them listed within
	// successorWithin of the restart, kinSeen the processes of Kin they
	// listed.
	read, running bool
	cands         []uint32
	kinSeen       map[uint32]bool
	// to is the successor told (named, where named; else found) whose
	// original the journal did not take: the original stays with tg, and
	// the follow is tried again (followTold); 0 for none. toID is its
	// identity, read when it was told (a later read could be of another
	// process that took the PID), toSeen when a snapshot last listed it
	// under the client's tenant (toListed).
	to     uint32
	named  bool
	toID   Identity
	toSeen time.Time
	// adopted is whether the watch is of an original an earlier run left
	// open (adoptOriginal).
	adopted bool
}

// successors returns the MPS actuator when a's restart may go on under
// another PID (it implements gpu.MPSSuccessors: the simulator's restart
// keeps its PID).
func (t *Tuner) successors(a Action) (gpu.MPSSuccessors, bool) {
	if a.Knob != gpu.KnobMPSActiveThreads || !a.Restart || a.PID == 0 {
		return nil, false
	}
	mps, _ := actuator[gpu.MPSActuator](t.o.Actuators)
	s, ok := mps.(gpu.MPSSuccessors)
	return s, ok
}

// restartOf is what the rounds saw on the GPU of the client a restarts
// within GoneAfter before now, the round's time (a process one sample
// missed was there all the same), as a restart at at.
func (t *Tuner) restartOf(a Action, now, at time.Time) Restart {
	r := Restart{At: at, Kin: []uint32{a.PID}}
	for k, p := range t.onGPU {
		if k.gpu != a.GPU || k.pid == a.PID || now.Sub(p.seen) >= GoneAfter {
			continue
		}
		if p.tenant == a.Tenant {
			r.Kin = append(r.Kin, k.pid)
		} else {
			r.Others = append(r.Others, k.pid)
		}
	}
	slices.Sort(r.Kin)
	slices.Sort(r.Others)
	return r
}

// recentProc is a process the rounds saw on a GPU: its tenant (the
// latest the usage attributed it to, "" for none) and when last.
type recentProc struct {
	tenant string
	seen   time.Time
}

// noteRecent notes the processes snap lists on the GPUs it reads
// (readings and usage), at its time, and forgets those not listed for
// GoneAfter; it starts the absence count of the targets taken from the
// journal on those GPUs (countAbsence).
func (t *Tuner) noteRecent(snap *tenant.Snapshot, now time.Time) {
	if snap == nil || snap.Readings == nil {
		return
	}
	at := snap.Time
	if at.IsZero() {
		at = now
	}
	if t.onGPU == nil {
		t.onGPU = map[pidKey]recentProc{}
	}
	up, running := runningProcs(snap)
	tenants := pidTenants(snap)
	for k := range running {
		if !up[k.gpu].any {
			continue
		}
		p := t.onGPU[k]
		if tn := tenants[k]; tn != "" {
			p.tenant = tn
		}
		if at.After(p.seen) {
			p.seen = at
		}
		t.onGPU[k] = p
	}
	maps.DeleteFunc(t.onGPU, func(_ pidKey, p recentProc) bool { return at.Sub(p.seen) >= GoneAfter })
	t.countAbsence(up, now, at)
}

// journalRestart journals, before an MPS client's restart that may go on
// under another PID, what is on its GPU, with the client's original: a
// crash during the restart or before the successor is found leaves the
// next start what it needs to look for it. A restart that could not be
// journaled is not made.
func (t *Tuner) journalRestart(a Action, now time.Time) error {
	if _, ok := t.successors(a); !ok || a.Tenant == "" {
		return nil
	}
	k := a.Target.String()
	o, held := t.originals[k]
	if !held {
		return nil
	}
	// dated at the hook's start, which a next start counts the bound
	// from (now is the round's: an earlier hook of it may have run long)
	r := t.restartOf(a, now, t.o.Clock.Now())
	if t.o.Journal != nil {
		if err := t.journal(Record{Time: r.At, Event: EventRestarted, Target: a.Target, Tenant: a.Tenant, PIDs: r.Kin, Others: r.Others}); err != nil {
			return fmt.Errorf("not changed, the client's restart could not be journaled: %w", err)
		}
	}
	o.Restart = &r // (as the journal holds it: restartedLately)
	t.originals[k] = o
	return nil
}

// followSuccessor, after a's restart of an MPS client, follows the
// successor the actuator names or, where it names none, starts looking
// for it (findSuccessors). A named successor is checked: one the rounds
// saw on the GPU before the restart (another tenant's process, or one of
// the tenant's already running: the hook printed the wrong PID) is
// refused at once, one a later snapshot attributes to another tenant
// when it lists it (unname), and one no snapshot lists on the GPU within
// successorWithin (the hook printed a wrapper's PID, or another host's)
// once that bound has passed; either is said, and the successor looked
// for as if the hook had named none. h is the call off the round the
// restart ran in (hooks.go), nil for one in the round: its restart is
// told from what the rounds had seen on the GPU when it began (they have
// since seen the successor it started), dated at the hook's return, and
// from the successor the actuator named then (it forgets it after a
// while, and the settling round may come later).
func (t *Tuner) followSuccessor(a Action, now time.Time, h *hookCall) {
	s, ok := t.successors(a)
	if !ok {
		return
	}
	var named uint32
	r := t.restartSeen(a, now, h)
	seen, began := t.onGPU, now
	if h == nil {
		named, ok = s.Successor(a.GPU, a.PID)
	} else {
		seen, began = h.seen, h.started
		named, ok = h.named, h.namedOK
	}
	if ok && named != a.PID && t.namedWasThere(a, named, began, seen) {
		ok = false
	}
	if ok && named == a.PID {
		return
	}
	w := &successorWatch{Restart: r, tg: a.Target, tenant: a.Tenant, oldID: t.originals[a.Target.String()].Identity}
	if ok {
		t.followTold(w, named, true, now)
		return
	}
	if a.Tenant != "" {
		t.watches[w.tg.String()] = w
	}
}

// restartSeen is the restart of a's client as its successor is told from
// it: what the rounds had seen on its GPU at its start, dated at the
// hook's return (the bound counts from there: it may have run long). h
// is the call off the round the restart ran in, nil for one in the round.
func (t *Tuner) restartSeen(a Action, now time.Time, h *hookCall) Restart {
	if h == nil {
		return t.restartOf(a, now, t.o.Clock.Now())
	}
	r := h.restart
	r.At = h.ended
	return r
}

// namedNotTaken ends the warning of a named successor refused.
const namedNotTaken = ": not taken; the successor is looked for as if the hook had named none (the hook's pid=N must be the PID of the CUDA process the restart started)"

// namedWasThere reports whether the successor the restart hook named for
// a's client, PID named, is a process the rounds saw on its GPU (onGPU)
// within GoneAfter before the restart began, at (as restartOf counts what
// was there at the restart), and warns that it is not taken: the successor is a process the
// restart started, and taking another tenant's (or one of the tenant's
// that ran already) would move the client's original, and its restore at
// exit, onto that process.
func (t *Tuner) namedWasThere(a Action, named uint32, at time.Time, onGPU map[pidKey]recentProc) bool {
	p, seen := onGPU[pidKey{a.GPU, named}]
	if !seen || at.Sub(p.seen) >= GoneAfter {
		return false
	}
	what := "another tenant's process"
	if p.tenant == a.Tenant {
		what = "a process of its own tenant that was running already"
	} else if p.tenant == "" {
		what = "a process no tenant is attributed to"
	}
	level.Warn(t.o.Logger).Log("msg", "the restart hook named as the successor of an MPS client "+what+", on its GPU before the restart"+namedNotTaken,
		"tenant", a.Tenant, "gpu", a.GPU, "pid", a.PID, "named", named, "named_tenant", p.tenant, "named_last_seen", p.seen.UTC().Format(time.RFC3339))
	return true
}

// followAs moves what the tuner keeps of the MPS client old to its
// successor, PID pid, whose context has the client's last fraction: the
// change and its pending judgement (a relaxed cap is judged, and reverted
// if it did harm, on the successor: on the old PID, forgotten once it is
// gone, it would never be), and the original, journaled for the new PID
// (with the value last set) before the old one's is closed, so that the
// restore, at exit or after a crash, sets the successor back. Where the
// journal cannot take it, the original stays with the old PID (false).
// The identity journaled for pid is id, where not nil, else the one read
// now (mpsidentity.go).
func (t *Tuner) followAs(old Target, pid uint32, id *Identity, now time.Time) bool {
	ko := old.String()
	nt := old
	nt.PID = pid
	k := nt.String()
	if c, held := t.changes[ko]; held {
		t.changes[k] = c
	}
	for i := range t.evals {
		if t.evals[i].a.Target == old {
			t.evals[i].a.Target = nt
		}
	}
	o, held := t.originals[ko]
	if !held {
		return true
	}
	if _, has := t.originals[k]; !has {
		if id == nil {
			read := t.successorIdentity(pid) // (mpsidentity.go)
			id = &read
		}
		no := Original{Target: nt, Tenant: o.Tenant, Value: o.Value, At: now, Identity: *id}
		err := t.closeLeftOpen(k, now) // (one of the PID's before, set back while the journal could not be written)
		if err == nil {
			err = t.journal(originalRecord(no))
		}
		if err != nil {
			level.Error(t.o.Logger).Log("msg", "tuner could not journal the original of an MPS client's successor; it stays with the old PID until the journal takes it", "target", ko, "successor", pid, "err", err)
			return false
		}
		// the value last set goes with it, as an applied record (what a
		// compaction writes): a restore after a crash says it set the
		// successor back from that, not from an unknown value (where this
		// write fails, only that is lost); one the write adopted from a
		// journal it found put at the path is kept (the journal keeps the
		// first)
		if _, adopted := t.originals[k]; !adopted {
			if set, _ := t.lastSetValue(ko); set != nil {
				no.Set, no.SetAt = set, now
			}
			if rec, ok := no.setRecord(); ok {
				rec.From, rec.Reason = encodeValue(o.Value), fmt.Sprintf("the client goes on as PID %d, with the value last set on PID %d", pid, old.PID)
				t.journal(rec)
			}
			t.originals[k] = no
		}
		t.trackProc(nt, now)
		t.observeProc(nt, now)
	}
	t.closeOriginal(ko, now, fmt.Sprintf("the client goes on as PID %d, which holds this original now", pid))
	return true
}

// adoptOriginal holds o, an original an earlier run (or another, in a
// journal put at the path) left open in the journal, as this run's: its
// process followed (trackProc), and the successor of an MPS client it
// restarted looked for. It replaces one this run holds of the target:
// the journal keeps the first, the one a start sets back.
func (t *Tuner) adoptOriginal(o Original, now time.Time) {
	k := o.Target.String()
	t.originals[k] = o
	delete(t.inForce, k) // (what this run knew of the setting is not of this original)
	if _, had := t.procs[k]; !had {
		t.trackProc(o.Target, now)
		if p, tracked := t.procs[k]; tracked { // (a target with a process)
			p.journaled, p.unread = true, true // (absent from when a snapshot reads its GPU: countAbsence)
			t.procs[k] = p
		}
	}
	if o.Restart != nil && o.Tenant != "" {
		t.watches[k] = &successorWatch{Restart: *o.Restart, tg: o.Target, tenant: o.Tenant, adopted: true}
	}
}

// findSuccessors looks for the successor of each restarted MPS client in
// snap, follows the one found (and sets back on it the original an
// earlier run left open, in enforce mode: restoreDeferred, off the round
// where its restart runs a hook), and gives up on those it cannot tell.
func (t *Tuner) findSuccessors(ctx context.Context, snap *tenant.Snapshot, now time.Time) ([]Decision, error) {
	out, errs := t.retryRestores(ctx, now)
	for _, k := range slices.Sorted(maps.Keys(t.watches)) {
		w := t.watches[k]
		if w == nil {
			continue // (dropped by a follow or an unname earlier in this loop)
		}
		pid := w.to
		if pid != 0 {
			if !t.retryFollow(w, now) {
				continue
			}
		} else {
			p, found, waiting := t.successorOf(w, snap, now)
			if waiting {
				continue
			}
			delete(t.watches, w.tg.String()) // (unname may have moved it from k)
			if !found && !w.running {
				// the relaxed cap it judged went with the process, and where
				// its successor is cannot be told
				t.evals = slices.DeleteFunc(t.evals, func(e evaluation) bool { return e.a.Target == w.tg })
			}
			if !found || !t.followTold(w, p, false, now) {
				continue
			}
			pid = p
		}
		if w.restore == "" || !t.enforcedOn(w.tg.GPU) {
			continue
		}
		nt := w.tg
		nt.PID = pid
		if _, held := t.originals[nt.String()]; !held {
			continue
		}
		d, err := t.restoreDeferred(ctx, nt.String(), w.restore, now)
		if d != nil {
			out = append(out, *d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// unname turns the watch of a named successor a snapshot attributes to
// another tenant (a new process of that tenant: the hook printed the wrong
// PID) into one that looks for the successor as if the hook had named
// none, and says so: what the tuner keeps of the client goes back to its
// old PID (followAs), and the watch with it, with the identity journaled
// for it before (its process is gone by now: one read now would be none,
// and a restore would restart whatever takes the PID later). Where the
// journal cannot take that, it stays as it is (false).
func (t *Tuner) unname(w *successorWatch, now time.Time) bool {
	level.Warn(t.o.Logger).Log("msg", "the restart hook named as the successor of an MPS client another tenant's process, listed on its GPU after the restart"+namedNotTaken,
		"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.old, "named", w.tg.PID, "named_tenant", w.foreign)
	named := w.tg
	if !t.followAs(named, w.old, &w.oldID, now) {
		return false
	}
	delete(t.watches, named.String())
	w.tg.PID, w.old, w.foreign, w.listed = w.old, 0, "", false
	t.watches[w.tg.String()] = w
	return true
}

// observe takes into w what snap, taken after the restart, lists on its
// GPU.
func (w *successorWatch) observe(snap *tenant.Snapshot) {
	if snap == nil || snap.Readings == nil || !snap.Time.After(w.At) {
		return
	}
	up, running := runningProcs(snap)
	if !up[w.tg.GPU].holds(procSeen{tg: w.tg}) {
		return
	}
	w.read, w.running = true, running[pidKey{w.tg.GPU, w.tg.PID}]
	if tn := pidTenants(snap)[pidKey{w.tg.GPU, w.tg.PID}]; w.old != 0 && w.running && tn != "" && tn != w.tenant {
		w.foreign = tn
	}
	w.listed = w.listed || w.old != 0 && w.running && w.foreign == ""
	for _, p := range w.Kin {
		if p != w.tg.PID && p != w.old && running[pidKey{w.tg.GPU, p}] {
			if w.kinSeen == nil {
				w.kinSeen = map[uint32]bool{}
			}
			w.kinSeen[p] = true
		}
	}
	if snap.Time.Sub(w.At) > successorWithin {
		return // a process new now came too late to be the successor
	}
	for _, u := range snap.Usage {
		if u.UUID != w.tg.GPU || u.Tenant != w.tenant {
			continue
		}
		for _, p := range u.PIDs {
			if p != w.tg.PID && !slices.Contains(w.Kin, p) && !slices.Contains(w.Others, p) && !slices.Contains(w.cands, p) {
				w.cands = append(w.cands, p)
			}
		}
	}
	slices.Sort(w.cands)
}

// successorOf takes snap into w and, once successorWithin has passed
// since the restart, tells its successor: found (its PID), or not, which
// is logged where the successor may have been missed. Until then it is
// waiting. A restart dated after now (beyond clockSkew) is given up at
// once, as one whose bound has passed with no successor told.
func (t *Tuner) successorOf(w *successorWatch, snap *tenant.Snapshot, now time.Time) (pid uint32, found, waiting bool) {
	var why string
	if w.At.Sub(now) > clockSkew {
		why = "the restart is dated " + w.At.Sub(now).Round(time.Second).String() + " after now (the clock was set back): its bound cannot be counted"
	} else {
		w.observe(snap)
		if w.foreign != "" && t.unname(w, now) {
			w.observe(snap) // what it shows of the client's own PID
		}
		if w.listed {
			return 0, false, false // the named successor is there
		}
		if now.Sub(w.At) <= successorWithin {
			return 0, false, true
		}
	}
	var kinGone []uint32
	for _, p := range w.Kin {
		if p != w.tg.PID && p != w.old && !w.kinSeen[p] {
			kinGone = append(kinGone, p)
		}
	}
	bound := successorWithin.String()
	switch {
	case why != "":
	case !w.read:
		why = "its GPU was not read within " + bound + " of the restart"
	case w.running:
		if len(w.cands) == 0 {
			return 0, false, false // the client went on under its own PID
		}
		why = "its process still runs"
	case len(w.cands) == 0:
		why = "no new process of its tenant appeared within " + bound + " of the restart"
	case len(kinGone) > 0:
		why = "other processes of its tenant seen on the GPU within " + GoneAfter.String() + " before the restart were not seen again (" + pidsText(kinGone) + "): gone with it, which new process succeeds which cannot be told"
	case len(w.cands) > 1:
		why = "several new processes of its tenant appeared within " + bound + " of the restart"
	default:
		if w.old != 0 {
			level.Warn(t.o.Logger).Log("msg", "the restart hook named a successor of an MPS client that no snapshot listed on its GPU within "+bound+" of the restart; the tuner took the only new process of its tenant there: the hook's pid=N must be the PID of the CUDA process (not of a wrapper), and a successor must have its CUDA context within that bound",
				"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.old, "named", w.tg.PID, "successor", w.cands[0])
		} else {
			level.Info(t.o.Logger).Log("msg", "tuner found the successor of an MPS client it restarted: the only new process of its tenant on the GPU within "+bound+" of the restart", "tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.tg.PID, "successor", w.cands[0])
		}
		return w.cands[0], true, false
	}
	if w.old != 0 {
		level.Warn(t.o.Logger).Log("msg", "the restart hook named a successor of an MPS client that no snapshot listed on its GPU within "+bound+" of the restart, and the tuner cannot tell the successor: it keeps the cap it was started with, and the original is dropped once the named PID is taken for gone; the hook's pid=N must be the PID of the CUDA process (not of a wrapper), and a successor must have its CUDA context within that bound",
			"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.old, "named", w.tg.PID, "candidates", pidsText(w.cands), "why", why)
		return 0, false, false
	}
	kept := "the successor keeps the cap it was started with"
	if w.adopted {
		kept += " (unless the run that restarted it set it back at exit, its journal unwritable: that run's log says so)"
	}
	level.Warn(t.o.Logger).Log("msg", "tuner cannot tell the successor of an MPS client it restarted, and the restart hook named none: "+kept+"; a hook that prints pid=N as its last line of stdout names it",
		"tenant", w.tenant, "gpu", w.tg.GPU, "pid", w.tg.PID, "candidates", pidsText(w.cands), "why", why)
	return 0, false, false
}

// followAtRestore replaces, in the keys of the originals a restore sets
// back, each restarted MPS client's whose process the latest snapshot has
// no more by its successor's, where found (and followed). A client whose
// successor is still looked for is left to restoreOne.
func (t *Tuner) followAtRestore(keys []string, now time.Time) []string {
	for i, k := range keys {
		w := t.watches[k]
		if w == nil {
			continue
		}
		pid := w.to
		switch present, known := t.processPresent(w.tg); {
		case pid != 0:
			// told, its original not journaled yet: tried once more (the
			// exit waits for no back-off), where it is still the process
			// told (or last seen within GoneAfter: toListedAtExit)
			if !t.toListedAtExit(w) || !t.followTold(w, pid, w.named, now) && !t.followUnjournaled(w, now) {
				continue
			}
		case present || !known:
			continue
		default:
			p, found, waiting := t.successorOf(w, t.last, now)
			if waiting {
				continue
			}
			delete(t.watches, w.tg.String()) // (unname may have moved it from k)
			if !found || !t.followTold(w, p, false, now) {
				continue
			}
			pid = p
		}
		nt := w.tg
		nt.PID = pid
		keys[i] = nt.String()
	}
	return keys
}

// awaitsSuccessor returns the watch of the original k, of a restarted MPS
// client, where its restore waits for the successor: it is still looked
// for, and the latest snapshot has the client's process no more or was
// taken before the restart (it cannot tell).
func (t *Tuner) awaitsSuccessor(k string) (*successorWatch, bool) {
	w := t.watches[k]
	if w == nil || t.last == nil {
		return nil, false
	}
	present, known := t.processPresent(w.tg)
	return w, known && (!present || !t.last.Time.After(w.At))
}
