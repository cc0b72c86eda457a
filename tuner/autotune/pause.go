package autotune

import (
	"fmt"
	"math"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop: where the host can pause a tenant (pause_duty), autotune
// answers a violation by pausing the batch and best-effort tenants beside
// the latency tenant for part of every period, raised within one interval
// and given back as soon as every SLO has slack. Nothing restarts, so the
// step is free. On an MPS GPU the caps, which cost restarts, are used only
// when the pause is at its ceiling and the SLO still does not hold, and a
// cap is given back only once no pause is left. On a time-sliced GPU the
// level's trial comes first (it costs no tenant its work) and the pause
// acts in the rounds the level does not.

// pauser is one tenant the fast loop may pause on a GPU.
type pauser struct {
	m    *member
	t    tuner.Target
	pids []uint32 // every process of the tenant, on every GPU
	cur  tuner.Duty
}

// pauses returns the fast loop's actions on d, and whether the slow knobs
// may act on d this round.
func (p *Autotune) pauses(s *tuner.State, d *gpu.Device, ms []*member) ([]tuner.Action, bool) {
	if !s.Drives[gpu.KnobPauseDuty] || (d.Mode != gpu.SharingMPS && d.Mode != gpu.SharingTimeSlice) {
		return nil, true
	}
	ds := summarize(ms)
	var ps []pauser
	for _, m := range ds.others {
		if (m.class != gpu.ClassBatch && m.class != gpu.ClassBestEffort) || m.name == tenant.Unassigned {
			continue
		}
		pids := tenantPIDs(s.Snapshot, m.name)
		if len(pids) == 0 {
			continue
		}
		t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPauseDuty, PID: pids[0]}
		ps = append(ps, pauser{m: m, t: t, pids: pids, cur: s.PauseDuty(t)})
	}
	if len(ds.latency) == 0 || len(ps) == 0 {
		return nil, true
	}
	var out []tuner.Action
	act := func(x pauser, want tuner.Duty, reason string) {
		if math.Abs(float64(want-x.cur)) < 1e-6 {
			return
		}
		out = append(out, tuner.Action{Target: x.t, GPUIndex: d.Index, Tenant: x.m.name, Class: x.m.class, PIDs: x.pids,
			Current: x.cur, Want: want, Reason: reason})
	}
	switch {
	case ds.anyViolating:
		w := ds.worst
		burn, ok := p.burnSincePause(s, d.UUID, w)
		if !ok {
			// too few requests since the last pause change to judge it
			return nil, pausedAtCeiling(ps, p.P.PauseMax)
		}
		if burn <= p.P.ViolateBurn {
			// the last pause holds the SLO since it was made (the fast
			// window still holds the requests before it): keep it, and
			// the slow knobs waiting
			return nil, false
		}
		step := math.Min(p.P.PauseStepMax, math.Max(p.P.PauseStepMin, p.P.PauseGain*burn))
		for _, x := range ps {
			next := tuner.Duty(math.Min(p.P.PauseMax, math.Round((float64(x.cur)+step)*100)/100))
			act(x, next, fmt.Sprintf("%s violates its SLO (error budget burning %.1fx since the last pause change): pause %s %.0f%% of every period (was %.0f%%), no restart",
				w.name, burn, x.m.name, 100*next, 100*x.cur))
		}
		// at the ceiling: the slow knobs may take over
		return out, len(out) == 0
	case p.pauseSlack(s, d.UUID, ds):
		for _, x := range ps {
			if x.cur == 0 {
				continue
			}
			next := tuner.Duty(math.Round((float64(x.cur)-p.P.PauseRelease)*100) / 100)
			if next < tuner.Duty(p.P.PauseRelease/2) {
				next = 0
			}
			act(x, next, fmt.Sprintf("every latency SLO on this GPU has slack since the last pause change: give %s back %.0f%% of every period (paused %.0f%% -> %.0f%%)",
				x.m.name, 100*(x.cur-next), 100*x.cur, 100*next))
		}
		return out, len(out) == 0
	}
	return nil, true
}

// burnSincePause is w's error-budget burn over the requests that ended
// since the last pause change on the GPU (its fast-window burn when there
// was none, or before the fast window); false while too few requests have
// ended since the change to tell.
func (p *Autotune) burnSincePause(s *tuner.State, uuid string, w *member) (float64, bool) {
	c, ok := s.LastChange(tuner.Target{GPU: uuid, Knob: gpu.KnobPauseDuty})
	if !ok || s.Now.Sub(c.At) >= s.Fast[w.name].Over || c.Counters == nil {
		return w.burn, true
	}
	then, ok := c.Counters[w.name]
	if !ok {
		return w.burn, true
	}
	now := tuner.RequestCounts(s.Snapshot)[w.name]
	total, good := now.Total-then.Total, now.Good-then.Good
	if total < p.P.MinRequests || total <= 0 {
		return 0, false
	}
	return tuner.Burn(good/total, w.slo.Quantile), true
}

// pauseSlack says whether every latency tenant of the domain has slack
// for the fast loop: idle, or its burn since the last pause change at most
// half ViolateBurn. The SLO window's quantile is not waited for: a pause
// given back too far is taken again within one interval, at no cost.
func (p *Autotune) pauseSlack(s *tuner.State, uuid string, ds domainSignals) bool {
	for _, m := range ds.latency {
		if m.slo.WindowRequests == 0 {
			continue
		}
		burn, ok := p.burnSincePause(s, uuid, m)
		if !ok || !m.hasBurn || burn > p.P.ViolateBurn/2 {
			return false
		}
	}
	return true
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

// tenantPIDs lists a tenant's processes on every GPU, sorted: a tenant is
// paused as a whole.
func tenantPIDs(snap *tenant.Snapshot, name string) []uint32 {
	var out []uint32
	for _, u := range snap.Usage {
		if u.Tenant != name {
			continue
		}
		for _, pid := range u.PIDs {
			if !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out
}
