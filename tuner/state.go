package tuner

import (
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// State is everything a policy decides from: the latest snapshot and what
// the tuner's journal and memory know about earlier changes. It is pure
// data; a policy must not modify it.
type State struct {
	Now      time.Time
	Snapshot *tenant.Snapshot
	// Changes is the last change applied to each GPU and knob
	// (Target.DomainKey), and to each process knob (Target.String).
	Changes map[string]Change
	// Pending are MPS active-thread fractions set for a process but not yet
	// effective: MPS applies a fraction to contexts created after the call,
	// so it waits for the client's next restart. Keyed by Target.String.
	Pending map[string]Fraction
	// Effective are MPS fractions of running contexts as the MPS actuator
	// knows them, for hosts whose readings do not report them (a
	// process's gpu.Process.MPSActiveThreads comes first). Keyed by
	// Target.String.
	Effective map[string]Fraction
	// Originals are the settings found before the tuner's first change to
	// each knob (Target.String), as journaled.
	Originals map[string]Value
	// Paused is, per GPU and tenant (PauseKey), the pause_duty target the
	// tuner holds an original for: a pause is set on a tenant as a whole,
	// and the process its target names may be gone (a client restarted
	// to take a new MPS cap runs under a new PID), so a policy goes on
	// with that target (PauseTarget) rather than a new one beside it.
	Paused map[string]Target
	// Fast is each latency tenant's requests over the recent past
	// (FastWindow), from the differences of its request counters: a
	// quicker error signal than the SLO window's quantiles.
	Fast map[string]FastSLO
	// History is, per GPU and knob (Target.DomainKey), the changes
	// applied to it, oldest first (the last maxHistory), each with the
	// request counters of the host's latency tenants when it was made: the
	// policy's own trail, from which it measures the SLO error each
	// setting had while it was in effect.
	History map[string][]Change
	// Drives are the knobs this host's actuators set, each true where the
	// operator has not disabled it (--tuner.disable-knob, or an opt-in
	// knob not enabled): a policy keeps to the others where a knob is
	// missing (pause_duty needs a freezer), and a knob at false is not
	// available on any GPU (Available).
	Drives map[gpu.Knob]bool
	// Knobs are, by GPU UUID, the knobs of the tuner (CountedKnobs, in
	// order) with whether the host's backends can turn each one on that
	// GPU this round: the lists the executor refuses a change by ("refused,
	// not tried"), asked of the backends once a round. A policy proposes
	// no change the executor would refuse so (Changeable), and turns to
	// another remedy instead.
	Knobs map[string][]KnobAvailability
	// Waits are the GPU knobs (Target.DomainKey) whose change the guard
	// chain refuses at Now, a revert excepted, as the round starts: the
	// dwell after the last change (Pacer). A policy holds such a change
	// (HoldWaiting) instead of proposing what would be refused.
	Waits map[string]Wait
	// Modes are, by GPU UUID, the tuner's mode on each GPU the snapshot
	// lists (the host's, or the GPU's own: --tuner.gpu-mode). The
	// executor makes a plan in the safest mode of the GPUs it changes, so
	// the slow loop moves a tenant only where the mode of the GPU it
	// leaves allows (Receives).
	Modes map[string]Mode
	// MPSResolver is the MPS actuator's resolution (MPSHeld), where it has
	// one; nil: it holds any fraction (the simulator's).
	MPSResolver MPSResolver
}

// Available says whether the tuner may turn knob k on the GPU uuid this
// round: not where the operator has switched it off (Drives false; the
// tuner drops every action on it), nor where the host's backends cannot
// turn it there (Knobs): no backend drives it, or every backend of its
// mechanisms lists its knobs there and none lists it. Where the state
// holds no answer for the GPU or the knob, it is available: not knowing
// is not "no".
func (s *State) Available(uuid string, k gpu.Knob) bool {
	a, off, found := s.knob(uuid, k)
	return !off && (!found || a.Available)
}

// knob is what the state says of knob k on the GPU uuid: whether the
// operator switched it off (Drives false), and its availability there
// where the state holds one (found).
func (s *State) knob(uuid string, k gpu.Knob) (a KnobAvailability, off, found bool) {
	if on, ok := s.Drives[k]; ok && !on {
		off = true
	}
	for _, a := range s.Knobs[uuid] {
		if a.Knob == k {
			return a, off, true
		}
	}
	return KnobAvailability{}, off, false
}

// Receives says whether the slow loop may plan a move of a tenant from
// the GPU from onto the GPU to: neither is in off, and to is in enforce
// where from is (a move onto a GPU in a safer mode would be made in that
// mode: recommended only, or dropped). A GPU the state holds no mode for
// (none: a state not built by a round) is left to the executor.
func (s *State) Receives(from, to string) bool {
	f, fok := s.Modes[from]
	m, tok := s.Modes[to]
	if fok && tok {
		// the move is made in the safer of the two (actionMode)
		safer := saferMode(f, m)
		return safer == f && safer != ModeOff
	}
	return !(fok && f == ModeOff || tok && m == ModeOff)
}

// Plannable says whether the slow loop may plan a change of knob k on
// the GPU uuid: not where the operator switched it off (Drives false), nor
// where a backend drives it but does not list it for the GPU (the
// executor would refuse it untried). One no backend drives is planned all
// the same: with no rebalancing hook a plan is a recommendation, in
// enforce too, and that is what the operator asked the slow loop for.
// (Drives names only the knobs a backend drives: a plan of a switched-off
// knob nothing drives is dropped by the tuner, Tuner.switchedOff.)
func (s *State) Plannable(uuid string, k gpu.Knob) bool {
	a, off, found := s.knob(uuid, k)
	return !off && (!found || !a.Driven || a.Available)
}

// Changeable says whether a change of t that is not a revert can be made
// this round: its knob is available on its GPU (Available; the tuner
// drops an action on a disabled knob, the executor refuses untried a
// change its backends' lists leave out, and a knob no backend drives is
// not supported), or the tuner keeps t's original, which the executor
// lets through whatever the lists say (what the tuner changed, it sets
// back; on a disabled knob the tuner drops that change too).
func (s *State) Changeable(t Target) bool {
	if _, kept := s.Originals[t.String()]; kept {
		return true
	}
	return s.Available(t.GPU, t.Knob)
}

// Wait is a knob's wait after its last change: the guard Guard refuses a
// change of it that is not a revert until Until.
type Wait struct {
	Guard string
	Knob  gpu.Knob
	// Since is when the knob last changed.
	Since, Until time.Time
	// Running is a change whose hook still runs (hooks.go): the wait
	// lasts until its outcome, whatever Until.
	Running bool
}

// Reason is the holding reason at now: "dwell: mps_active_threads changed
// 15s ago, next change allowed in 5s".
func (w Wait) Reason(now time.Time) string {
	if w.Running {
		return fmt.Sprintf("%s: %s changed %v ago and its hook still runs, next change allowed after its outcome", w.Guard, w.Knob,
			now.Sub(w.Since).Round(time.Second))
	}
	return fmt.Sprintf("%s: %s changed %v ago, next change allowed in %v", w.Guard, w.Knob,
		now.Sub(w.Since).Round(time.Second), w.Until.Sub(now).Round(time.Second))
}

// HoldWaiting marks every action of a knob in its wait (Waits), reverts
// excepted, as held (Action.Held) with the wait's reason: the guard chain
// would refuse it this round.
func (s *State) HoldWaiting(actions []Action) []Action {
	for i := range actions {
		a := &actions[i]
		if w, ok := s.Waits[a.DomainKey()]; ok && !a.Revert && a.Held == "" && (w.Running || s.Now.Before(w.Until)) {
			a.Held = w.Reason(s.Now)
		}
	}
	return actions
}

// Change is one applied change.
type Change struct {
	At   time.Time
	From Value
	To   Value
	// Revert marks a change that undid an earlier one.
	Revert bool
	// Error is the GPU's SLO error (objective) over the fast window when
	// the change was made, that is under From.
	Error float64
	// Counters are the latency tenants' cumulative request counters (with
	// their trackers' Epochs) when the change was made; nil when unknown.
	Counters map[string]RequestCount
}

// RequestCount is a tenant's cumulative request counters, and the
// tracker that counts them (latency.Status.Epoch): two RequestCounts of a
// tenant differ by the requests in between only where their Epochs are
// equal (Since).
type RequestCount struct {
	Total, Good float64
	Epoch       uint64
}

// Since is what c counted since then: false where the tenant's counters
// started over in between (StartedOver), or they went back.
func (c RequestCount) Since(then RequestCount) (RequestCount, bool) {
	d := RequestCount{Total: c.Total - then.Total, Good: c.Good - then.Good, Epoch: c.Epoch}
	return d, !c.StartedOver(then) && d.Total >= 0 && d.Good >= 0 && d.Good <= d.Total
}

// StartedOver is whether the tenant's counters started over between then
// and c: a reload restarted them (another Epoch), or a counter went down
// (a source restarted).
func (c RequestCount) StartedOver(then RequestCount) bool {
	return c.Epoch != then.Epoch || c.Total < then.Total || c.Good < then.Good
}

// maxHistory is how many changes State.History keeps per GPU and knob.
const maxHistory = 16

// RequestCounts returns the cumulative request counters of every tenant
// whose latency source counts good requests.
func RequestCounts(snap *tenant.Snapshot) map[string]RequestCount {
	if snap == nil {
		return nil
	}
	out := map[string]RequestCount{}
	for _, s := range snap.SLOs {
		if s.GoodKnown {
			out[s.Tenant] = RequestCount{Total: s.RequestsTotal, Good: s.GoodRequestsTotal, Epoch: s.Epoch}
		}
	}
	return out
}

// FastSLO is a tenant's requests over the recent past.
type FastSLO struct {
	Over  time.Duration
	Total float64
	Good  float64
}

// Attainment is good/total within [0, 1], and false when no request
// ended. Counters that ever said more good requests than requests (or
// fewer than none) would otherwise read as slack beyond any target, or a
// burn below zero.
func (f FastSLO) Attainment() (float64, bool) {
	if f.Total <= 0 {
		return 0, false
	}
	return max(0, min(1, f.Good/f.Total)), true
}

// LastChange returns the last change of a GPU's knob (any process).
func (s *State) LastChange(t Target) (Change, bool) {
	c, ok := s.Changes[t.DomainKey()]
	return c, ok
}

// counterPoint is one sample of a tenant's request counters.
type counterPoint struct {
	at time.Time
	c  RequestCount
}

// fastTracker keeps each tenant's request counters over the fast window
// and turns them into FastSLO figures.
type fastTracker struct {
	window time.Duration
	points map[string][]counterPoint
}

func newFastTracker(window time.Duration) *fastTracker {
	return &fastTracker{window: window, points: map[string][]counterPoint{}}
}

// observe adds the snapshot's counters and returns the figures over the
// window. A tenant whose counters started over (RequestCount.StartedOver)
// starts over.
func (f *fastTracker) observe(now time.Time, snap *tenant.Snapshot) map[string]FastSLO {
	if snap == nil {
		return map[string]FastSLO{}
	}
	out := make(map[string]FastSLO, len(snap.SLOs)) // at its size: see runningProcs
	for _, s := range snap.SLOs {
		if !s.GoodKnown {
			continue
		}
		c := RequestCount{Total: s.RequestsTotal, Good: s.GoodRequestsTotal, Epoch: s.Epoch}
		ps := f.points[s.Tenant]
		if n := len(ps); n > 0 && c.StartedOver(ps[n-1].c) {
			ps = nil
		}
		ps = append(ps, counterPoint{at: now, c: c})
		// Keep the newest point at or before now-window as the base.
		i := 0
		for i+1 < len(ps) && !ps[i+1].at.After(now.Add(-f.window)) {
			i++
		}
		ps = ps[i:]
		f.points[s.Tenant] = ps
		base, last := ps[0], ps[len(ps)-1]
		out[s.Tenant] = FastSLO{Over: last.at.Sub(base.at), Total: last.c.Total - base.c.Total, Good: last.c.Good - base.c.Good}
	}
	// a tenant unseen for fastForget windows (removed by a reload, a
	// namespace gone under pod tenancy) is forgotten: it starts over if
	// it comes back
	for name, ps := range f.points {
		if len(ps) == 0 || now.Sub(ps[len(ps)-1].at) > fastForget*f.window {
			delete(f.points, name)
		}
	}
	return out
}

// fastForget is how many fast windows a tenant's counters are kept while
// the snapshots show none of them.
const fastForget = 10

// InfoByName indexes a snapshot's tenants by name.
func InfoByName(snap *tenant.Snapshot) map[string]tenant.Info {
	info := make(map[string]tenant.Info, len(snap.Tenants))
	for _, t := range snap.Tenants {
		info[t.Name] = t
	}
	return info
}

// UpDevices are the GPUs of the state's snapshot that answered, in the
// readings' order; none without a snapshot.
func (s *State) UpDevices() []*gpu.Device {
	if s == nil || s.Snapshot == nil || s.Snapshot.Readings == nil {
		return nil
	}
	var up []*gpu.Device
	for i := range s.Snapshot.Readings.Devices {
		if d := &s.Snapshot.Readings.Devices[i]; d.Up {
			up = append(up, d)
		}
	}
	return up
}

// MPSFraction is the active-thread fraction of the MPS client t as the
// tuner knows it: a fraction set and pending; else read, its reading (nil:
// none); else what the MPS actuator says is in effect; else 1, MPS's own
// default for a client nobody capped: all that its server gives (the SMs,
// or the server's active-thread percentage where it runs below 100%, to
// which the MPS controller sets a client back for 1). Where the readings say
// nothing (NVML reads no fraction), a policy thus asks for a change once,
// its original journaled and set back at exit, instead of at every retry
// as from an unknown fraction, restarting the client each time.
func (s *State) MPSFraction(t Target, read *float64) Fraction {
	// (the target's key is built only for a map that may hold it: a
	// round asks of every client, and the maps are mostly empty)
	if len(s.Pending) > 0 {
		if f, ok := s.Pending[t.String()]; ok {
			return f
		}
	}
	if read != nil {
		return Fraction(*read)
	}
	if len(s.Effective) > 0 {
		if f, ok := s.Effective[t.String()]; ok {
			return f
		}
	}
	return 1
}

// MPSHeld is the fraction the MPS client t runs with once f is set for it
// and it is restarted, as the MPS actuator holds it (MPSResolver: the MPS
// controller's whole percentage, at most the client's server's value); f
// itself where the actuator holds any fraction. A policy compares it, not
// f, with the client's fraction (MPSFraction): a cap the actuator already
// holds at its resolution, 0.125 in force as 0.13, is not asked again,
// restarting the client at every round.
func (s *State) MPSHeld(t Target, f Fraction) Fraction {
	if s == nil || s.MPSResolver == nil {
		return f
	}
	return Fraction(s.MPSResolver.HeldFraction(t.GPU, t.PID, float64(f)))
}
