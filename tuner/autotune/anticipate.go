package autotune

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop's anticipation: the pause a recent peak needed stays as a
// floor that fades over minutes, and a pause needed at this time of day on
// earlier days is set ahead of it (pauseFloor), both read from the raises
// of the pause that State.History keeps and the daily pattern of them.

// Anticipation's memory.
const (
	// pausePeakFade is how fast the floor a pause raised on a miss leaves
	// fades, per minute: a peak that needed a 60% pause holds a floor of
	// 40% two minutes later, none after six (half the pace of the slack
	// release, PauseRelease a round). pauseRiseFade is the same for a
	// pause raised ahead of a load rise, while the load stays up: a 2x
	// step holds its pause for minutes.
	pausePeakFade = 0.1
	pauseRiseFade = 0.05
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
// minute since, pauseRiseFade for a raise ahead of a rise) and the daily pattern's (the smallest pause raised in the
// next pauseDayLead of the time of day on pauseDaysSeen or more of the
// last pauseDays days).
func (p *Autotune) pauseFloor(s *tuner.State, uuid string) (tuner.Duty, string) {
	var floor float64
	why := ""
	// only raises: a peak's need (a rise's guess while the load stays up)
	for _, r := range p.pauseRaises(s, uuid) {
		if p.trail.aheadGone(uuid, r.at, s.Now, p.P.PauseWindow, p.P.PauseRise) {
			continue
		}
		fade := pausePeakFade
		if r.ahead {
			fade = pauseRiseFade
		}
		f := float64(r.to) - fade*s.Now.Sub(r.at).Minutes()
		if f = math.Round(f*100) / 100; f > floor {
			floor = f
			why = fmt.Sprintf("a recent peak needed a %.0f%% pause %s ago", 100*float64(r.to), s.Now.Sub(r.at).Round(time.Second))
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

// pauseRaise is a raise of a GPU's pause that State.History keeps: to
// what, when, and whether it was one ahead of a rise (trail.pausedAhead).
type pauseRaise struct {
	to     tuner.Duty
	at     time.Time
	ahead  bool
	chance bool // the step on a miss chance explains (trail.pausedOnChance)
}

// pauseRaises returns the raises of the pause on the GPU that State.History
// keeps, oldest first.
func (p *Autotune) pauseRaises(s *tuner.State, uuid string) []pauseRaise {
	var raises []pauseRaise
	handed := p.trail.handedAt(uuid)
	for _, c := range s.History[tuner.Target{GPU: uuid, Knob: gpu.KnobPauseDuty}.DomainKey()] {
		if c.At.Before(handed) {
			continue // held under a looser cap, which a tighter one took over
		}
		to, ok1 := c.To.(tuner.Duty)
		from, ok2 := c.From.(tuner.Duty)
		if !ok1 || (ok2 && to <= from) {
			continue
		}
		_, ahead := p.trail.aheadAt(uuid, c.At)
		raises = append(raises, pauseRaise{to: to, at: c.At, ahead: ahead, chance: p.trail.chanceAt(uuid, c.At)})
	}
	return raises
}

// missNeed is the highest pause the fast loop raised the GPU's pause to
// other than ahead of a rise (on a miss, or to a floor) of the changes
// State.History keeps; false where there is none.
func (p *Autotune) missNeed(s *tuner.State, uuid string) (float64, bool) {
	need, ok := 0.0, false
	for _, r := range p.pauseRaises(s, uuid) {
		if !r.ahead {
			need, ok = math.Max(need, float64(r.to)), true
		}
	}
	return need, ok
}

// lastRaiseAhead says whether the last raise of the GPU's pause was one
// ahead of a rise.
func (p *Autotune) lastRaiseAhead(s *tuner.State, uuid string) bool {
	raises := p.pauseRaises(s, uuid)
	return len(raises) > 0 && raises[len(raises)-1].ahead
}
