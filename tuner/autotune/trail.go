package autotune

import (
	"math"
	"strings"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop's own memory of the latency tenants' request counters,
// one point a round: the burn over the last interval's requests (the
// judgement of a pause and of a miss), and the rate of the last interval
// against the minute before it (a load step, seen before its requests
// are late).

// trailKeep is how long the trail keeps a tenant's points.
const trailKeep = 2 * time.Minute

// trailPoint is a tenant's cumulative request counters at a round.
type trailPoint struct {
	at time.Time
	c  tuner.RequestCount
}

// requestTrail keeps, per latency tenant, its request counters at each
// round over the last trailKeep.
type requestTrail struct {
	mu  sync.Mutex
	pts map[string][]trailPoint
	// ahead are, per GPU, the pauses (the last maxAhead) raised ahead of
	// a load rise: a guess, which leaves a floor (pauseFloor) only while
	// the load stays up.
	ahead map[string][]aheadRaise
	// chance is, per GPU, when the pause was last raised on a miss chance
	// explains: a guess too, given back once the SLOs hold (chanceHeld).
	chance map[string]time.Time
	// caps is, per GPU and tenant, its MPS share at the last round, and
	// handed, per GPU, when a tightened cap last took over a pause
	// (handOver).
	caps   map[string]float64
	handed map[string]time.Time
	// asked is, per GPU and tenant, when a hand-over was last asked for
	// (handOverAsked); kept until its cap's share is.
	asked map[string]time.Time
	// unseen is, per GPU and tenant kept in caps or asked, since when the
	// tenant has had neither a process to pause nor a pause in force
	// there (forget).
	unseen tuner.Absent
}

// forget drops what the trail keeps of tenants gone, as the engine
// forgets a process or an ended pause (tuner.GoneAfter), so that a host
// whose batch jobs (or namespaces) come and go as tenants of their own
// keeps no share, hand-over or request point of every tenant it ever saw.
// window is PauseWindow. Each is dropped only where it can no longer
// change a decision:
//
//   - A tenant's MPS share and hand-over asked on a GPU (caps, asked) are
//     read by handOver alone, for a tenant with a process to pause on that
//     GPU, and change its decision only while the tenant's pause there is
//     in force (an original held: State.Paused); otherwise handOver keeps
//     its share anew and drops the hand-over asked. They are dropped once
//     the tenant has had, for tuner.GoneAfter on a GPU the snapshots read,
//     no process to pause on any GPU and no pause in force on that one
//     (none is set on a tenant without processes): a tenant that comes
//     back starts unpaused, and the first round handOver looks at it keeps
//     its share anew before any pause of its can be handed over. (Kept,
//     the share would be read only where a pause came back before
//     handOver looked at the tenant, on a GPU whose restarts were cheap
//     then, and it would be the share of processes that exited, not the
//     last round's that handOver takes it for.)
//   - A tenant's request points (pts) are read for a latency tenant (one
//     with an SLO status) on a GPU, after observe added the round's points
//     and trimmed those older than trailKeep, and by aheadGone for the
//     tenant of a raise ahead, over the last 2*window. They are dropped
//     where the tenant has no SLO status (a reload removed it, its
//     namespace or pod is gone) and its newest point is older than both:
//     no window reaches them, and its next observe would drop them all.
//     (Kept, rise alone would read them, for a tenant back with an SLO
//     status but no good-request counts, which a latency source either
//     has from its first sample or never.)
func (tr *requestTrail) forget(s *tuner.State, window time.Duration) {
	if tr == nil || s == nil || s.Snapshot == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	withSLO := map[string]bool{}
	for _, st := range s.Snapshot.SLOs {
		withSLO[st.Tenant] = true
	}
	keep := max(trailKeep, 2*window)
	for name, ps := range tr.pts {
		if !withSLO[name] && (len(ps) == 0 || s.Now.Sub(ps[len(ps)-1].at) > keep) {
			delete(tr.pts, name)
		}
	}
	up := map[string]bool{}
	for _, d := range s.UpDevices() {
		up[d.UUID] = true
	}
	hasProc := tuner.PausableTenants(s.Snapshot)
	check := func(k string) {
		uuid, name, _ := strings.Cut(k, "/")
		if !up[uuid] {
			return // a GPU the snapshot did not read tells nothing
		}
		if _, paused := s.PauseTarget(uuid, name); hasProc[name] || paused {
			tr.unseen.Seen(k)
			return
		}
		if tr.unseen.For(k, s.Now) >= tuner.GoneAfter {
			delete(tr.caps, k)
			delete(tr.asked, k)
			tr.unseen.Seen(k)
		}
	}
	for k := range tr.caps {
		check(k)
	}
	for k := range tr.asked {
		if _, checked := tr.caps[k]; !checked { // (one kept in caps too was checked above)
			check(k)
		}
	}
}

// capSeen returns tenant's MPS share on uuid as capKeep last kept it
// (false before the first).
func (tr *requestTrail) capSeen(uuid, tenant string) (float64, bool) {
	if tr == nil {
		return 0, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	before, ok := tr.caps[uuid+"/"+tenant]
	return before, ok
}

// capKeep keeps tenant's MPS share on uuid for capSeen, and forgets the
// hand-over asked for under the last one.
func (tr *requestTrail) capKeep(uuid, tenant string, share float64) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.caps == nil {
		tr.caps = map[string]float64{}
	}
	tr.caps[uuid+"/"+tenant] = share
	delete(tr.asked, uuid+"/"+tenant)
}

// handOverAsked records that a hand-over of tenant's pause on uuid was
// asked for at t.
func (tr *requestTrail) handOverAsked(uuid, tenant string, t time.Time) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.asked == nil {
		tr.asked = map[string]time.Time{}
	}
	tr.asked[uuid+"/"+tenant] = t
}

// handing returns when a hand-over of tenant's pause on uuid was last
// asked for, false where none is outstanding.
func (tr *requestTrail) handing(uuid, tenant string) (time.Time, bool) {
	if tr == nil {
		return time.Time{}, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t, ok := tr.asked[uuid+"/"+tenant]
	return t, ok
}

// handedOver records that a tightened cap took over the pause on uuid at t.
func (tr *requestTrail) handedOver(uuid string, t time.Time) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.handed == nil {
		tr.handed = map[string]time.Time{}
	}
	tr.handed[uuid] = t
}

// handedAt is when a tightened cap last took over the pause on uuid (the
// zero time where none has).
func (tr *requestTrail) handedAt(uuid string) time.Time {
	if tr == nil {
		return time.Time{}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.handed[uuid]
}

// pausedOnChance records that the pause on uuid was raised at t on a
// miss chance explains.
func (tr *requestTrail) pausedOnChance(uuid string, t time.Time) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.chance == nil {
		tr.chance = map[string]time.Time{}
	}
	tr.chance[uuid] = t
}

// chanceAt says whether the pause on uuid raised at t was the last one
// raised on a miss chance explains.
func (tr *requestTrail) chanceAt(uuid string, t time.Time) bool {
	if tr == nil {
		return false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c, ok := tr.chance[uuid]
	return ok && c.Equal(t)
}

// aheadRaise is a pause raised at a round ahead of a tenant's load rise,
// and the tenant's rate (requests a second) before the rise.
type aheadRaise struct {
	at     time.Time
	tenant string
	before float64
}

// maxAhead is how many raises requestTrail.ahead keeps per GPU.
const maxAhead = 16

// pausedAhead records that the pause on uuid was raised at t ahead of
// tenant's load rise from before requests a second.
func (tr *requestTrail) pausedAhead(uuid string, r aheadRaise) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.ahead == nil {
		tr.ahead = map[string][]aheadRaise{}
	}
	a := append(tr.ahead[uuid], r)
	if len(a) > maxAhead {
		a = a[len(a)-maxAhead:]
	}
	tr.ahead[uuid] = a
}

// aheadGone says whether the pause on uuid raised at t was raised ahead of
// a load rise that is gone: the tenant's requests over the last window
// come less than halfway from its rate before the rise to PauseRise times
// it (or the trail cannot tell).
func (tr *requestTrail) aheadGone(uuid string, t, now time.Time, window time.Duration, rise float64) bool {
	r, ok := tr.aheadAt(uuid, t)
	if !ok {
		return false
	}
	c, span, ok := tr.since(r.tenant, now.Add(-window), now.Add(-2*window), 1)
	return !ok || c.Total/span.Seconds() < r.before*(1+rise)/2
}

// aheadAt returns the raise ahead of a rise made at t on the GPU uuid,
// false where the raise at t was not one.
func (tr *requestTrail) aheadAt(uuid string, t time.Time) (aheadRaise, bool) {
	if tr == nil {
		return aheadRaise{}, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := len(tr.ahead[uuid]) - 1; i >= 0; i-- {
		if tr.ahead[uuid][i].at.Equal(t) {
			return tr.ahead[uuid][i], true
		}
	}
	return aheadRaise{}, false
}

// observe adds the snapshot's counters at now, once a round; counters that
// started over (tuner.RequestCount.StartedOver: another Epoch whatever the
// counts, or one went down) start the tenant's trail over.
func (tr *requestTrail) observe(now time.Time, counts map[string]tuner.RequestCount) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.pts == nil {
		tr.pts = map[string][]trailPoint{}
	}
	for name, c := range counts {
		ps := tr.pts[name]
		if n := len(ps); n > 0 {
			if !now.After(ps[n-1].at) {
				continue
			}
			if c.StartedOver(ps[n-1].c) {
				ps = nil
			}
		}
		ps = append(ps, trailPoint{at: now, c: c})
		i := 0
		for i < len(ps) && ps[i].at.Before(now.Add(-trailKeep)) {
			i++
		}
		tr.pts[name] = ps[i:]
	}
}

// since returns the requests of name from the newest point at or before
// from, or an older one back to earliest where that one holds fewer than
// min requests, to the latest point; false when no point back to
// earliest gives min requests.
func (tr *requestTrail) since(name string, from, earliest time.Time, min float64) (tuner.RequestCount, time.Duration, bool) {
	if tr == nil {
		return tuner.RequestCount{}, 0, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ps := tr.pts[name]
	if len(ps) < 2 {
		return tuner.RequestCount{}, 0, false
	}
	last := ps[len(ps)-1]
	for i := len(ps) - 2; i >= 0 && !ps[i].at.Before(earliest); i-- {
		if ps[i].at.After(from) {
			continue
		}
		d := tuner.RequestCount{Total: last.c.Total - ps[i].c.Total, Good: last.c.Good - ps[i].c.Good}
		if d.Total >= min && d.Total > 0 {
			return d, last.at.Sub(ps[i].at), true
		}
	}
	return tuner.RequestCount{}, 0, false
}

// riseOf is a tenant's load over the last window against the span before
// it.
type riseOf struct {
	ratio     float64 // the window's rate over the earlier rate
	got, want float64 // the window's requests, and the earlier rate's expectation of them
	before    float64 // the earlier rate, requests a second
}

// rise is name's rate over the last window against its rate over the span
// before it, when the trail holds the window and at least two windows
// before it (up to three).
func (tr *requestTrail) rise(name string, now time.Time, window time.Duration) (riseOf, bool) {
	if tr == nil {
		return riseOf{}, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ps := tr.pts[name]
	if len(ps) < 3 {
		return riseOf{}, false
	}
	last := ps[len(ps)-1]
	mid, first := -1, -1
	for i := len(ps) - 2; i >= 0; i-- {
		if mid < 0 && !ps[i].at.After(now.Add(-window)) {
			mid = i
			continue
		}
		if mid >= 0 && !ps[i].at.After(now.Add(-4*window)) {
			first = i
			break
		}
	}
	if mid < 0 {
		return riseOf{}, false
	}
	if first < 0 {
		first = 0
	}
	span, earlier := last.at.Sub(ps[mid].at), ps[mid].at.Sub(ps[first].at)
	if earlier < 2*window || span <= 0 {
		return riseOf{}, false
	}
	r := riseOf{got: last.c.Total - ps[mid].c.Total, before: (ps[mid].c.Total - ps[first].c.Total) / earlier.Seconds()}
	r.want = r.before * span.Seconds()
	r.ratio = r.got / math.Max(r.want, 1e-9)
	return r, true
}
