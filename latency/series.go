package latency

import (
	"math"
	"sort"
)

// seriesDelta is what cur counts since prev, taken series by series (by
// label set) when the histogram sums several: each series' increase since
// prev, or its new values after its own reset; a series that was not in
// prev adds nothing (its history is not traffic since prev: a model loaded
// or a replica joined; at most the requests of its first interval are
// missed); a series gone since prev adds nothing either. Taking the delta
// of the sum instead would count every other series' whole history as new
// requests whenever one series restarts or disappears, since the sum then
// falls. reset says whether a series restarted.
//
// A histogram of one series, the same in both scrapes, takes the delta of
// the whole (the same figures); so do histograms that changed shape (Triton
// between its counters-only and histogram shapes) or that were not read
// series by series.
func seriesDelta(prev, cur histo) (d histo, reset bool) {
	if !bySeries(prev, cur) {
		return delta(prev, cur), cur.count < prev.count
	}
	d = histo{mean: cur.mean, serverQuantiles: cur.serverQuantiles}
	req, reqReset := reqSeriesDelta(prev.reqSeries, cur.reqSeries)
	reset = reqReset
	if cur.mean {
		d.count, d.timed, d.sum = req.count, req.timed, req.sum
		return d, reset
	}
	if cur.req.set {
		d.req = req
	}
	// Each series' delta on the bounds it shares with its previous
	// scrape, summed onto cur's bounds (the union of its series'): a
	// series without a bound contributes its count at its nearest lower
	// bound, as when summing the series themselves.
	d.bounds = append([]float64(nil), cur.bounds...)
	d.cum = make([]float64, len(d.bounds))
	for _, k := range sortedKeys(cur.series) {
		c := cur.series[k]
		p, ok := prev.series[k]
		if !ok {
			continue
		}
		sd := delta(p, c)
		reset = reset || c.count < p.count
		d.count += sd.count
		d.sum += sd.sum
		j, at := 0, 0.0
		for i, le := range d.bounds {
			for j < len(sd.bounds) && sd.bounds[j] <= le {
				at = sd.cum[j]
				j++
			}
			d.cum[i] += at
		}
	}
	return d, reset
}

// bySeries says whether the delta from prev to cur is taken series by
// series.
func bySeries(prev, cur histo) bool {
	if cur.mean != prev.mean || cur.req.set != prev.req.set {
		return false // the shape changed: delta handles it as a restart
	}
	if cur.mean {
		return cur.reqSeries != nil && prev.reqSeries != nil && !sameSingleKey(prev.reqSeries, cur.reqSeries)
	}
	if cur.series == nil || prev.series == nil {
		return false
	}
	if !sameSingleKey(prev.series, cur.series) {
		return true
	}
	return cur.req.set && !sameSingleKey(prev.reqSeries, cur.reqSeries)
}

// sameSingleKey says whether a and b each hold one series, the same.
func sameSingleKey[V any](a, b map[string]V) bool {
	if len(a) != 1 || len(b) != 1 {
		return false
	}
	for k := range a {
		_, ok := b[k]
		return ok
	}
	return false
}

// reqSeriesDelta sums request counters' deltas series by series, by the
// rules of seriesDelta; a decrease of a series' count, timed count,
// duration, successes or failures is its reset (with the failures alone
// falling, the successes would rise by more than the requests).
func reqSeriesDelta(prev, cur map[string]requestCounts) (d requestCounts, reset bool) {
	d.set = true
	for _, k := range sortedKeys(cur) {
		c := cur[k]
		p, ok := prev[k]
		if !ok {
			continue
		}
		if c.count < p.count || c.timed < p.timed || c.sum < p.sum || c.succ < p.succ || c.failures() < p.failures() {
			d = d.plus(c)
			reset = true
			continue
		}
		s := c.minus(p) // no field fell: none below 0
		// nor, the failures not falling, successes above the
		// requests, but for rounding (8.8-1.9 <= 11.3-4.4, yet
		// 4.4-1.9 > 11.3-8.8)
		s.succ = math.Min(s.succ, s.count)
		d = d.plus(s)
	}
	return d, reset
}

// sortedKeys are m's keys in order, so that float sums over series come
// out the same at every run.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
