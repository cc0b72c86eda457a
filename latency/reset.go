package latency

import "math"

// The counter-reset rule, the one both ways of taking a delta use (the
// whole answer's, wholeDelta, and series by series, bySeriesDelta), so
// that a series counts the same alone or beside others. A series'
// counters are of two kinds: those that count its requests (a
// histogram's count; Triton's success and failure counters, whose sum
// is its requests) and the others (the buckets, the timed requests, the
// duration). A histogram's sum of latencies is neither, but for
// Triton's counters alone, whose mean it is: an observation may be
// negative, and Prometheus judges a histogram's reset by its count and
// buckets. From one answer to the next:
//   - none fell: the series counts its rise (counted);
//   - a request counter fell and none rose: the series restarted (its
//     process, or its model reloaded), and counts its new values, from
//     zero, as Prometheus's rate does (restarted);
//   - any other fall (a bucket, Triton's duration, the successes while
//     the failures rise, the failures while the successes rise, a
//     request counter while another rises): the counters are not one process's
//     counting on, nor a restart of one with a history (whose counters
//     all fall: a restart rising past its history in one interval had
//     next to none). The series counts nothing this once, and its values
//     are the base of the next delta (rebased), as a series new since
//     the previous answer is: counting its values as new would count its
//     whole history at once (a spike that can trip the rate check of
//     checkMove), and counting its rise would count a fall as nothing.
//
// A Triton model's request counters and its first-response histogram
// are one series (one label set), judged together; its failures by
// reason are summed into its own (tritonCounterSum).

// move is what one series' counters did from one answer to the next.
type move int

const (
	counted   move = iota // none fell: the rise is counted
	restarted             // restarted: the new values are counted
	rebased               // fell otherwise: nothing counted this once
)

// fallJudge judges one series' counters, given a pair (previous,
// current) at a time.
type fallJudge struct{ fell, reqFell, reqRose bool }

// requests takes a counter of the series' requests.
func (j *fallJudge) requests(prev, cur float64) {
	switch {
	case cur < prev:
		j.fell, j.reqFell = true, true
	case cur > prev:
		j.reqRose = true
	}
}

// other takes another counter of the series.
func (j *fallJudge) other(prev, cur float64) {
	if cur < prev {
		j.fell = true
	}
}

// move is the judgement of the counters given.
func (j *fallJudge) move() move {
	switch {
	case !j.fell:
		return counted
	case j.reqFell && !j.reqRose:
		return restarted
	}
	return rebased
}

// seriesMove is the move of one series' counters from prev to cur: its
// histogram's (ph to ch; nil: none) and its request counters' (pr to cr;
// nil: none), together. A histogram's requests are its count; Triton's,
// its successes and its failures (its first-response histogram and its
// request counters of one model are one series: a reload restarts them
// all). The other counters are the buckets on the bounds both have and,
// for Triton's counters alone (mean), the duration and the timed
// requests; the request counters' timed requests and duration. A
// histogram's sum is none: an observation may be negative (a clock
// stepped back while a request was timed), and Prometheus judges a
// histogram's reset by its count and buckets alone; its delta is clamped
// at 0 (histDelta). A histogram whose
// buckets have no bound in common with before (the layout changed, as a
// restart changes it) restarted, where nothing fell.
func seriesMove(ph, ch *histo, pr, cr *requestCounts) move {
	var j fallJudge
	if ph != nil && ch != nil {
		j.requests(ph.count, ch.count)
		if ch.mean {
			j.other(ph.sum, ch.sum)
			j.other(ph.timed, ch.timed)
		}
		for i, le := range ch.bounds {
			if p, ok := ph.cumAt(le); ok {
				j.other(p, ch.cum[i])
			}
		}
	}
	if pr != nil && cr != nil {
		j.requests(pr.succ, cr.succ)
		j.requests(pr.failures(), cr.failures())
		j.other(pr.timed, cr.timed)
		j.other(pr.sum, cr.sum)
	}
	mv := j.move()
	if mv == counted && ph != nil && ch != nil && !ch.mean && !commonBound(*ph, *ch) && (len(ch.bounds) > 0 || len(ph.bounds) > 0) {
		// (a series without a bucket, now and before, keeps its
		// layout: none)
		mv = restarted
	}
	return mv
}

// reqDelta is what a series' request counters count from prev to cur,
// moved mv (seriesMove). Counted, no field fell: none is below 0, nor, the
// failures not falling, the successes above the requests but for
// rounding (8.8-1.9 <= 11.3-4.4, yet 4.4-1.9 > 11.3-8.8).
func reqDelta(prev, cur requestCounts, mv move) requestCounts {
	switch mv {
	case restarted:
		return cur
	case rebased:
		return requestCounts{set: true}
	}
	d := cur.minus(prev)
	d.succ = math.Min(d.succ, d.count)
	return d
}

// histDelta is what a histogram's own counters (count, sum, buckets;
// timed where mean) count from prev to cur, moved mv (seriesMove); req,
// series and reqSeries are left out (the caller's). Counted, buckets are
// taken on the bounds both have, and a sum that fell counts 0.
func histDelta(prev, cur histo, mv move) histo {
	switch mv {
	case restarted:
		return histo{bounds: cur.bounds, cum: cur.cum, count: cur.count, sum: cur.sum, timed: cur.timed, mean: cur.mean, serverQuantiles: cur.serverQuantiles}
	case rebased:
		return histo{bounds: cur.bounds, cum: make([]float64, len(cur.cum)), mean: cur.mean, serverQuantiles: cur.serverQuantiles}
	}
	d := histo{count: cur.count - prev.count, sum: math.Max(0, cur.sum-prev.sum), mean: cur.mean, serverQuantiles: cur.serverQuantiles}
	if cur.mean {
		d.timed = cur.timed - prev.timed
	}
	for i, le := range cur.bounds {
		if p, ok := prev.cumAt(le); ok {
			d.bounds = append(d.bounds, le)
			d.cum = append(d.cum, cur.cum[i]-p)
		}
	}
	// cumulative deltas can only stay cumulative if non-decreasing; a
	// bucket dropped between scrapes can break that, clamp.
	for i := 1; i < len(d.cum); i++ {
		if d.cum[i] < d.cum[i-1] {
			d.cum[i] = d.cum[i-1]
		}
	}
	if len(d.cum) > 0 && d.cum[len(d.cum)-1] > d.count {
		d.cum[len(d.cum)-1] = d.count
		for i := len(d.cum) - 2; i >= 0; i-- {
			d.cum[i] = math.Min(d.cum[i], d.cum[i+1])
		}
	}
	return d
}

// commonBound says whether prev and cur have a bucket bound in common.
func commonBound(prev, cur histo) bool {
	for _, le := range cur.bounds {
		if _, ok := prev.cumAt(le); ok {
			return true
		}
	}
	return false
}

// wholeDelta is cur - prev taken as one series, by the rule above: its
// histogram's counters and its request counters (Triton's, req)
// together. reset says whether it restarted. An answer whose shape
// changed (Triton between its counters-only and histogram shapes) counts
// as restarted: the shapes' counts are not comparable.
func wholeDelta(prev, cur histo) (d histo, reset bool) {
	if cur.mean != prev.mean || cur.req.set != prev.req.set {
		cur.series, cur.reqSeries = nil, nil
		return cur, true
	}
	var pr, cr *requestCounts
	if cur.req.set {
		pr, cr = &prev.req, &cur.req
	}
	mv := seriesMove(&prev, &cur, pr, cr)
	d = histDelta(prev, cur, mv)
	if cur.req.set {
		d.req = reqDelta(prev.req, cur.req, mv)
	}
	return d, mv == restarted
}
