package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A paused tenant is the one setting that must never outlive the reason
// for it: its processes stop. Beyond the restore at exit and after a crash
// that every knob has, the executor thaws a tenant (sets its pause duty
// back to 0) whenever the tuner may no longer act on it: at the first
// round whatever the mode (a journal from an earlier run that crashed
// names it), while the kill switch is engaged, and on a GPU whose mode is
// not enforce; and wherever the reason is gone: a pause set on a GPU the
// tenant has left (moved to another GPU) would follow it there, since a
// tenant is paused as a whole; a tenant whose processes a reload gave to
// another tenant has nothing left to pause for; a pause whose groups came
// to hold another tenant's process would stop it too (pausegroups.go).

// thawPauses sets back to 0 the pause duties the tuner (or an earlier run,
// per the journal) set and may not keep now; first is the first round.
func (t *Tuner) thawPauses(ctx context.Context, now time.Time, first bool) []Decision {
	stopped := t.chain().Stopped()
	whys := map[string]string{}
	t.sharedNow = map[string]string{} // (checked again each round)
	for k, o := range t.originals {
		if o.Target.Knob != gpu.KnobPauseDuty {
			continue
		}
		if why := t.thawWhy(k, o, first, stopped, now); why != "" {
			whys[k] = why
		}
	}
	keys := slices.Sorted(maps.Keys(whys))
	var out []Decision
	for _, k := range keys {
		o, why := t.originals[k], whys[k]
		a := Action{Target: o.Target, Tenant: o.Tenant, PIDs: o.PIDs, Want: Duty(0), Revert: true, Reason: why}
		a, why = t.samePaused(a, o, why) // (a PID another's by now passed over)
		err := t.apply(ctx, a)
		why, cerr := t.thawCgroups(ctx, a, o, why) // (a cgroup no PID names now thawed)
		err = errors.Join(err, cerr)
		d := Decision{Time: now, GPU: o.Target.GPU, Tenant: o.Tenant, Knob: o.Target.Knob, From: t.lastSet(k), To: Duty(0).String(), Reason: why}
		if err != nil {
			d.Outcome, d.Reason = OutcomeFailed, joinReasons(why, "thaw failed: "+err.Error())
			t.counts.RestoreFailures++
			t.noteRestoreFailed(k)
			t.journal(restoreRecord(EventRestoreFailed, o, now, err.Error()))
			level.Error(t.o.Logger).Log("msg", "tuner could not thaw a paused tenant", "target", o.Target.String(), "gpu", o.Target.GPU, "tenant", o.Tenant, "from", orUnknown(d.From), "reason", why, "next", t.nextThaw(k), "err", err)
		} else {
			d.Outcome, d.Applied = OutcomeRestored, true
			t.counts.Restores++
			t.journal(restoreRecord(EventRestored, o, now, why))
			level.Info(t.o.Logger).Log("msg", "tuner thawed a paused tenant", "target", o.Target.String(), "tenant", o.Tenant, "from", orUnknown(d.From), "reason", why)
			t.dropOriginal(k)
			thawed := Action{Target: o.Target, GPUIndex: t.indexOf(o.Target.GPU), Tenant: o.Tenant, Want: Duty(0), Revert: true}
			t.noteApplied(nil, thawed, now)
			t.setTarget(thawed, ModeEnforce) // (0: the gauge and the page show no pause)
			t.thawedNow()                    // (the caps that waited for the thaw)
		}
		out = append(out, d)
	}
	return out
}

// thawWhy is why the pause in force o (key k) is thawed this round; ""
// where it may stay. The reasons are taken in order, each asked only where
// none before it holds (a group check reads the pause actuator).
func (t *Tuner) thawWhy(k string, o Original, first, stopped bool, now time.Time) string {
	switch {
	case first:
		return "thawed at start (a pause found in the journal)"
	case t.leftThaw(k, o):
		return whyThawAgain
	case stopped:
		return "thawed: kill switch engaged"
	case t.modeOf(o.Target.GPU, t.indexOf(o.Target.GPU)) != ModeEnforce:
		return "thawed: the tuner no longer acts on this GPU"
	case latencyNow(t.last, o.Tenant):
		return "thawed: " + o.Tenant + " is a latency tenant now, which is never paused"
	}
	if shared := t.inForceShared(o.Tenant); shared != "" {
		return "thawed: " + sharedText(shared)
	}
	moved := reattributed(t.last, o)
	switch {
	case moved != "":
		return fmt.Sprintf("thawed: the processes paused for %s are %s's now (the tenants configuration changed), and %s has none on any GPU", o.Tenant, moved, o.Tenant)
	case t.left(k, o):
		return "thawed: " + o.Tenant + " no longer runs on this GPU (it runs on another), where the pause would follow it"
	case t.unseenFor(k, o, now) >= unseenThaw:
		return fmt.Sprintf("thawed: no process of %s to pause (on a vGPU host, its VM's process on the host) seen on any GPU for %v: the groups it was paused by are gone, and a process group's number is taken again", o.Tenant, unseenThaw)
	}
	return ""
}

// lastSet is the value this run last set k to, as text: what a restore
// sets back from. Where this run set none (an original found in the
// journal, a pause a crashed run left), it is the value the journal holds
// as last set, said to be the journaled one (not a reading); "" where the
// journal holds none either.
func (t *Tuner) lastSet(k string) string {
	v, journaled := t.lastSetValue(k)
	switch {
	case v == nil:
		return ""
	case journaled:
		return v.String() + " (last set, as journaled)"
	}
	return v.String()
}

// lastSetValue is the value this run last set k to or, where it set none,
// the one the journal holds as last set (journaled); nil where neither.
func (t *Tuner) lastSetValue(k string) (v Value, journaled bool) {
	if v := t.changes[k].To; v != nil {
		return v, false
	}
	return t.originals[k].Set, true
}

// latencyNow says whether snap classes tenant as a latency tenant.
func latencyNow(snap *tenant.Snapshot, name string) bool {
	if snap == nil {
		return false
	}
	in, ok := InfoByName(snap)[name]
	return ok && in.Class == gpu.ClassLatency
}

// widenHeld journals, before a change that stops processes (a pause above
// 0) is set on processes its original does not name yet (with always,
// whatever they are), the processes of both (a processes record), so that
// after a crash the restore lets go whatever the apply may have stopped;
// an error where the record cannot be written (the change is then not
// made).
func (t *Tuner) widenHeld(a Action, now time.Time, always bool) error {
	k := a.Target.String()
	o, ok := t.originals[k]
	h, holds := holdOf(a.Knob)
	if !holds || !ok || h.releases(a) {
		return nil
	}
	pids := h.pids(a)
	if len(pids) == 0 {
		return nil
	}
	wide := slices.Clone(o.PIDs)
	for _, p := range pids {
		if !slices.Contains(wide, p) {
			wide = append(wide, p)
		}
	}
	if len(wide) == len(o.PIDs) && !always {
		return nil
	}
	slices.Sort(wide)
	id := t.identityFor(o, wide)
	if id.Boot != "" && id.Boot == o.Boot {
		var left []gpu.Cgroup
		id.Cgroups, left = unionCgroups(id.Cgroups, o.Cgroups) // (those about to be frozen first, then those frozen now, until the change is made)
		t.noteCgroupsLeftOut(wide, id.Cgroups, left)
	}
	if err := t.journal(Record{Time: now, Event: EventProcesses, Target: o.Target, Tenant: o.Tenant, PIDs: wide, Identity: id}); err != nil {
		return fmt.Errorf("the processes to pause could not be journaled: %w", err)
	}
	o.PIDs, o.Identity = wide, id
	t.originals[k] = o
	return nil
}

// noteHeld keeps, after a change that stops processes took, the processes
// it stopped as its original's, journaled (where the record cannot be
// written, the wider list widenHeld journaled stays). A change that lets
// them go (a thaw) leaves the original's processes, for the restore.
func (t *Tuner) noteHeld(a Action, now time.Time) {
	k := a.Target.String()
	o, ok := t.originals[k]
	h, holds := holdOf(a.Knob)
	if !holds || !ok || h.releases(a) {
		return
	}
	pids := h.pids(a)
	if len(pids) == 0 || slices.Equal(o.PIDs, pids) {
		return
	}
	id := t.identityFor(o, pids)
	if t.journal(Record{Time: now, Event: EventProcesses, Target: o.Target, Tenant: o.Tenant, PIDs: pids, Identity: id}) != nil {
		return
	}
	o.PIDs, o.Identity = slices.Clone(pids), id
	t.originals[k] = o
}

// followPauses sets each tenant's pause in force again on its processes
// where they changed since it was set (a client restarted, a process
// started or gone): the pause holds the tenant's new processes, and the
// groups it left are thawed by the actuator. The policy need not change
// the duty for it, and the guards are not asked (the setting stays what
// it was; a tenant classed latency now is thawed by thawPauses first).
// Each follow is journaled and logged, and shows among the decisions; it
// is not counted among the policy's actions. A follow that fails is tried
// again after followRetryFirst, doubled each failure up to followRetryMax.
func (t *Tuner) followPauses(ctx context.Context, now time.Time) []Decision {
	if t.last == nil || t.chain().Stopped() {
		return nil
	}
	var out []Decision
	for _, k := range slices.Sorted(maps.Keys(t.originals)) {
		o := t.originals[k]
		if o.Target.Knob != gpu.KnobPauseDuty || o.Tenant == "" || t.modeOf(o.Target.GPU, t.indexOf(o.Target.GPU)) != ModeEnforce {
			continue
		}
		duty, _ := t.changes[k].To.(Duty)
		pids := PausePIDs(t.last, o.Tenant)
		if duty <= 0 || len(pids) == 0 || slices.Equal(pids, o.PIDs) || now.Before(t.followAt[k].at) || t.ending[k] ||
			elsewhere(t.last, o.Tenant, o.Target.GPU) || latencyNow(t.last, o.Tenant) {
			continue // (a tenant on other GPUs only, or classed latency, is thawed, never followed)
		}
		if t.inForceShared(o.Tenant) != "" {
			continue // (thawPauses thaws it, or tries again)
		}
		why := fmt.Sprintf("%s's processes changed (%s -> %s): its pause of %s follows them", o.Tenant, pidsText(o.PIDs), pidsText(pids), duty)
		a := Action{Target: o.Target, GPUIndex: t.indexOf(o.Target.GPU), Tenant: o.Tenant, PIDs: pids, Current: duty, Want: duty, Reason: why}
		d := Decision{Time: now, GPU: o.Target.GPU, Tenant: o.Tenant, Knob: o.Target.Knob, From: duty.String(), To: duty.String(), Reason: why}
		err := t.widenHeld(a, now, true)
		if err == nil {
			err = t.apply(ctx, a)
		}
		if err != nil {
			d.Outcome, d.Reason = OutcomeFailed, joinReasons(why, "not followed: "+err.Error())
			t.followFailed(k, now)
			level.Warn(t.o.Logger).Log("msg", "tuner could not pause a tenant's new processes", "target", k, "tenant", o.Tenant, "pids", pidsText(pids), "retry_in", t.followAt[k].wait, "err", err)
		} else {
			d.Outcome, d.Applied = OutcomeApplied, true
			delete(t.followAt, k)
			t.noteHeld(a, now)
			level.Info(t.o.Logger).Log("msg", "tuner pause follows a tenant's processes", "target", k, "tenant", o.Tenant, "pids", pidsText(pids))
		}
		t.journal(Record{Time: now, Event: string(d.Outcome), Target: o.Target, Tenant: o.Tenant, From: encodeValue(duty), To: encodeValue(duty), Reason: d.Reason, PIDs: pids})
		out = append(out, d)
	}
	return out
}

// releaseFailed marks the pause k, whose thaw failed, as not to be
// followed until a change of it takes.
func (t *Tuner) releaseFailed(k string) {
	if t.ending == nil {
		t.ending = map[string]bool{}
	}
	t.ending[k] = true
}

// A follow that failed waits followRetryFirst before the next try, twice
// as long after each failure, up to followRetryMax.
const (
	followRetryFirst = 15 * time.Second
	followRetryMax   = 5 * time.Minute
)

// followRetry is when a failed follow is tried again, and the wait that
// led there.
type followRetry struct {
	at   time.Time
	wait time.Duration
}

// followFailed backs the follow of the original k (a pause's, or an MPS
// client's to its successor) off after a failure.
func (t *Tuner) followFailed(k string, now time.Time) {
	if t.followAt == nil {
		t.followAt = map[string]followRetry{}
	}
	w := followRetryFirst
	if r, ok := t.followAt[k]; ok {
		w = min(2*r.wait, followRetryMax)
	}
	t.followAt[k] = followRetry{at: now.Add(w), wait: w}
}

// pidsText is a list of PIDs as "pid 1, 2" ("no pid" for none).
func pidsText(pids []uint32) string {
	if len(pids) == 0 {
		return "no pid"
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.FormatUint(uint64(p), 10)
	}
	return "pid " + strings.Join(s, ", ")
}

// PausePIDs lists the processes a tenant is paused by, on every GPU,
// sorted: a tenant is paused as a whole. Where its usage is on a vGPU host
// they are its VMs' processes on the host (none where they are not known):
// the PIDs of the processes in a VM are the guest's, and the host's
// process of the same number is someone else's, so they are never taken,
// whichever GPU the pause is decided for.
func PausePIDs(snap *tenant.Snapshot, name string) []uint32 {
	var out []uint32
	for _, u := range snap.Usage {
		if u.Tenant != name {
			continue
		}
		for _, pid := range pausable(snap, u) {
			if !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out
}

// PausableTenants are the tenants with a process to pause (those whose
// PausePIDs are some), the same for every GPU.
func PausableTenants(snap *tenant.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, u := range snap.Usage {
		if len(pausable(snap, u)) > 0 {
			out[u.Tenant] = true
		}
	}
	return out
}

// pausable are the processes of u that a pause freezes: its GPU
// processes, or on a vGPU host its VM's process on the host.
func pausable(snap *tenant.Snapshot, u tenant.Usage) []uint32 {
	if onVGPUHost(snap, u.UUID) {
		return u.VMPIDs
	}
	return u.PIDs
}

// onVGPUHost says whether the GPU of UUID uuid is a vGPU host's.
func onVGPUHost(snap *tenant.Snapshot, uuid string) bool {
	if snap.Readings == nil {
		return false
	}
	for i := range snap.Readings.Devices {
		if d := &snap.Readings.Devices[i]; d.UUID == uuid {
			return d.Mode == gpu.SharingVGPU
		}
	}
	return false
}

// left says whether the pause original o (key k) is on a GPU its tenant
// has left: the latest snapshot shows the tenant on other GPUs and not on
// o's, after the slow loop moved it since the pause was set, or for
// leftRounds rounds in a row (a tenant moved by someone else; not one
// whose processes on o's GPU are missing for a round while a client
// restarts, nor one seen nowhere, between a stop and a start).
func (t *Tuner) left(k string, o Original) bool {
	if t.last == nil || o.Tenant == "" || !elsewhere(t.last, o.Tenant, o.Target.GPU) {
		delete(t.gone, k)
		return false
	}
	if t.gone == nil {
		t.gone = map[string]int{}
	}
	t.gone[k]++
	moved, ok := t.reb.moved[o.Tenant]
	return t.gone[k] >= leftRounds || (ok && moved.After(t.changes[k].At))
}

// unseenFor is how long the tenant of the pause original o (key k) has
// had no process on any GPU, as of now (0 while it has one).
func (t *Tuner) unseenFor(k string, o Original, now time.Time) time.Duration {
	if t.last == nil || o.Tenant == "" || len(PausePIDs(t.last, o.Tenant)) > 0 {
		t.unseen.Seen(k)
		return 0
	}
	return t.unseen.For(k, now)
}

// reattributed is the tenant snap gives a process paused for o's tenant
// where that tenant has no process on any GPU: a reload of the tenants
// file removed or renamed it, or moved its processes to another tenant
// (unassigned among them), and the pause, which the policy set for it,
// no longer has a tenant to hold. "" otherwise: a tenant still running
// keeps its pause even where one of its PIDs was taken by another's process.
func reattributed(snap *tenant.Snapshot, o Original) string {
	if snap == nil || o.Tenant == "" || len(PausePIDs(snap, o.Tenant)) > 0 {
		return ""
	}
	for _, u := range snap.Usage {
		if slices.ContainsFunc(pausable(snap, u), func(pid uint32) bool { return slices.Contains(o.PIDs, pid) }) {
			return u.Tenant
		}
	}
	return ""
}

// unseenThaw is how long a paused tenant may have no process on any GPU
// before its pause is thawed: longer than a client restart takes to
// bring its process back, short enough that a process group number the
// pause still holds is unlikely to be taken by another's.
const unseenThaw = 2 * time.Minute

// leftRounds is how many rounds in a row a tenant runs only on other GPUs
// before a pause on its old one is thawed without a move of the slow
// loop's to say so.
const leftRounds = 2

// elsewhere says whether snap shows tenant on some GPU and not on uuid.
func elsewhere(snap *tenant.Snapshot, name, uuid string) bool {
	seen := false
	for _, u := range snap.Usage {
		if u.Tenant != name || len(u.PIDs) == 0 {
			continue
		}
		if u.UUID == uuid {
			return false
		}
		seen = true
	}
	return seen
}

// indexOf is the index of the GPU with this UUID in the latest snapshot,
// or -1.
func (t *Tuner) indexOf(uuid string) int {
	if t.last == nil || t.last.Readings == nil {
		return -1
	}
	for _, d := range t.last.Readings.Devices {
		if d.UUID == uuid {
			return d.Index
		}
	}
	return -1
}

// PauseKey is the key of State.Paused for tenant on the GPU uuid.
func PauseKey(uuid, tenant string) string { return uuid + "/" + tenant }

// PauseTarget returns the pause_duty target the tuner holds for tenant on
// the GPU uuid, false where it holds none.
func (s *State) PauseTarget(uuid, tenant string) (Target, bool) {
	t, ok := s.Paused[PauseKey(uuid, tenant)]
	return t, ok
}

// PauseDuty is a tenant's pause duty now, as the tuner set it: the last
// change to its target while the tuner holds an original for it, else 0.
func (s *State) PauseDuty(tg Target) Duty {
	if _, ok := s.Originals[tg.String()]; !ok {
		return 0
	}
	if c, ok := s.Changes[tg.String()]; ok {
		if d, ok := c.To.(Duty); ok {
			return d
		}
	}
	return 0
}

// drives lists the knobs the bound actuators set, each true unless the
// operator disabled it (Options.Disabled).
func (t *Tuner) drives() map[gpu.Knob]bool {
	out := map[gpu.Knob]bool{}
	for _, k := range t.o.Actuators.Knobs() {
		out[k] = !slices.Contains(t.o.Disabled, k)
	}
	return out
}
