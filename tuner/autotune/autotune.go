// Package autotune is the latency-driven policy, a tuner.Decider: per
// share domain it reserves share for latency tenants that violate their
// SLO by capping, pausing or time-slicing the batch and best-effort
// tenants beside them, and gives it back when every SLO has slack; it
// locks or lowers clocks and power for variance and energy. It decides
// only; the engine (package tuner) guards and applies.
package autotune

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Name is the autotune policy's registered name.
const Name = "autotune"

// Params are the autotune policy's parameters; docs/tuning.md
// explains each and how the defaults were chosen.
type Params struct {
	// ViolateBurn: a latency tenant whose error budget burns faster than
	// this over the fast window (bad fraction / (1 - quantile)) is in
	// violation.
	ViolateBurn float64
	// SlackBurn and SlackRatio: a latency tenant has slack when its fast
	// burn is at most SlackBurn and its SLO window's quantile latency is at
	// most SlackRatio of its target. Between the two thresholds the policy
	// holds (the hysteresis band).
	SlackBurn, SlackRatio float64
	// DeepSlackRatio: below it, clocks and power may be lowered for energy.
	DeepSlackRatio float64
	// Gain, StepMin, StepMax: a violation raises the share reserved for
	// latency tenants by Gain*burn, within [StepMin, StepMax].
	Gain, StepMin, StepMax float64
	// Release is the share given back per step when every SLO has slack;
	// a reservation below ReleaseFloor is released whole.
	Release, ReleaseFloor float64
	// SlackDwell: share is given back only when the GPU's knob has not
	// changed for this long (so the SLO window reflects the setting).
	SlackDwell time.Duration
	// MinRequests: with fewer requests in the fast window the burn is not
	// trusted (a single slow request would swing it).
	MinRequests float64
	// RestartCost is what one MPS client restart costs in seconds of the
	// client's work, for a tenant whose restart_cost is not set. A
	// release is expected to last as long as every SLO has held since the
	// caps last changed (slack that has held for an hour is likely to
	// hold for another), at least Horizon and at most HorizonMax (or
	// twice the restarts' cost where that is longer: a long slack gives
	// back even a costly cap); it is made only when ΔShare/share over
	// that time exceeds twice the cost of the restarts, or once every
	// SLO has held past that longest horizon.
	RestartCost, Horizon, HorizonMax time.Duration
	// CostlyRestart: when restarting the capped tenants costs them at
	// least this, a violation halves their share in one step instead of
	// stepping by Gain*burn, and a release doubles it (fewer restarts).
	// Without the pause, a miss that chance explains while the SLO
	// window is inside its target caps nobody.
	CostlyRestart time.Duration
	// PowerFraction is the power limit used for energy saving, as a
	// fraction of the original limit, on a GPU whose SM clock cannot be
	// lowered (no maximum clock reported).
	PowerFraction float64
	// EnergyStep and EnergyFloor: while every SLO on a GPU without batch
	// work has deep slack, its SM clock is locked lower by EnergyStep of
	// the maximum clock every SlackDwell, down to EnergyFloor of it.
	EnergyStep, EnergyFloor float64
	// VarianceRatio: a violation with p99/p50 above it, on a GPU whose SM
	// clock runs below 97% of its maximum, is blamed on clock changes and
	// answered with a clock lock.
	VarianceRatio float64
	// TrialDwell, TrialGain, TrialHold: a time-slice level tried on a
	// violation is judged after TrialDwell by the GPU's SLO error while it
	// was in effect; it is kept when that error is at least TrialGain
	// (relative) below the previous level's, else undone and not tried
	// again for TrialHold.
	TrialDwell, TrialHold time.Duration
	TrialGain             float64
	// PauseMax, PauseGain, PauseStepMin, PauseStepMax, PauseRelease: the
	// fast loop (pause_duty, where the host can pause a tenant). A
	// violation raises the batch and best-effort tenants' pause duty by
	// PauseGain*burn within [PauseStepMin, PauseStepMax], up to PauseMax;
	// while every SLO has slack it falls by PauseRelease per interval,
	// by PauseAheadRelease where its last raise was one ahead of a load
	// rise (PauseRise) that no miss has confirmed since.
	PauseMax, PauseGain, PauseStepMin, PauseStepMax, PauseRelease, PauseAheadRelease float64
	// PauseWindow: the fast loop judges a latency tenant by the requests
	// that ended over the last PauseWindow (at least MinRequests of them,
	// back to the fast window), and not before the last pause change.
	PauseWindow time.Duration
	// PauseRise: a latency tenant whose requests over the last PauseWindow
	// come PauseRise times as fast as over the minute before, and whose SLO
	// window's quantile has no slack (above SlackRatio of the target), has
	// the batch tenants beside it paused before its requests are late.
	PauseRise float64
	// PauseHandOver: where restarting the batch tenants is costly
	// (CostlyRestart), the part of what a tenant's pause held back that a
	// tightened MPS cap takes over: the pause goes down by that part of
	// the way to what leaves the tenant, under the new cap, the share of
	// the GPU the pause left it under the old one.
	PauseHandOver float64
}

// DefaultParams returns the defaults.
func DefaultParams() Params {
	return Params{
		ViolateBurn: 1, SlackBurn: 0.25, SlackRatio: 0.7, DeepSlackRatio: 0.5,
		Gain: 0.05, StepMin: 0.05, StepMax: 0.2,
		Release: 0.05, ReleaseFloor: 0.15,
		SlackDwell:  2 * time.Minute,
		MinRequests: 20,
		RestartCost: time.Second, Horizon: 2 * time.Minute, HorizonMax: 30 * time.Minute, CostlyRestart: time.Minute,
		PowerFraction: 0.7, VarianceRatio: 1.1,
		EnergyStep: 0.1, EnergyFloor: 0.5,
		TrialDwell: 2 * time.Minute, TrialHold: 10 * time.Minute, TrialGain: 0.1,
		PauseMax: 0.8, PauseGain: 0.1, PauseStepMin: 0.1, PauseStepMax: 0.3, PauseRelease: 0.05, PauseAheadRelease: 0.1,
		PauseWindow: 15 * time.Second, PauseRise: 1.5, PauseHandOver: 0.75,
	}
}

// Autotune is the latency-driven policy: per share domain, it reserves
// share for latency tenants that violate their SLO by capping the batch
// and best-effort tenants beside them, and gives it back when every SLO
// has slack. See docs/tuning.md.
type Autotune struct {
	P     Params
	day   *pauseDaily   // the fast loop's daily pattern (pause.go)
	trail *requestTrail // the fast loop's recent requests (trail.go)
	held  *heldSince    // since when the SLOs have held, per GPU (held.go)
	lows  *clockLows    // when each GPU's clock was last read lowered (dvfs.go)
	seen  *latencySeen  // when each latency tenant was last on each GPU (away.go)
}

// New returns the policy with the default parameters.
func New() *Autotune {
	return &Autotune{P: DefaultParams(), day: &pauseDaily{}, trail: &requestTrail{}, held: &heldSince{}, lows: &clockLows{}, seen: &latencySeen{}}
}

// Name returns "autotune".
func (*Autotune) Name() string { return Name }

// member is one tenant of a share domain.
type member struct {
	name     string
	class    gpu.TenantClass
	priority int
	min, max float64
	restart  time.Duration // what one restart costs it (restart_cost, else the default)
	pids     []uint32
	cur      []tuner.Fraction // per pid: pending, else effective, else 1
	slo      *tenant.SLOStatus
	// signals
	burn, ratio       float64
	hasBurn, hasRatio bool
	violating, slack  bool
	deepSlack         bool
	// unknown: its latency source is down or not read yet, or its requests
	// come below the SLO's min_throughput; it neither violates nor has
	// slack, so the GPU's settings hold (the round says why:
	// tuner.roundInput.budget)
	unknown bool
}

// latency says whether m is a latency tenant with an SLO status, judged
// by it.
func (m *member) latency() bool { return m.class == gpu.ClassLatency && m.slo != nil }

// worseThan says whether m is a worse violator than w (nil: none): a
// higher priority, then a faster burn.
func (m *member) worseThan(w *member) bool {
	return w == nil || m.priority > w.priority || (m.priority == w.priority && m.burn > w.burn)
}

func (m *member) share() float64 {
	s := 0.0
	for _, c := range m.cur {
		s += float64(c)
	}
	return s
}

// Decide computes the actions for every GPU of the snapshot.
func (p *Autotune) Decide(s *tuner.State) []tuner.Action {
	p.trail.forget(s, p.P.PauseWindow)
	p.seen.begin(s.Now)
	var out []tuner.Action
	for _, d := range s.UpDevices() {
		ds := summarize(p.members(s, d))
		acts := p.decideGPU(s, d, ds)
		if why := p.seen.away(s, d.UUID, ds); why != "" {
			// No latency tenant is on the GPU, so each action gives back
			// what the tuner set for one (away.go), and one may be back:
			// held, saying why.
			for i := range acts {
				acts[i].Held = why
			}
		}
		out = append(out, acts...)
	}
	// what the dwell would refuse is held, and says so
	return s.HoldWaiting(out)
}

// decideGPU computes the actions for the GPU d, whose tenants ds sums up.
func (p *Autotune) decideGPU(s *tuner.State, d *gpu.Device, ds domainSignals) []tuner.Action {
	var out []tuner.Action
	switch d.Mode {
	case gpu.SharingMPS:
		// the pause first: the caps cost restarts
		held := p.heldFor(s, d.UUID, ds)
		fast, slow := p.pauses(s, d, ds)
		out = append(out, fast...)
		if slow {
			out = append(out, p.mps(s, d, ds, held)...)
		}
	case gpu.SharingTimeSlice:
		// the level first: it costs no tenant its work
		if ts := p.timeSlice(s, d, ds); len(ts) > 0 {
			out = append(out, ts...)
		} else {
			fast, _ := p.pauses(s, d, ds)
			out = append(out, fast...)
		}
	case gpu.SharingVGPU:
		// the VMs' pause acts now; the scheduler, which changes only
		// while no VM runs, is recommended only where the pause
		// cannot hold the SLO (the slow knobs' gate, as on MPS)
		fast, slow := p.pauses(s, d, ds)
		out = append(out, fast...)
		if slow {
			out = append(out, p.vgpu(s, d, ds)...)
		}
	}
	return append(out, p.clocks(s, d, ds)...)
}

// members returns the tenants on d (outside MIG instances) with their
// signals, sorted by name.
func (p *Autotune) members(s *tuner.State, d *gpu.Device) []*member {
	snap := s.Snapshot
	info := tuner.InfoByName(snap)
	slos := map[string]*tenant.SLOStatus{}
	for i := range snap.SLOs {
		slos[snap.SLOs[i].Tenant] = &snap.SLOs[i]
	}
	procs := map[uint32]*gpu.Process{}
	for i := range d.Processes {
		procs[d.Processes[i].PID] = &d.Processes[i]
	}
	var ms []*member
	for _, u := range snap.Usage {
		if u.UUID != d.UUID || u.GPUInstance != "" {
			continue
		}
		m := &member{name: u.Tenant, class: u.Class, min: 0, max: 1, restart: p.P.RestartCost}
		if in, ok := info[u.Tenant]; ok {
			m.priority, m.min, m.max = in.Priority, in.ShareMin, in.ShareMax
			if in.RestartCost > 0 {
				m.restart = in.RestartCost
			}
			if m.max == 0 {
				m.max = 1
			}
		}
		if u.Tenant == tenant.Unassigned || m.class == "" {
			m.class = gpu.ClassBestEffort
		}
		for _, pid := range u.PIDs {
			pr := procs[pid]
			if d.Mode == gpu.SharingMPS && (pr == nil || pr.Type != gpu.ProcessMPS) {
				continue
			}
			m.pids = append(m.pids, pid)
			var read *float64
			if pr != nil {
				read = pr.MPSActiveThreads
			}
			m.cur = append(m.cur, s.MPSFraction(tuner.Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: pid}, read))
		}
		m.slo = slos[u.Tenant]
		p.signals(s, m)
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	return ms
}

// signals computes a latency tenant's error and slack.
func (p *Autotune) signals(s *tuner.State, m *member) {
	if !m.latency() {
		return
	}
	// A dead source's window empties as its deltas age out, and would
	// read as idle (slack); a window below min_throughput holds too few
	// requests for its quantile; the first read of a tracker (at start, or
	// after a reload restarted its counters) is only a baseline, its
	// window empty however busy the tenant. None says how the tenant is
	// served: nothing is given back, lowered or raised on it.
	if m.unknown = !m.slo.SourceUp || !m.slo.Measured || m.slo.BelowFloor(); m.unknown {
		return
	}
	q := m.slo.Quantile
	if f, ok := s.Fast[m.name]; ok && f.Total >= p.P.MinRequests {
		att, _ := f.Attainment()
		m.burn, m.hasBurn = tuner.Burn(att, q), true
	}
	if m.slo.TargetSeconds > 0 {
		if v, ok := nearestQuantile(m.slo.Quantiles, q); ok {
			m.ratio, m.hasRatio = v/m.slo.TargetSeconds, true
		}
	}
	idle := m.slo.WindowRequests == 0
	m.violating = m.hasBurn && m.burn > p.P.ViolateBurn
	m.slack = idle || (!m.violating && (!m.hasBurn || m.burn <= p.P.SlackBurn) && m.hasRatio && m.ratio <= p.P.SlackRatio)
	m.deepSlack = idle || (m.slack && m.ratio <= p.P.DeepSlackRatio && (!m.hasBurn || m.burn == 0))
}

// nearestQuantile returns the window quantile at or just above q.
func nearestQuantile(qs map[float64]float64, q float64) (float64, bool) {
	best, found := math.Inf(1), false
	var v float64
	for k, x := range qs {
		if k >= q-1e-9 && k < best {
			best, v, found = k, x, true
		}
	}
	return v, found
}

// domainSignals summarizes the latency tenants of a domain.
type domainSignals struct {
	latency []*member
	others  []*member // the batch and best-effort tenants: capped, paused
	// unjudged are the latency tenants without an SLO status (no
	// latency_source, or its tracker not there yet): never capped or
	// paused (a latency tenant's own share is never taken), and with no
	// SLO figure they neither hold the others' settings nor raise them
	unjudged          []*member
	anyViolating      bool
	allSlack, allDeep bool
	worst             *member // the violating tenant that matters most
}

func summarize(ms []*member) domainSignals {
	ds := domainSignals{allSlack: true, allDeep: true}
	for _, m := range ms {
		if m.class == gpu.ClassLatency && m.slo == nil {
			ds.unjudged = append(ds.unjudged, m)
			continue
		}
		if !m.latency() {
			ds.others = append(ds.others, m)
			continue
		}
		ds.latency = append(ds.latency, m)
		ds.allSlack = ds.allSlack && m.slack
		ds.allDeep = ds.allDeep && m.deepSlack
		if m.violating {
			ds.anyViolating = true
			if m.worseThan(ds.worst) {
				ds.worst = m
			}
		}
	}
	if len(ds.latency) == 0 {
		// nothing left to protect: what was reserved goes back as on
		// slack, but no clock is lowered on no evidence
		ds.allDeep = false
	}
	return ds
}

// alone says whether the domain's judged latency tenants are alone on it:
// no batch work, and no latency tenant whose latency is not measured,
// that a lower clock would slow.
func (ds domainSignals) alone() bool { return len(ds.others)+len(ds.unjudged) == 0 }

// slackWhy says why ds has slack: every latency SLO has it, or no latency
// tenant is left.
func (ds domainSignals) slackWhy() string {
	if len(ds.latency) == 0 {
		return "no latency tenant is left on this GPU (its last one lost its SLO, or has had no process on it for its SLO window)"
	}
	return "every latency SLO has slack"
}

// setBy keeps, of ms, the tenants with a client whose setting of the knob
// k on uuid the tuner keeps an original of: on a GPU without latency
// tenants only what the tuner set is given back, never an operator's
// setting. (Originals, not changes: the journal gives them back after a
// restart of the exporter.)
func setBy(s *tuner.State, uuid string, k gpu.Knob, ms []*member) []*member {
	var out []*member
	for _, m := range ms {
		for _, pid := range m.pids {
			if _, ok := s.Originals[tuner.Target{GPU: uuid, Knob: k, PID: pid}.String()]; ok {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// quiet reports whether the GPU's knob k has not changed for d.
func quiet(s *tuner.State, uuid string, k gpu.Knob, d time.Duration) bool {
	c, ok := s.LastChange(tuner.Target{GPU: uuid, Knob: k})
	return !ok || s.Now.Sub(c.At) >= d
}

// mps decides the active-thread caps of an MPS GPU. The controller is
// positional on the caps themselves: the share reserved for latency
// tenants is 1 minus the caps of the others, so there is no integrator to
// wind up; a reservation at its bound stops moving, and the decision says
// so.
func (p *Autotune) mps(s *tuner.State, d *gpu.Device, ds domainSignals, held time.Duration) []tuner.Action {
	if len(ds.latency) == 0 {
		// no latency tenant left: the caps the tuner set go back as on
		// slack, the others' (an operator's) stay (held while one is
		// away: Decide)
		ds.others = setBy(s, d.UUID, gpu.KnobMPSActiveThreads, ds.others)
	}
	if len(ds.others) == 0 {
		return nil
	}
	capOthers, minOthers := 0.0, 0.0
	for _, m := range ds.others {
		capOthers += m.share()
		minOthers += m.floor()
	}
	reserved := math.Max(0, 1-capOthers)
	bound := 1 - minOthers
	costly := restartCost(ds.others) >= p.P.CostlyRestart
	var next float64
	var reason string
	switch {
	case ds.anyViolating:
		w := ds.worst
		floor := 0.0
		for _, m := range ds.latency {
			if m.violating {
				floor += m.min
			}
		}
		step := math.Min(p.P.StepMax, math.Max(p.P.StepMin, p.P.Gain*w.burn))
		next = math.Min(bound, math.Max(reserved, floor)+step)
		if costly && !canPause(s, d.UUID) && chanceMiss(s, w) {
			// a miss chance explains (three standard deviations,
			// Poisson), the SLO window inside its target: not worth a
			// restart that costs the others minutes of work (with the
			// pause, the fast loop answers it at no cost)
			return nil
		}
		if costly && !quiet(s, d.UUID, gpu.KnobMPSActiveThreads, s.Fast[w.name].Over) {
			// the fast window still holds requests served before the
			// last change: wait for it to show that change's effect
			return nil
		}
		if costly {
			// Every step restarts the others and costs them more than
			// an interval of work: halve their share instead, so that
			// a few restarts reach any cap; where they are paused, at
			// least to the share the pause leaves them, in one restart.
			paused := p.pausedDuty(s, d, ds.others)
			next = math.Min(bound, math.Max(next, 1-capOthers*math.Min(0.5, 1-paused)))
		}
		if next <= reserved+1e-9 {
			return nil // at its bound: nothing more to take through MPS (anti-windup)
		}
		reason = fmt.Sprintf("%s violates its SLO (error budget burning %.1fx over the last %v): reserve %.0f%% of the SMs for latency tenants (was %.0f%%), capping batch and best-effort tenants",
			w.name, w.burn, s.Fast[w.name].Over.Round(time.Second), 100*next, 100*reserved)
		if costly {
			reason += fmt.Sprintf(" (their share halved in one step: a restart costs them %v of work)", restartCost(ds.others))
		}
	case reserved > 0 && ds.allSlack && quiet(s, d.UUID, gpu.KnobMPSActiveThreads, p.P.SlackDwell):
		if p.pausedAny(s, d, ds.others) {
			return nil // the pause goes first: a cap is given back once none is left
		}
		next = reserved - p.P.Release
		if costly {
			// the mirror of the violation's halving: their share doubled
			// in one restart
			next = math.Min(next, 1-2*capOthers)
		}
		if next < p.P.ReleaseFloor {
			next = 0
		}
		// Is the release worth the restarts it costs, over as long as
		// the SLOs have held? (At most HorizonMax, or twice the
		// restarts' cost where that is longer.) Slack that has held
		// past that bound gives the cap back whatever the gain: else a
		// cap whose restarts cost more than HorizonMax/2 would be
		// given back only where the release doubles its share exactly
		// (a gain of exactly the cost, which rounding may miss), and
		// never above half a share (which cannot double).
		cost := restartCost(ds.others)
		longest := max(p.P.HorizonMax, p.P.Horizon, 2*cost)
		horizon := min(max(held, p.P.Horizon), longest)
		gain := (reserved - next) / math.Max(1-reserved, 0.05) * horizon.Seconds()
		short := gain < 2*cost.Seconds()*(1-1e-9) // (a tolerance for rounding)
		if short && held < longest {
			return nil
		}
		reason = fmt.Sprintf("%s since the last change over %v ago, and has held for %v: give back %.0f%% of the SMs to batch and best-effort tenants (reserved %.0f%% -> %.0f%%), worth %.0f s of their work over %v against %v of restarts",
			ds.slackWhy(), p.P.SlackDwell, held.Round(time.Second), 100*(reserved-next), 100*reserved, 100*next, gain, horizon.Round(time.Second), cost)
		if short {
			reason += fmt.Sprintf(" (less than twice that, but the SLOs have held past %v, as long as a release is expected to last)", longest)
		}
	default:
		return nil
	}
	acts := p.capOthers(s, d, ds.others, next, reason)
	if len(ds.latency) == 0 {
		// a client of the tenant without an original kept is not the
		// tuner's to give back
		acts = slices.DeleteFunc(acts, func(a tuner.Action) bool {
			_, ok := s.Originals[a.Target.String()]
			return !ok
		})
	}
	return acts
}

// minCap is the smallest cap asked of a client: the smallest whole
// percentage MPS takes (gpu.MPSPercent), with which it still progresses.
// A cap of 0 is no cap (the bounds guard refuses it).
const minCap = 0.01

// floor is the least share m is capped to: its share.min, and at least
// minCap for each of its clients.
func (m *member) floor() float64 {
	return math.Max(m.min, minCap*float64(len(m.pids)))
}

// restartCost is what restarting every client of ms costs in all.
func restartCost(ms []*member) time.Duration {
	var c time.Duration
	for _, m := range ms {
		c += m.restart
	}
	return c
}

// capOthers splits 1-reserved among the non-latency tenants by weight
// (priority+1, batch twice best-effort), within share.min and share.max,
// and returns the actions that set their clients' caps. Each is restarted:
// a cap reaches a client only through a new context.
func (p *Autotune) capOthers(s *tuner.State, d *gpu.Device, others []*member, reserved float64, reason string) []tuner.Action {
	total := 0.0
	weight := func(m *member) float64 {
		w := float64(m.priority + 1)
		if m.class == gpu.ClassBatch {
			w *= 2
		}
		return math.Max(w, 0.1)
	}
	for _, m := range others {
		total += weight(m)
	}
	var out []tuner.Action
	for _, m := range others {
		share := m.max
		if reserved > 0 {
			share = math.Min(m.max, math.Max(m.floor(), (1-reserved)*weight(m)/total))
		}
		if len(m.pids) == 0 {
			continue
		}
		per := tuner.Fraction(math.Round(share/float64(len(m.pids))*1000) / 1000)
		for i, pid := range m.pids {
			t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: pid}
			// (a cap in force at the MPS actuator's resolution is held:
			// 0.125, in force as 0.13, is not asked again)
			if m.cur[i].Distance(s.MPSHeld(t, per)) < 1e-6 || !s.Changeable(t) {
				continue
			}
			out = append(out, tuner.Action{
				Target: t, GPUIndex: d.Index,
				Tenant: m.name, Class: m.class, Current: m.cur[i], Want: per, Restart: true, Relax: per > m.cur[i],
				Reason: reason + "; restarting the client, since MPS applies a cap to new contexts only",
			})
		}
	}
	return out
}

// vgpu decides a vGPU host's scheduler. Best effort and equal share give
// every busy VM the same time; only fixed share weights a VM (by the
// weight its vGPU type gives it, which the scheduler log shows per
// runlist). So on a violation it asks for fixed share where the weights
// differ, and for nothing where they do not. NVML refuses a scheduler
// change while VMs run: the action stays a recommendation (refused, then
// backing off) until the VMs are stopped. See docs/tuning.md.
func (p *Autotune) vgpu(s *tuner.State, d *gpu.Device, ds domainSignals) []tuner.Action {
	t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobVGPUScheduler}
	if len(ds.latency) == 0 || d.Scheduler == nil || !s.Changeable(t) {
		return nil
	}
	// the state in force whole (its original too), the change its policy
	// alone, the time slice kept where it applies (WithPolicy)
	cur := tuner.SchedulerOf(d.Scheduler)
	a := tuner.Action{Target: t, GPUIndex: d.Index, Current: cur}
	ws := runlistWeights(d.Scheduler.Log)
	switch {
	case ds.anyViolating && cur.Policy != gpu.VGPUPolicyFixedShare && weighted(ws):
		a.Want = cur.WithPolicy(gpu.VGPUPolicyFixedShare)
		a.Reason = fmt.Sprintf("%s violates its SLO (burn %.1fx); the scheduler log's runlists carry the weights %s: fixed-share scheduling gives each VM time in proportion to its weight, where %s gives every busy VM the same, so it helps a latency VM whose weight is above the mean %.2g (NVML does not say which runlist is which VM); %s",
			ds.worst.name, ds.worst.burn, weightsText(ws), cur.Policy, meanWeight(ws), vgpuNote)
	case ds.allSlack && cur.Policy == gpu.VGPUPolicyEqualShare && quiet(s, d.UUID, gpu.KnobVGPUScheduler, p.P.SlackDwell):
		a.Want, a.Relax = cur.WithPolicy(gpu.VGPUPolicyBestEffort), true
		a.Reason = "every latency SLO has slack: best-effort scheduling lets idle slots be used"
	default:
		return nil
	}
	return []tuner.Action{a}
}
