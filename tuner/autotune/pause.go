package autotune

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop: where the host can pause a tenant (pause_duty), autotune
// answers a violation by pausing the batch and best-effort tenants beside
// the latency tenant for part of every period, raised within one interval
// and given back as soon as every SLO has slack. Nothing restarts, so the
// step is free. On an MPS GPU the caps, which cost restarts, are used only
// when the SLO still does not hold with a quarter of the ceiling paused
// or more, and a cap is given back only once no pause is left. On a
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
	switch {
	case ds.anyViolating:
		w := ds.worst
		burn, ok := p.burnSincePause(s, d.UUID, w)
		if !ok {
			// too few requests since the last pause change to judge it
			out = anticipate()
			return out, len(out) == 0 && pausedAtCeiling(ps, p.P.PauseMax)
		}
		if burn <= p.P.ViolateBurn {
			// the last pause holds the SLO since it was made (the fast
			// window still holds the requests before it): keep it, and
			// the slow knobs waiting, unless it is at the ceiling (then
			// they judge the SLO window themselves)
			return anticipate(), pausedAtCeiling(ps, p.P.PauseMax)
		}
		step := math.Min(p.P.PauseStepMax, math.Max(p.P.PauseStepMin, p.P.PauseGain*burn))
		for _, x := range ps {
			next := tuner.Duty(math.Min(p.P.PauseMax, math.Max(float64(floor), math.Round((float64(x.cur)+step)*100)/100)))
			act(x, next, fmt.Sprintf("%s violates its SLO (error budget burning %.1fx since the last pause change): pause %s %.0f%% of every period (was %.0f%%), no restart",
				w.name, burn, x.m.name, 100*next, 100*x.cur))
			p.day.raised(d.UUID, s.Now, next)
		}
		// at the ceiling, or past a quarter of it and violating still:
		// the pause alone does not hold the SLO, and the slow knobs act
		// too (measured on bursty-llm-training, -ttft and
		// code-assistant-replay: more SLOs met than waiting for the
		// ceiling, fewer MPS restarts than without the pause)
		return out, len(out) == 0 || pausedAtCeiling(ps, p.P.PauseMax/4)
	case p.pauseSlack(s, d.UUID, ds):
		for _, x := range ps {
			if x.cur == 0 && floor == 0 {
				continue
			}
			next := tuner.Duty(math.Round((float64(x.cur)-p.P.PauseRelease)*100) / 100)
			if next < tuner.Duty(p.P.PauseRelease/2) {
				next = 0
			}
			if next < floor {
				continue // held (or raised) by the floor below
			}
			act(x, next, fmt.Sprintf("every latency SLO on this GPU has slack since the last pause change: give %s back %.0f%% of every period (paused %.0f%% -> %.0f%%)",
				x.m.name, 100*(x.cur-next), 100*x.cur, 100*next))
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

// Anticipation's memory.
const (
	// pausePeakFade is how fast the floor a raised pause leaves fades, per
	// minute: a peak that needed a 50% pause holds a floor of 40% two
	// minutes later, none after ten.
	pausePeakFade = 0.05
	// pauseDayBucket is the span of time of day the daily pattern keeps a
	// pause for, pauseDayLead how far ahead of a bucket its pause is set,
	// pauseDays how many earlier days count, pauseDaysSeen how many of them
	// must have needed a pause at that time for it to be a pattern.
	pauseDayBucket = 15 * time.Minute
	pauseDayLead   = 15 * time.Minute
	pauseDays      = 7
	pauseDaysSeen  = 2
)

// pauseFloor is the pause a GPU's batch tenants are held at, at least,
// before a burst, and why ("" when none): the larger of the recent peak's
// (the highest pause the fast loop raised to, faded by pausePeakFade per
// minute since) and the daily pattern's (the smallest pause raised in the
// next pauseDayLead of the time of day on pauseDaysSeen or more of the
// last pauseDays days).
func (p *Autotune) pauseFloor(s *tuner.State, uuid string) (tuner.Duty, string) {
	var floor float64
	why := ""
	for _, c := range s.History[tuner.Target{GPU: uuid, Knob: gpu.KnobPauseDuty}.DomainKey()] {
		to, ok1 := c.To.(tuner.Duty)
		from, ok2 := c.From.(tuner.Duty)
		if !ok1 || (ok2 && to <= from) {
			continue // only raises: a peak's need
		}
		f := float64(to) - pausePeakFade*s.Now.Sub(c.At).Minutes()
		if f = math.Round(f*100) / 100; f > floor {
			floor = f
			why = fmt.Sprintf("a recent peak needed a %.0f%% pause %s ago", 100*float64(to), s.Now.Sub(c.At).Round(time.Second))
		}
	}
	if d, n := p.day.pattern(uuid, s.Now); n >= pauseDaysSeen && float64(d) > floor {
		floor = float64(d)
		why = fmt.Sprintf("on %d of the last %d days this time of day needed a %.0f%% pause", n, pauseDays, 100*floor)
	}
	return tuner.Duty(math.Min(floor, p.P.PauseMax)), why
}

// pauseDaily is the daily pattern of the pauses the fast loop raised: per
// GPU, time-of-day bucket and day, the highest.
type pauseDaily struct {
	mu   sync.Mutex
	raws map[string]map[dayBucket]tuner.Duty
}

// dayBucket is a day (since the Unix epoch, UTC) and a bucket of it.
type dayBucket struct{ day, bucket int64 }

func bucketOf(t time.Time) dayBucket {
	since := t.UTC().Sub(time.Unix(0, 0).UTC())
	day := int64(since / (24 * time.Hour))
	return dayBucket{day, int64((since - time.Duration(day)*24*time.Hour) / pauseDayBucket)}
}

// raised records a pause raised to d at t.
func (pd *pauseDaily) raised(uuid string, t time.Time, d tuner.Duty) {
	if pd == nil {
		return
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.raws == nil {
		pd.raws = map[string]map[dayBucket]tuner.Duty{}
	}
	m := pd.raws[uuid]
	if m == nil {
		m = map[dayBucket]tuner.Duty{}
		pd.raws[uuid] = m
	}
	b := bucketOf(t)
	m[b] = max(m[b], d)
	for k := range m {
		if k.day < b.day-pauseDays {
			delete(m, k)
		}
	}
}

// pattern returns the smallest of the pauses raised, on each earlier day
// of the last pauseDays that had one, in the buckets from t to
// t+pauseDayLead, and on how many days there was one.
func (pd *pauseDaily) pattern(uuid string, t time.Time) (tuner.Duty, int) {
	if pd == nil {
		return 0, 0
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	now := bucketOf(t)
	var least tuner.Duty
	n := 0
	for day := now.day - pauseDays; day < now.day; day++ {
		var most tuner.Duty
		for at := t; !at.After(t.Add(pauseDayLead)); at = at.Add(pauseDayBucket) {
			b := bucketOf(at)
			most = max(most, pd.raws[uuid][dayBucket{day + b.day - now.day, b.bucket}])
		}
		if most > 0 {
			if n == 0 || most < least {
				least = most
			}
			n++
		}
	}
	return least, n
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
