package autotune

import (
	"fmt"
	"math"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop: where the host can pause a tenant (pause_duty), autotune
// answers a violation (not one chance explains: verdict) by pausing the
// batch and best-effort tenants beside the latency tenant for part of
// every period, raised within one interval
// and given back as soon as every SLO has slack. Nothing restarts, so the
// step is free. On an MPS GPU the caps, which cost restarts, are used only
// when the SLO still does not hold with a quarter of the ceiling paused
// or more (half, and for a miss chance explains the ceiling, where a
// restart is costly), a costly cap that took about the share the pause
// left a tenant takes most of the pause over (handOver), and a cap is
// given back only once no pause is left. On a
// time-sliced GPU the level's trial comes first (it costs no tenant its
// work) and the pause acts in the rounds the level does not. It anticipates: the pause a
// recent peak needed stays as a floor that fades over minutes, and a pause
// needed at this time of day on earlier days is set ahead of it, so the
// next burst finds the batch tenants already paused.

// pauser is one tenant the fast loop may pause on a GPU.
type pauser struct {
	m    *member
	t    tuner.Target
	pids []uint32 // every process of the tenant, on every GPU
	// cur is the pause the round starts from: the tenant's pause (was),
	// or what is left of it where a tightened cap took it over (handed
	// says how)
	cur, was tuner.Duty
	handed   string
}

// pauses returns the fast loop's actions on d, and whether the slow knobs
// may act on d this round.
func (p *Autotune) pauses(s *tuner.State, d *gpu.Device, ds domainSignals) ([]tuner.Action, bool) {
	if !s.Drives[gpu.KnobPauseDuty] || (d.Mode != gpu.SharingMPS && d.Mode != gpu.SharingTimeSlice && d.Mode != gpu.SharingVGPU) {
		return nil, true
	}
	var ps []pauser
	for _, m := range ds.others {
		if (m.class != gpu.ClassBatch && m.class != gpu.ClassBestEffort) || m.name == tenant.Unassigned {
			continue
		}
		pids := tuner.PausePIDs(s.Snapshot, m.name)
		if len(pids) == 0 {
			continue
		}
		t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPauseDuty, PID: pids[0]}
		if held, ok := s.PauseTarget(d.UUID, m.name); ok {
			t = held // the pause in place, whatever its process is now
		}
		if !s.Changeable(t) {
			continue // the GPU cannot be paused: the slow knobs answer
		}
		cur := s.PauseDuty(t)
		ps = append(ps, pauser{m: m, t: t, pids: pids, cur: cur, was: cur})
	}
	if len(ps) == 0 {
		return nil, true
	}
	if len(ds.latency) == 0 {
		// no latency tenant left: nothing to protect, the pause goes
		// back at the usual rate (no floor: the load it anticipated is
		// gone), and the slow knobs wait for it to go first (held while
		// one is away: Decide)
		out := p.pauseRelease(d, ps, p.P.PauseRelease, 0, ds.slackWhy())
		return out, len(out) == 0
	}
	if d.Mode == gpu.SharingMPS && restartCost(ds.others) >= p.P.CostlyRestart {
		p.handOver(s, d.UUID, ps)
	}
	decided := map[tuner.Target]bool{}
	out, slow := p.pauseDecide(s, d, ds, ps, decided)
	// a pause a cap took over goes down where nothing above decided it
	for _, x := range ps {
		if x.handed != "" && !decided[x.t] {
			out = append(out, tuner.Action{Target: x.t, GPUIndex: d.Index, Tenant: x.m.name, Class: x.m.class, PIDs: x.pids,
				Current: x.was, Want: x.cur, Reason: x.handed + ", no restart"})
		}
	}
	return out, slow
}

// handOverLeft is the most pause that may be left to leave a tenant the
// share its pause left it, for a tightened cap to take the pause over.
const handOverLeft = 0.25

// handOver lowers, in ps, the pause of each paused tenant whose MPS cap
// fell since the last round, where restarting the batch tenants is
// costly: there the slow loop caps a paused tenant at least to the share
// of the GPU its pause left it, in one restart, so the cap takes over
// what the pause held back, and without this the two would stack (a
// trainer capped to the 10% its 80% pause left it, and paused 80%
// still). Where a pause of at most handOverLeft would leave the tenant,
// under the new cap, the share of the GPU its pause left it under the old
// one (the cap took about that share), the pause goes down PauseHandOver
// of the way to that pause (all of the way cost two SLO seeds of
// eight-gpu-hot and one of bursty-llm-training: a cap holds back less
// than a pause of the same share, since the capped tenant still runs
// beside the latency tenant), and the raises before it leave no floor
// (pauseRaises): they were needed under the looser cap. Where the cap
// took less (a halving of a share the pause held far lower), the pause
// stays: handing it over there cost bursty-llm-itl its assistant's SLO on
// seed 3.
func (p *Autotune) handOver(s *tuner.State, uuid string, ps []pauser) {
	handed := false
	for i := range ps {
		x := &ps[i]
		if capPending(s, uuid, x.m) {
			continue // not in force yet: judged once it is
		}
		share := x.m.share()
		before, ok := p.trail.capSeen(uuid, x.m.name)
		if at, asked := p.trail.handing(uuid, x.m.name); asked && !s.Changes[x.t.String()].At.Before(at) {
			ok = false // the hand-over asked for is in place, or a later change took its place
		}
		next, full := x.cur, 0.0
		if ok && x.cur > 0 && share > 0 && share < before-1e-6 {
			cur := float64(x.cur)
			full = math.Max(0, 1-before*(1-cur)/share) // the pause that leaves the share
			if full <= handOverLeft {
				next = tuner.Duty(math.Round((cur-p.P.PauseHandOver*(cur-full))*100) / 100)
			}
		}
		if next >= x.cur {
			// nothing (more) to hand over: the share is the one to judge
			// the next cap against
			p.trail.capKeep(uuid, x.m.name, share)
			continue
		}
		// asked again each round until the pause changes (a refused
		// hand-over is not lost)
		p.trail.handOverAsked(uuid, x.m.name, s.Now)
		x.handed = fmt.Sprintf("%s's MPS cap fell from %.0f%% to %.0f%% of the SMs, which holds back most of what its pause held: pause %.0f%% (was %.0f%%; %.0f%% would leave it the share the pause left it)",
			x.m.name, 100*before, 100*share, 100*float64(next), 100*float64(x.cur), 100*full)
		x.cur, handed = next, true
	}
	if handed {
		p.trail.handedOver(uuid, s.Now)
	}
}

// capPending says whether a cap set on one of m's processes on uuid is
// not in force yet (its client not restarted).
func capPending(s *tuner.State, uuid string, m *member) bool {
	for _, pid := range m.pids {
		if _, ok := s.Pending[tuner.Target{GPU: uuid, Knob: gpu.KnobMPSActiveThreads, PID: pid}.String()]; ok {
			return true
		}
	}
	return false
}

// pauseDecide is pauses' decision for the pausers ps; decided gets the
// target of each pauser it decided a pause for, kept as it was or not.
func (p *Autotune) pauseDecide(s *tuner.State, d *gpu.Device, ds domainSignals, ps []pauser, decided map[tuner.Target]bool) ([]tuner.Action, bool) {
	var out []tuner.Action
	act := func(x pauser, want tuner.Duty, reason string) {
		decided[x.t] = true
		if math.Abs(float64(want-x.was)) < 1e-6 {
			return
		}
		if x.handed != "" {
			reason = x.handed + "; then " + reason
		}
		out = append(out, tuner.Action{Target: x.t, GPUIndex: d.Index, Tenant: x.m.name, Class: x.m.class, PIDs: x.pids,
			Current: x.was, Want: want, Reason: reason})
	}
	// Anticipation: the pause the recent peak load needed, or this time
	// of day on earlier days, is a floor set before the burst comes back.
	floor, why := p.pauseFloor(s, d.UUID)
	anticipate := func() []tuner.Action {
		for _, x := range ps {
			if x.cur < floor-1e-6 {
				act(x, floor, fmt.Sprintf("%s: pause %s %.0f%% of every period before the load comes (was %.0f%%), no restart",
					why, x.m.name, 100*floor, 100*x.cur))
			}
		}
		return out
	}
	p.trail.observe(s.Now, tuner.RequestCounts(s.Snapshot))
	w, wBurn, unknown, noise := p.verdict(s, d.UUID, ds)
	// at the ceiling, or past a quarter of it and violating still (half
	// of it where restarting the others is costly): the pause alone does
	// not hold the SLO, and the slow knobs act too (measured on
	// bursty-llm-training, -ttft, eight-gpu-hot and code-assistant-replay:
	// more SLOs met than waiting for the ceiling, fewer MPS restarts than
	// without the pause)
	slowAt := p.P.PauseMax / 4
	costly := restartCost(ds.others) >= p.P.CostlyRestart
	if costly {
		slowAt = p.P.PauseMax / 2
	}
	switch {
	case w != nil:
		step := math.Min(p.P.PauseStepMax, math.Max(p.P.PauseStepMin, p.P.PauseGain*wBurn))
		for _, x := range ps {
			next := tuner.Duty(math.Min(p.P.PauseMax, math.Max(float64(floor), math.Round((float64(x.cur)+step)*100)/100)))
			act(x, next, fmt.Sprintf("%s violates its SLO (error budget burning %.1fx over its requests of the last %v, none before the last pause change): pause %s %.0f%% of every period (was %.0f%%), no restart",
				w.name, wBurn, p.P.PauseWindow, x.m.name, 100*next, 100*x.cur))
			p.day.raised(d.UUID, s.Now, next)
		}
		return out, len(out) == 0 || pausedAtCeiling(ps, slowAt)
	case noise && costly && pausedAtCeiling(ps, slowAt) && !pausedAtCeiling(ps, p.P.PauseMax):
		// a miss chance explains where the slow knobs' cap would cost
		// the others a costly restart: the pause answers it, one step,
		// at no cost (measured on code-assistant-replay, bursty-llm-ttft
		// and eight-gpu-hot: fewer restarts, no SLO seed lost)
		who := "a latency tenant"
		if ds.worst != nil {
			who = ds.worst.name
		}
		for _, x := range ps {
			next := tuner.Duty(math.Min(p.P.PauseMax, math.Max(float64(floor), math.Round((float64(x.cur)+p.P.PauseStepMin)*100)/100)))
			act(x, next, fmt.Sprintf("%s misses within what chance explains, its SLO window inside its target: pause %s %.0f%% of every period (was %.0f%%) rather than cap it with a restart that costs it %v of work, no restart",
				who, x.m.name, 100*next, 100*x.cur, restartCost(ds.others)))
		}
		if len(out) > 0 {
			p.trail.pausedOnChance(d.UUID, s.Now)
		}
		return out, false
	case noise:
		// a miss within what chance gives, with the SLO window inside
		// its target: the pause is not raised on it, and the slow knobs
		// judge the minute as they would after a raise
		return anticipate(), pausedAtCeiling(ps, slowAt)
	case unknown:
		// too few requests since the last pause change to judge it
		out = anticipate()
		return out, len(out) == 0 && pausedAtCeiling(ps, p.P.PauseMax)
	case ds.anyViolating:
		// the last interval's requests hold the SLO (the fast window
		// still holds the late ones before them): keep the pause, and
		// the slow knobs waiting, unless it is at the ceiling (then they
		// judge the SLO window themselves)
		return anticipate(), pausedAtCeiling(ps, p.P.PauseMax)
	}
	if m, r, ok := p.rising(s, ds); ok {
		// as much as the rise: a load twice as fast pauses the batch a
		// whole period more, up to the ceiling, and no higher than the
		// most a miss on this GPU has needed where one has (measured on
		// bursty-llm-ttft: a rise took the pause to the ceiling on every
		// burst); the slack release (above the peak's fading floor)
		// finds what it needs
		step := math.Max(p.P.PauseStepMin, r.ratio-1)
		top := p.P.PauseMax
		if need, ok := p.missNeed(s, d.UUID); ok {
			top = math.Min(top, need)
		}
		for _, x := range ps {
			next := tuner.Duty(math.Min(top, math.Max(float64(floor), math.Round((float64(x.cur)+step)*100)/100)))
			if next < x.cur {
				continue // above what the misses needed already
			}
			act(x, next, fmt.Sprintf("%s's requests come %.1fx as fast over the last %v as over the minute before, its SLO without slack: pause %s %.0f%% of every period before they are late (was %.0f%%), no restart",
				m.name, r.ratio, p.P.PauseWindow, x.m.name, 100*next, 100*x.cur))
		}
		if len(out) > 0 {
			p.trail.pausedAhead(d.UUID, aheadRaise{at: s.Now, tenant: m.name, before: r.before})
		}
		return out, false
	}
	chance := p.chanceHeld(s, d.UUID, ds)
	if chance || p.pauseSlack(s, d.UUID, ds) {
		// a pause last raised ahead of a rise, which no miss confirmed
		// since, is a guess: given back faster
		release := p.P.PauseRelease
		if p.lastRaiseAhead(s, d.UUID) {
			release = p.P.PauseAheadRelease
		}
		why := "every latency SLO on this GPU has slack since the last pause change"
		if chance {
			why = "every latency SLO on this GPU holds again since the pause was raised on a miss chance explains"
		}
		for _, x := range ps {
			if next, ok := p.released(x, release, floor); ok {
				act(x, next, fmt.Sprintf("%s: give %s back %.0f%% of every period (paused %.0f%% -> %.0f%%)",
					why, x.m.name, 100*(x.cur-next), 100*x.cur, 100*next))
			}
		}
		if len(out) > 0 {
			return out, false
		}
		out = anticipate()
		return out, len(out) == 0 && floor == 0
	}
	out = anticipate()
	return out, len(out) == 0
}

// released is the pause x goes down to by release, and whether it goes
// down: not where it is not paused, nor below floor (held, or raised, by
// the floor).
func (p *Autotune) released(x pauser, release float64, floor tuner.Duty) (tuner.Duty, bool) {
	if x.cur == 0 && floor == 0 {
		return 0, false
	}
	next := tuner.Duty(math.Round((float64(x.cur)-release)*100) / 100)
	if next < tuner.Duty(p.P.PauseRelease/2) {
		next = 0
	}
	return next, next >= floor
}

// pauseRelease gives each pauser of ps back release of its pause, down to
// floor, saying why.
func (p *Autotune) pauseRelease(d *gpu.Device, ps []pauser, release float64, floor tuner.Duty, why string) []tuner.Action {
	var out []tuner.Action
	for _, x := range ps {
		if next, ok := p.released(x, release, floor); ok {
			out = append(out, tuner.Action{Target: x.t, GPUIndex: d.Index, Tenant: x.m.name, Class: x.m.class, PIDs: x.pids,
				Current: x.was, Want: next, Reason: fmt.Sprintf("%s: give %s back %.0f%% of every period (paused %.0f%% -> %.0f%%)",
					why, x.m.name, 100*(x.cur-next), 100*x.cur, 100*next)})
		}
	}
	return out
}

// verdict judges the latency tenants of ds by their requests of the last
// interval (recentBurn): the worst miss, over the fast window too or a
// clear one, with its burn; whether a tenant violating over the fast
// window has too few requests since the last pause change to tell; and
// whether the only misses are ones chance explains (noise): not clear
// over the last interval, the fast window's late requests less than three
// standard deviations (Poisson) above what the SLO allows of them, and the
// SLO window's quantile inside its target. A p99 tenant at 3 requests a
// second may have 1.8 late requests a minute; 3 or 4 burn 2 and are
// chance, and the pause they raised held the batch tenants for minutes
// (measured on h100-timeslice, noisy-neighbour and timeslice-levels).
func (p *Autotune) verdict(s *tuner.State, uuid string, ds domainSignals) (w *member, burn float64, unknown, noise bool) {
	for _, m := range ds.latency {
		if m.unknown {
			continue // its requests, if any, are too few to raise the pause on
		}
		b, n, ok := p.recentBurn(s, uuid, m)
		switch {
		case !ok:
			unknown = unknown || m.violating
		case b <= p.P.ViolateBurn || !(m.violating || p.clearMiss(b, n, m.slo.Quantile)):
		case !p.clearMiss(b, n, m.slo.Quantile) && chanceMiss(s, m):
			noise = true
		case w == nil || m.priority > w.priority || (m.priority == w.priority && b > burn):
			w, burn = m, b
		}
	}
	return w, burn, unknown, noise && w == nil
}

// chanceMiss says whether m's burn over the fast window is one chance
// explains (less than three standard deviations, Poisson, above what the
// SLO allows of its requests) while its SLO window's quantile is inside
// its target.
func chanceMiss(s *tuner.State, m *member) bool {
	return m.hasRatio && m.ratio <= 1 && !beyondNoise(m.burn, s.Fast[m.name].Total, m.slo.Quantile, 3)
}

// beyondNoise says whether a burn over n requests is k standard
// deviations (Poisson) above what the SLO allows of them.
func beyondNoise(burn, n, quantile, k float64) bool {
	allowed := lateAllowed(n, quantile)
	return (burn-1)*allowed >= k*math.Sqrt(math.Max(allowed, 1))
}

// slackWithinNoise says whether a burn over n requests is at most bar
// give or take one standard deviation (Poisson) of the late requests bar
// allows.
func slackWithinNoise(burn, n, quantile, bar float64) bool {
	allowed := lateAllowed(n, quantile)
	return (burn-bar)*allowed <= math.Sqrt(math.Max(bar*allowed, 1))
}

// lateAllowed is how many of n requests the SLO allows to be late: its
// error budget, floored at 0.1% as tuner.Burn floors it.
func lateAllowed(n, quantile float64) float64 { return n * math.Max(1-quantile, 1e-3) }

// clearMiss says whether a burn over n requests is a clear miss: twice
// ViolateBurn, and its late requests three standard deviations (Poisson)
// above what the SLO allows of n, so that a wobble of a few requests in
// an interval is not one.
func (p *Autotune) clearMiss(burn, n, quantile float64) bool {
	return burn > 2*p.P.ViolateBurn && beyondNoise(burn, n, quantile, 3)
}

// rising returns the latency tenant of ds whose load rises (PauseRise)
// most while its SLO window has no slack, and the rise: the requests of
// the last interval at least PauseRise times and three standard
// deviations (Poisson) above what the minute before expects.
func (p *Autotune) rising(s *tuner.State, ds domainSignals) (*member, riseOf, bool) {
	var top *member
	var best riseOf
	for _, m := range ds.latency {
		if !m.hasRatio || m.ratio <= p.P.SlackRatio {
			continue
		}
		r, ok := p.trail.rise(m.name, s.Now, p.P.PauseWindow)
		if !ok || r.got < p.P.MinRequests || r.ratio < p.P.PauseRise || r.got-r.want < 3*math.Sqrt(math.Max(r.want, 1)) {
			continue
		}
		if r.ratio > best.ratio {
			top, best = m, r
		}
	}
	return top, best, top != nil
}

// recentBurn is m's error-budget burn over the requests that ended in the
// last PauseWindow, back far enough for MinRequests of them (no further
// than the fast window), and never before the last pause change on the
// GPU; without the trail for it, over the requests since the last pause
// change (burnSincePause). With it, how many requests it judged; false
// while too few requests have ended since the change to tell.
func (p *Autotune) recentBurn(s *tuner.State, uuid string, m *member) (burn, requests float64, ok bool) {
	earliest := s.Now.Add(-s.Fast[m.name].Over)
	if c, ok := s.LastChange(tuner.Target{GPU: uuid, Knob: gpu.KnobPauseDuty}); ok && c.At.After(earliest) {
		earliest = c.At
	}
	if r, _, ok := p.trail.since(m.name, s.Now.Add(-p.P.PauseWindow), earliest, p.P.MinRequests); ok {
		return tuner.Burn(r.Good/r.Total, m.slo.Quantile), r.Total, true
	}
	return p.burnSincePause(s, uuid, m)
}

// burnSincePause is w's error-budget burn over the requests that ended
// since the last pause change on the GPU (its fast-window burn when there
// was none, or before the fast window); false while too few requests have
// ended since the change to tell, or where its counters restarted since
// (a reload that changed its SLO or source: another tracker's counters,
// whatever they count, RequestCount.Since).
func (p *Autotune) burnSincePause(s *tuner.State, uuid string, w *member) (burn, requests float64, ok bool) {
	c, ok := s.LastChange(tuner.Target{GPU: uuid, Knob: gpu.KnobPauseDuty})
	if !ok || s.Now.Sub(c.At) >= s.Fast[w.name].Over || c.Counters == nil {
		return w.burn, s.Fast[w.name].Total, true
	}
	then, ok := c.Counters[w.name]
	if !ok {
		return w.burn, s.Fast[w.name].Total, true
	}
	d, ok := tuner.RequestCounts(s.Snapshot)[w.name].Since(then)
	total, good := d.Total, d.Good
	if !ok || total < p.P.MinRequests || total <= 0 {
		return 0, 0, false
	}
	return tuner.Burn(good/total, w.slo.Quantile), total, true
}

// pauseSlack says whether every latency tenant of the domain has slack
// for the fast loop (none unknown): idle, or its burn over the last interval (recentBurn)
// at most half ViolateBurn and over the fast window at most SlackBurn,
// give or take one standard deviation (Poisson) of the late requests
// SlackBurn allows (pauses asks it only when none violates over the fast
// window); with too few requests in the fast window for a burn
// (MinRequests), slack as the slow loop judges it (its SLO window's
// quantile at most SlackRatio of the target): a quiet tenant with clear
// slack held the pause for good before, while the slow loop gave the cap
// back under it. Give or take: a p99 tenant with one late request in a minute
// of 200 burns 0.5, and that one request held the pause for minutes
// (measured on h100-timeslice, noisy-neighbour and
// code-assistant-replay). The SLO window's quantile is not waited for: a
// pause given back too far is taken again within one interval, at no
// cost.
func (p *Autotune) pauseSlack(s *tuner.State, uuid string, ds domainSignals) bool {
	for _, m := range ds.latency {
		if m.unknown {
			return false // a tenant that cannot be judged keeps the pause
		}
		if m.slo.WindowRequests == 0 {
			continue
		}
		if !m.hasBurn {
			if !m.slack {
				return false
			}
			continue
		}
		burn, _, ok := p.recentBurn(s, uuid, m)
		if !ok || burn > p.P.ViolateBurn/2 || !slackWithinNoise(m.burn, s.Fast[m.name].Total, m.slo.Quantile, p.P.SlackBurn) {
			return false
		}
	}
	return true
}

// chanceHeld says whether the GPU's pause was last raised on a miss
// chance explains and every latency tenant on it holds its SLO again:
// none violating, each one's burn over the last interval at most 1 and
// its SLO window's quantile inside its target. Such a raise was a guess
// against chance, given back once the SLOs hold rather than only with
// slack, which a tenant running near its target never has (measured on
// day-night-shift: the chat at a burn of about 0.8 kept the pause its
// chance misses raised at the ceiling all night; given back, the
// trainer kept 0.52 of the oracle's work instead of 0.35, no SLO seed
// or restart more on any scenario, seeds 1-6).
func (p *Autotune) chanceHeld(s *tuner.State, uuid string, ds domainSignals) bool {
	if ds.anyViolating || len(ds.latency) == 0 {
		return false
	}
	raises := p.pauseRaises(s, uuid)
	if len(raises) == 0 || !raises[len(raises)-1].chance {
		return false
	}
	for _, m := range ds.latency {
		b, _, ok := p.recentBurn(s, uuid, m)
		if !ok || b > p.P.ViolateBurn || !m.hasRatio || m.ratio > 1 {
			return false
		}
	}
	return true
}

// canPause says whether the fast loop can pause a tenant on the GPU uuid:
// the host drives pause_duty (a state whose Drives has no entry for it
// pauses nothing), and it is available on the GPU (enabled, and listed).
func canPause(s *tuner.State, uuid string) bool {
	return s.Drives[gpu.KnobPauseDuty] && s.Available(uuid, gpu.KnobPauseDuty)
}

// pausedDuty is the least pause of the tenants ms on d: 0 where one is
// not paused (and always without the pause knob).
func (p *Autotune) pausedDuty(s *tuner.State, d *gpu.Device, ms []*member) float64 {
	if !s.Drives[gpu.KnobPauseDuty] || len(ms) == 0 {
		return 0
	}
	least := 1.0
	for _, m := range ms {
		pids := tuner.PausePIDs(s.Snapshot, m.name)
		if len(pids) == 0 {
			return 0
		}
		least = math.Min(least, float64(s.PauseDuty(tuner.Target{GPU: d.UUID, Knob: gpu.KnobPauseDuty, PID: pids[0]})))
	}
	return least
}

// pausedAny says whether any of the tenants ms is paused on d (the pause
// in place, or the one its first process would get).
func (p *Autotune) pausedAny(s *tuner.State, d *gpu.Device, ms []*member) bool {
	for _, m := range ms {
		t, ok := s.PauseTarget(d.UUID, m.name)
		if !ok {
			pids := tuner.PausePIDs(s.Snapshot, m.name)
			if len(pids) == 0 {
				continue
			}
			t = tuner.Target{GPU: d.UUID, Knob: gpu.KnobPauseDuty, PID: pids[0]}
		}
		if s.PauseDuty(t) > 0 {
			return true
		}
	}
	return false
}

// pausedAtCeiling says whether every pauser is at the ceiling.
func pausedAtCeiling(ps []pauser, ceiling float64) bool {
	for _, x := range ps {
		if float64(x.cur) < ceiling-1e-6 {
			return false
		}
	}
	return true
}
