package tuner

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The tuner keeps, per process knob (a target with a PID), the latest
// target (status), the last change, a pending MPS fraction, the last
// refusal logged, an original to restore, and what the guards learnt of
// it. A long-running host sees client after client come and go (the tuner
// itself restarts an MPS client to give it a new cap, under a new PID), so
// what is kept of a process is dropped once it has been gone from its GPU
// for GoneAfter: otherwise every round's status, history point and
// per-round scan would grow with every process the tuner ever acted on.

// GoneAfter is how long a process may be missing from the readings of its
// GPU before the tuner forgets its process knobs: several rounds, so that a
// process a sample misses is kept (as the MPS controller keeps its
// clients, gpu/mps forgetAfter); the policies and the slow loop forget
// what they keep of a tenant gone from every GPU after it too.
const GoneAfter = time.Minute

// Absent keeps, per key, since when something has been missing: For
// starts the count at the first call after Seen (or ever) and says how
// long it has run; Seen ends it. A nil Absent is empty.
type Absent map[string]time.Time

// For is how long k has been missing as of now.
func (a *Absent) For(k string, now time.Time) time.Duration {
	if *a == nil {
		*a = Absent{}
	}
	since, ok := (*a)[k]
	if !ok {
		(*a)[k], since = now, now
	}
	return now.Sub(since)
}

// Seen ends k's count.
func (a Absent) Seen(k string) { delete(a, k) }

// procSeen is a process target the tuner keeps something of, and when its
// process was last seen on its GPU (or first kept); observed is whether
// this run has seen it running (acted on it, or found it in a snapshot),
// not only read it from the journal.
type procSeen struct {
	tg       Target
	seen     time.Time
	observed bool
	// journaled: taken from the journal (adoptOriginal); unread: not
	// observed, and the latest snapshot did not read its GPU (or none
	// has since): its absence is counted (seen) from the next that does
	// (countAbsence), not from the start or from before the GPU was
	// lost: a first snapshot long after the start, or a GPU read down
	// for long, tells nothing of it
	journaled, unread bool
	// absent is how long, in the snapshots' own sample times, it has been
	// missing from its GPU while the GPU was read: the clock an unlisted
	// MPS client's wait runs on (awaitsListing). Each snapshot that reads
	// the GPU adds the time since the snapshot before (lastAt), the first
	// nothing (counting: one has); a sample repeated while the sampler
	// stalls adds nothing, nor does one that does not read the GPU, so a
	// GPU read down for long does not close it on its first read, and
	// one read on and off does not hold its wait for good.
	absent   time.Duration
	lastAt   time.Time
	counting bool
	// instance and ci are the MIG GPU and compute instance it was last
	// listed in (placed), noted on a MIG GPU: where the GPU's lists are
	// read in part, its absence is known where that MIG device's list was
	// read, or every list of that GPU instance (listsRead.holds); mps,
	// that it was last listed as an MPS client: its absence is known
	// where the MPS clients' list was read
	instance, ci int
	placed, mps  bool
}

// Forgetter is a guard that keeps state per target: Forget drops what it
// keeps of the targets in gone (by Target.String), whose processes have
// exited.
type Forgetter interface {
	Forget(gone map[string]bool)
}

// Forget has every Forgetter of the chain drop the targets in gone.
func (c Chain) Forget(gone map[string]bool) {
	for _, g := range c {
		if f, ok := g.(Forgetter); ok {
			f.Forget(gone)
		}
	}
}

// trackProc notes a process target the tuner keeps something of, with
// the list the latest snapshot (the one acted on) holds its process in: a
// process moved or exited before the next one is still known gone where
// that list is read.
func (t *Tuner) trackProc(tg Target, now time.Time) {
	if tg.PID == 0 || !endsWithProcess(tg.Knob) {
		return
	}
	k := tg.String()
	if _, ok := t.procs[k]; ok {
		return
	}
	if t.procs == nil {
		t.procs = map[string]procSeen{}
	}
	p := procSeen{tg: tg, seen: now}
	p.noteListing(t.last)
	t.procs[k] = p
}

// noteListing notes the list snap holds p's process in, where it lists it
// on its GPU: the MIG GPU instance (on a MIG GPU), whether an MPS client's.
func (p *procSeen) noteListing(snap *tenant.Snapshot) {
	if snap == nil || snap.Readings == nil {
		return
	}
	d := snap.Readings.DeviceByUUID(p.tg.GPU)
	if d == nil || !d.Up {
		return
	}
	i := slices.IndexFunc(d.Processes, func(q gpu.Process) bool { return q.PID == p.tg.PID })
	if i < 0 {
		return
	}
	q := d.Processes[i]
	p.mps = q.Type == gpu.ProcessMPS
	p.instance, p.ci, p.placed = q.GPUInstanceID, q.ComputeInstanceID, d.MIGEnabled && q.GPUInstanceID >= 0
}

// countAbsence starts, at now, the absence count of the process
// targets taken from the journal and not observed since whose GPU the
// snapshot before had not read and the readings now, up, read, and counts
// their absence in sample times (at, the snapshot's: procSeen.absent); it
// marks those whose GPU they do not read (procSeen.unread).
func (t *Tuner) countAbsence(up map[string]listsRead, now, at time.Time) {
	for k, p := range t.procs {
		if !p.journaled || p.observed {
			continue
		}
		read := up[p.tg.GPU].holds(p)
		switch {
		case !read:
			p.unread = true
		case p.unread:
			p.seen, p.unread = now, false
		}
		if read && p.counting && at.After(p.lastAt) {
			p.absent += at.Sub(p.lastAt)
		}
		p.counting = p.counting || read
		if at.After(p.lastAt) {
			p.lastAt = at
		}
		t.procs[k] = p
	}
}

// observeProc notes the process of tg seen running now (an action made on
// it).
func (t *Tuner) observeProc(tg Target, now time.Time) {
	if p, ok := t.procs[tg.String()]; ok {
		p.seen, p.observed = now, true
		t.procs[tg.String()] = p
	}
}

// seenLately reports whether this run saw the process target k running
// within GoneAfter of now: a snapshot without it may have missed it.
func (t *Tuner) seenLately(k string, now time.Time) bool {
	p, ok := t.procs[k]
	return ok && p.observed && now.Sub(p.seen) < GoneAfter
}

// forgetGone drops what the tuner keeps of the process targets whose
// process has been missing from its GPU (its readings' processes and its
// usage's PIDs) for GoneAfter; a GPU the snapshot did not read, or whose
// list that would hold the process NVML refused (listsRead), tells
// nothing. An MPS original is dropped as
// the restore drops it (restoreOne), on a GPU in enforce mode, the one
// the restores touch: its context is gone, and the next one starts with
// the default.
func (t *Tuner) forgetGone(snap *tenant.Snapshot, now time.Time) {
	if len(t.procs) == 0 || snap == nil || snap.Readings == nil {
		return
	}
	up, running := runningProcs(snap)
	var gone map[string]bool
	for k, p := range t.procs {
		read := up[p.tg.GPU]
		switch {
		case running[pidKey{p.tg.GPU, p.tg.PID}] && read.any:
			p.seen, p.observed = now, true
			p.noteListing(snap)
			t.procs[k] = p
		case !read.holds(p):
		case t.watches[k] != nil: // its successor is looked for (findSuccessors)
		case t.hooks[k] != nil: // a hook runs on it (hooks.go): gone while it restarts the client
		case t.waitsForListing(k): // (its wait runs on the samples' times: awaitsListing)
		case t.restartedLately(k, now): // (its successor may not be told yet)
		case now.Sub(p.seen) >= GoneAfter:
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[k] = true
		}
	}
	t.forget(gone, now)
}

// forget drops what the tuner keeps of the targets in gone.
func (t *Tuner) forget(gone map[string]bool, now time.Time) {
	if len(gone) == 0 {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(gone)) {
		delete(t.procs, k)
		delete(t.targets, k)
		delete(t.changes, k)
		delete(t.pending, k)
		delete(t.refused, k)
		delete(t.pauseMPS, k)
		t.endedUnseen.Seen(k)
		if o, ok := t.originals[k]; ok && o.Target.Knob == gpu.KnobMPSActiveThreads && t.enforcedOn(o.Target.GPU) {
			t.dropGoneOriginal(k, now)
		}
	}
	t.evals = slices.DeleteFunc(t.evals, func(e evaluation) bool { return gone[e.a.Target.String()] })
	t.chain().Forget(gone)
}

// forgetEndedPauses drops what the tuner keeps of a pause that has ended
// (no original open: thawed, or only recommended) once its tenant has had
// no process on any GPU for GoneAfter, as forgetGone does of a process:
// a pause names its tenant, and a host whose batch jobs come and go as
// tenants of their own (a namespace or a pod label's value each) would
// otherwise keep a setting, a last change and the guards' state of every
// tenant ever paused, served as its pause series, for good. A pause in
// force is never dropped so (thawPauses ends it first); a GPU the
// snapshot did not read, or whose list that would hold its tenant's
// processes NVML refused (listsRead.holdsTenant), tells nothing. Its tenant's failed-freeze count,
// served from 0 from its first pause, goes with its last pause setting,
// the pause actuator's too where it can drop it.
func (t *Tuner) forgetEndedPauses(snap *tenant.Snapshot, now time.Time) {
	if snap == nil || snap.Readings == nil || !t.anyPauseTarget() {
		return
	}
	up, _ := runningProcs(snap)
	hasProc := PausableTenants(snap)
	var gone map[string]bool
	for k, st := range t.targets {
		if st.Knob != gpu.KnobPauseDuty {
			continue
		}
		if hasProc[st.Tenant] {
			t.notePauseListing(snap, k, st)
		}
		if !up[st.GPU].holdsTenant(t.pauseMPS[k]) {
			continue
		}
		if _, open := t.originals[k]; open || hasProc[st.Tenant] {
			t.endedUnseen.Seen(k)
			continue
		}
		if t.endedUnseen.For(k, now) >= GoneAfter {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[k] = true
		}
	}
	tenants := map[string]bool{}
	for k := range gone {
		tenants[t.targets[k].Tenant] = true
	}
	t.forget(gone, now)
	// a tenant none of whose pauses is left is served no failed-freeze
	// count from 0 any more (syncPauses)
	for _, st := range t.targets {
		if st.Knob == gpu.KnobPauseDuty {
			delete(tenants, st.Tenant)
		}
	}
	forgetter, _ := t.o.Pauses.(gpu.PauseFailuresForgetter)
	for name := range tenants {
		delete(t.pausedTenants, name)
		if forgetter != nil {
			forgetter.ForgetPauseFailures(name)
		}
	}
}

// notePauseListing notes whether the processes snap lists of pause
// setting k's tenant on its GPU are all MPS clients (t.pauseMPS); where it
// lists none there, what was noted stays. The note counts only while the
// GPU reads in MPS mode (holdsTenant). (It is taken from a listing read in
// part too: a GPU whose compute list NVML refuses for good would else
// keep every MPS tenant's ended pause for good; a compute process of such
// a tenant on the refused list is the price.)
func (t *Tuner) notePauseListing(snap *tenant.Snapshot, k string, st Setting) {
	d := snap.Readings.DeviceByUUID(st.GPU)
	if d == nil || !d.Up {
		return
	}
	pids := map[uint32]bool{}
	for _, u := range snap.Usage {
		if u.Tenant == st.Tenant && u.UUID == st.GPU {
			for _, pid := range u.PIDs {
				pids[pid] = true
			}
		}
	}
	listed, mps := false, true
	for _, p := range d.Processes {
		if pids[p.PID] {
			listed, mps = true, mps && p.Type == gpu.ProcessMPS
		}
	}
	switch {
	case !listed:
	case mps:
		if t.pauseMPS == nil {
			t.pauseMPS = map[string]bool{}
		}
		t.pauseMPS[k] = true
	default:
		delete(t.pauseMPS, k)
	}
}

// anyPauseTarget says whether the tuner keeps any pause setting (the
// round's look at the snapshot's processes for them is spared where none).
func (t *Tuner) anyPauseTarget() bool {
	for _, st := range t.targets {
		if st.Knob == gpu.KnobPauseDuty {
			return true
		}
	}
	return false
}

// listsRead is which of a GPU's process lists a snapshot read: a target's
// process missing from them is known gone only where the list that would
// hold it was read (NVML may refuse one and answer another).
type listsRead struct {
	any     bool // the GPU read up, some list of it read
	mps     bool // its MPS clients'
	mpsMode bool // the GPU read in MPS mode
	// every: every list that may hold a process of its tenants: the
	// compute processes' (every MIG device's, in MIG mode), and the MPS
	// clients' too on a GPU in MPS mode
	every bool
	// On a MIG GPU whose lists were read in part: readGI, the GPU
	// instances every list of which was read (none where no instance is
	// marked unread: which is not known), and readMIG, the MIG devices
	// (GPU and compute instance) whose lists were read. A process keeps
	// its context on its MIG device: one last listed in a device read is
	// known gone where it is missing, whichever other device was not
	// read (its handle refused: every instance marked unread, and an
	// instance whose devices were none of them asked not listed at all)
	readGI  map[int]bool
	readMIG map[migDevice]bool
}

// migDevice is a MIG device: its GPU and compute instance.
type migDevice struct{ gi, ci int }

// readLists says which of d's process lists were read.
func readLists(d *gpu.Device) listsRead {
	if !d.Up {
		return listsRead{}
	}
	r := listsRead{any: true, mps: !d.MPSProcessesUnread, every: d.ListsRead(), mpsMode: d.Mode == gpu.SharingMPS}
	if !d.MIGEnabled || !d.ProcessesUnread || !slices.ContainsFunc(d.MIG, func(m gpu.MIGInstance) bool { return m.ProcessesUnread }) {
		return r
	}
	r.readGI, r.readMIG = map[int]bool{}, map[migDevice]bool{}
	for _, m := range d.MIG {
		if !m.ProcessesUnread && m.GPUInstanceID >= 0 {
			r.readGI[m.GPUInstanceID] = true
		}
		for _, ci := range m.ComputeInstancesRead {
			r.readMIG[migDevice{m.GPUInstanceID, ci}] = true
		}
	}
	return r
}

// holds says whether the lists read would hold p's process: an MPS
// client's (a cap's, or one last listed so) in the MPS clients' list, a
// placed process's on a MIG GPU read in part in the list of the MIG
// device it was last listed in (or every list of its GPU instance), any
// other in every list.
func (r listsRead) holds(p procSeen) bool {
	switch {
	case p.tg.Knob == gpu.KnobMPSActiveThreads || p.mps:
		return r.mps
	case p.placed && (r.readGI[p.instance] || r.readMIG[migDevice{p.instance, p.ci}]):
		return true
	}
	return r.every
}

// holdsTenant says whether the lists read would hold the processes of a
// tenant: the MPS clients' list where they were last listed as MPS
// clients only (mpsOnly), else every list.
func (r listsRead) holdsTenant(mpsOnly bool) bool {
	if mpsOnly && r.mpsMode {
		return r.mps
	}
	return r.every
}

// runningProcs returns which process lists of each GPU the snapshot read
// (up) and the processes running on them: their readings' processes and
// their usage's PIDs. A GPU not read, down, is not in up.
func runningProcs(snap *tenant.Snapshot) (up map[string]listsRead, running map[pidKey]bool) {
	// the maps are made at their size (the devices' processes and the
	// usage's PIDs are mostly the same): a map grown entry by entry
	// allocates and rehashes on the way, every round
	procs, pids := 0, 0
	for i := range snap.Readings.Devices {
		procs += len(snap.Readings.Devices[i].Processes)
	}
	for _, u := range snap.Usage {
		pids += len(u.PIDs)
	}
	up, running = make(map[string]listsRead, len(snap.Readings.Devices)), make(map[pidKey]bool, max(procs, pids))
	for i := range snap.Readings.Devices {
		d := &snap.Readings.Devices[i]
		if !d.Up {
			continue
		}
		up[d.UUID] = readLists(d)
		for _, p := range d.Processes {
			running[pidKey{d.UUID, p.PID}] = true
		}
	}
	for _, u := range snap.Usage {
		for _, pid := range u.PIDs {
			running[pidKey{u.UUID, pid}] = true
		}
	}
	return up, running
}

// Forget drops the back-offs of targets in gone.
func (b *Backoff) Forget(gone map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range gone {
		delete(b.state, k)
	}
}

// Forget drops the held values of targets in gone.
func (r *RevertHold) Forget(gone map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range gone {
		delete(r.bad, k)
	}
}

// Forget drops what was asked for targets in gone.
func (r *Retry) Forget(gone map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.asked {
		if tg, _, ok := strings.Cut(k, "="); ok && gone[tg] {
			delete(r.asked, k)
		}
	}
}
