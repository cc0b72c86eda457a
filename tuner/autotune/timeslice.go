package autotune

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The time-slice level is searched, not set by rule: which level helps a
// latency tenant depends on how long its work runs against a slice (a
// request much longer than a slice pays a context switch and a wait for
// every other context at each slice; one much shorter waits less with
// shorter slices), and neither the kernel lengths nor the durations of
// the levels are known on a real host (nvidia-smi names the levels, the
// driver does not publish their durations). So on a sustained violation
// the policy tries another level, judges it after TrialDwell by the GPU's
// SLO error while it was in effect (from the request counters, State.History),
// keeps it when it is better than the level before by TrialGain, and
// otherwise goes back and tries another direction. A level judged worse
// is not tried again for TrialHold.

// timeSliceLevels are the levels on a line, as levelOrder orders them.
var timeSliceLevels = []gpu.TimeSliceLevel{gpu.TimeSliceShort, gpu.TimeSliceDefault, gpu.TimeSliceMedium, gpu.TimeSliceLong}

// levelMeasure is what the trail says of one level.
type levelMeasure struct {
	err      float64   // the GPU's SLO error while the level was in effect
	at       time.Time // when it was left (the measurement's end)
	known    bool
	reverted bool // it was a trial judged worse and undone
}

// timeSliceNote is the part of every time-slice reason that says why the
// level is the knob.
const timeSliceNote = "plain time-slicing has no per-process weights (no driver control weights a process), so the time-slice level is the knob"

// timeSlice decides the compute time-slice level of a time-sliced GPU by
// trial and judgement (see above).
func (p *Autotune) timeSlice(s *tuner.State, d *gpu.Device, ds domainSignals) []tuner.Action {
	t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobComputeTimeSlice}
	if d.ComputeTimeSlice == "" || !s.Changeable(t) {
		return nil
	}
	if len(ds.latency) == 0 {
		// no latency tenant left: the level the tuner set goes back as on
		// slack (below), an operator's is left alone (held while one is
		// away: Decide)
		if _, ok := s.Originals[t.String()]; !ok {
			return nil
		}
	} else if len(ds.latency)+len(ds.unjudged)+len(ds.others) < 2 {
		return nil
	}
	cur := tuner.Level(d.ComputeTimeSlice)
	a := tuner.Action{Target: t, GPUIndex: d.Index, Current: cur}
	var hist []tuner.Change
	for _, c := range s.History[t.DomainKey()] {
		if _, ok := c.To.(tuner.Level); ok {
			hist = append(hist, c)
		}
	}
	// A level set by someone else breaks the trail: start over.
	if n := len(hist); n > 0 && hist[n-1].To != tuner.Value(cur) {
		hist = nil
	}
	// A violation is sustained when the SLO window's quantile is past the
	// target too, over enough requests for that quantile to be defined: a
	// minute's burn alone may be a few slow requests, and a trial costs
	// every tenant of the GPU its dwell.
	var w *member
	for _, m := range ds.latency {
		if m.violating && m.hasRatio && m.ratio > 1 && m.slo.WindowRequests >= quantileRequests(m.slo.Quantile) &&
			m.worseThan(w) {
			w = m
		}
	}
	if w == nil {
		if ds.anyViolating {
			return nil // hold: not sustained
		}
		orig, ok := s.Originals[t.String()].(tuner.Level)
		if !ok {
			orig = tuner.Level(gpu.TimeSliceDefault)
		}
		if !ds.allSlack || cur == orig || !quiet(s, d.UUID, gpu.KnobComputeTimeSlice, p.P.SlackDwell) {
			return nil
		}
		a.Want, a.Relax = orig, true
		a.Reason = fmt.Sprintf("%s since the last change over %v ago: back to the original %s time slice (judged after the revert delay, and put back if the SLO error rises); %s",
			ds.slackWhy(), p.P.SlackDwell, orig, timeSliceNote)
		return []tuner.Action{a}
	}
	measures := p.levelMeasures(s, d.UUID, hist)
	var last tuner.Change
	trial := false
	if n := len(hist); n > 0 {
		last = hist[n-1]
		trial = !last.Revert
	}
	var curErr float64
	var dir float64
	var judged string
	switch {
	case trial:
		age := s.Now.Sub(last.At)
		e, ok := p.spanError(s, d.UUID, last.Counters, tuner.RequestCounts(s.Snapshot))
		if !ok {
			return nil // too few requests to judge by
		}
		curErr = e
		from, _ := last.From.(tuner.Level)
		prev := measures[from]
		if age < p.P.TrialDwell {
			// Being judged; one that is clearly worse already (another
			// tenant of the GPU starts missing) is undone at once.
			if !prev.known || curErr < prev.err*(1+p.P.TrialGain)+tuner.RevertMargin {
				return nil
			}
			a.Want, a.Revert = from, true
			a.Reason = fmt.Sprintf("the %s time slice, tried since %v ago, is clearly worse: the GPU's SLO error is %.2f under it against %.2f under %s: back to %s before its judgement is due; %s is not tried again for %v; %s",
				cur, age.Round(time.Second), curErr, prev.err, from, from, cur, p.P.TrialHold, timeSliceNote)
			return []tuner.Action{a}
		}
		if prev.known && curErr >= prev.err*(1-p.P.TrialGain) {
			a.Want, a.Revert = from, true
			a.Reason = fmt.Sprintf("the %s time slice, tried since %v ago, is judged: the GPU's SLO error was %.2f under it against %.2f under %s, not %.0f%% better: back to %s; %s is not tried again for %v; %s",
				cur, age.Round(time.Second), curErr, prev.err, from, 100*p.P.TrialGain, from, cur, p.P.TrialHold, timeSliceNote)
			return []tuner.Action{a}
		} else if prev.known {
			judged = fmt.Sprintf("the %s time slice, tried since %v ago, is kept: the GPU's SLO error was %.2f under it against %.2f under %s; ",
				cur, age.Round(time.Second), curErr, prev.err, from)
		}
		dir = tuner.Direction(tuner.Action{Current: last.From, Want: last.To})
	case harmed(hist, s.Now, p.P.TrialDwell, p.P.TrialHold):
		// The last trial was undone early because it hurt a tenant: a
		// trial costs the other tenants its interval, so the search
		// stops for TrialHold rather than trying the next level now.
		return nil
	default:
		if m := measures[cur]; m.known {
			curErr = m.err
		} else {
			curErr = tuner.Objective(s, d.UUID)
		}
	}
	next, ok := p.nextLevel(s.Now, cur, curErr, dir, measures)
	if !ok {
		return nil // every other level is held as worse: nothing left to try
	}
	a.Want = next
	a.Reason = fmt.Sprintf("%s%s violates its SLO (error budget burning %.1fx over the last %v; the GPU's SLO error %.2f under the %s time slice): try the %s time slice and judge it after %v by the SLO error under it (kept if %.0f%% better, else undone); %s",
		judged, w.name, w.burn, s.Fast[w.name].Over.Round(time.Second), curErr, cur, next, p.P.TrialDwell, 100*p.P.TrialGain, timeSliceNote)
	return []tuner.Action{a}
}

// harmed says whether the trail's last change undid a trial before its
// judgement was due (it was clearly worse), less than hold ago.
func harmed(hist []tuner.Change, now time.Time, dwell, hold time.Duration) bool {
	n := len(hist)
	if n < 2 {
		return false
	}
	last, tried := hist[n-1], hist[n-2]
	return last.Revert && !tried.Revert && last.At.Sub(tried.At) < dwell && now.Sub(last.At) < hold
}

// levelMeasures reads, from the trail of level changes, each level's SLO
// error while it was last in effect within TrialHold, and which levels
// were judged worse and undone.
func (p *Autotune) levelMeasures(s *tuner.State, uuid string, hist []tuner.Change) map[tuner.Level]levelMeasure {
	out := map[tuner.Level]levelMeasure{}
	for i, c := range hist {
		if s.Now.Sub(c.At) > p.P.TrialHold {
			continue
		}
		from, ok := c.From.(tuner.Level)
		if !ok {
			continue
		}
		m := levelMeasure{at: c.At}
		if i > 0 {
			m.err, m.known = p.spanError(s, uuid, hist[i-1].Counters, c.Counters)
		}
		if !m.known && c.Counters != nil && i == 0 {
			// The first level's span began before the trail: the fast
			// window when it was left is what there is.
			m.err, m.known = c.Error, true
		}
		m.reverted = c.Revert
		if old := out[from]; !m.known && old.known {
			m.err, m.known = old.err, true
		}
		out[from] = m
	}
	return out
}

// nextLevel chooses the level to try from cur: not one judged worse (or
// measured no better than cur) within TrialHold; first on in the
// direction dir that helped last, then the nearest, ties going to the
// longer slice (fewer context switches cost no one throughput).
func (p *Autotune) nextLevel(now time.Time, cur tuner.Level, curErr, dir float64, ms map[tuner.Level]levelMeasure) (tuner.Level, bool) {
	type cand struct {
		l          tuner.Level
		dist, side float64
	}
	var cs []cand
	for _, l := range timeSliceLevels {
		lv := tuner.Level(l)
		if lv == cur {
			continue
		}
		if m, ok := ms[lv]; ok && now.Sub(m.at) <= p.P.TrialHold && (m.reverted || (m.known && m.err >= curErr*(1-p.P.TrialGain))) {
			continue
		}
		side := tuner.Direction(tuner.Action{Current: cur, Want: lv})
		cs = append(cs, cand{lv, float64(lv.Order() - cur.Order()), side})
	}
	if len(cs) == 0 {
		return "", false
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if dir != 0 && (a.side == dir) != (b.side == dir) {
			return a.side == dir
		}
		if da, db := math.Abs(a.dist), math.Abs(b.dist); da != db {
			return da < db
		}
		return a.side > b.side
	})
	return cs[0].l, true
}

// spanError is the GPU's SLO error between two readings of the request
// counters: each latency tenant's error-budget burn over the requests
// that ended in between, weighted as objective weighs it. False when no
// tenant had enough requests (MinRequests, and at least what its quantile
// needs), and when any tenant's counters restarted in between
// (RequestCount.Since): an error without that tenant would be compared
// with one that had it, and a level that starved it judged by the others.
func (p *Autotune) spanError(s *tuner.State, uuid string, from, to map[string]tuner.RequestCount) (float64, bool) {
	if from == nil || to == nil {
		return 0, false
	}
	j, ok := 0.0, false
	for _, lt := range tuner.LatencyTenantsOn(s, uuid) {
		a, okA := from[lt.Name]
		b, okB := to[lt.Name]
		if !okA || !okB {
			continue
		}
		d, same := b.Since(a)
		if !same {
			return 0, false
		}
		total, good := d.Total, d.Good
		if total < max(p.P.MinRequests, quantileRequests(lt.Quantile)) {
			continue
		}
		j += tuner.WeightedBurn((1-good/total)/math.Max(1-lt.Quantile, 1e-3), lt.Priority)
		ok = true
	}
	return j, ok
}

// quantileRequests is how many requests a q-quantile needs to be defined
// by the data, 1/(1-q): with fewer, a single slow request breaks it.
func quantileRequests(q float64) float64 {
	return 1 / math.Max(1-q, 1e-3)
}
