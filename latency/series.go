package latency

import (
	"sort"
)

// seriesDelta is what cur counts since prev, taken series by series (by
// label set) when the histogram sums several (bySeriesDelta), else as a
// whole (wholeDelta); either way each series by the one counter-reset
// rule (reset.go). reset says whether a series restarted.
//
// A histogram of one series, the same in both scrapes, takes the delta of
// the whole (the same figures); so do histograms that changed shape (Triton
// between its counters-only and histogram shapes) or that were not read
// series by series.
func seriesDelta(prev, cur histo) (d histo, reset bool) {
	if !bySeries(prev, cur) {
		return wholeDelta(prev, cur)
	}
	return bySeriesDelta(prev, cur)
}

// bySeriesDelta is each series' delta since prev, summed: its rise, or
// its new values after its own restart, or nothing where it fell
// otherwise (reset.go); a series that was not in prev adds nothing (its
// history is not traffic since prev: a model loaded or a replica joined;
// at most the requests of its first interval are missed); a series gone
// since prev adds nothing either. Taking the delta of the sum instead
// would count every other series' whole history as new requests whenever
// one series restarts or disappears, since the sum then falls.
func bySeriesDelta(prev, cur histo) (d histo, reset bool) {
	d = histo{mean: cur.mean, serverQuantiles: cur.serverQuantiles}
	if cur.mean {
		req, r := reqSeriesDelta(prev.reqSeries, cur.reqSeries, nil)
		d.count, d.timed, d.sum = req.count, req.timed, req.sum
		return d, r
	}
	// Each series' delta on the bounds it shares with its previous
	// scrape, summed onto cur's bounds (the union of its series'): a
	// series without a bound contributes its count at its nearest lower
	// bound, as when summing the series themselves. A series' request
	// counters (Triton's, of the same label set) are judged with it.
	d.bounds = append([]float64(nil), cur.bounds...)
	d.cum = make([]float64, len(d.bounds))
	var req requestCounts
	done := map[string]bool{}
	for _, k := range sortedKeys(cur.series) {
		c := cur.series[k]
		p, ok := prev.series[k]
		if !ok {
			continue
		}
		var pr, cr *requestCounts
		if cur.req.set {
			if r, ok := cur.reqSeries[k]; ok {
				if q, ok := prev.reqSeries[k]; ok {
					pr, cr = &q, &r
				}
			}
		}
		mv := seriesMove(&p, &c, pr, cr)
		reset = reset || mv == restarted
		if cr != nil {
			req = req.plus(reqDelta(*pr, *cr, mv))
			done[k] = true
		}
		sd := histDelta(p, c, mv)
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
	if cur.req.set {
		rest, r := reqSeriesDelta(prev.reqSeries, cur.reqSeries, done)
		d.req = req.plus(rest)
		reset = reset || r
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
		// even of one series: the whole (requests, timed, duration)
		// does not hold the successes and failures the rule judges
		return cur.reqSeries != nil && prev.reqSeries != nil
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
// rules of bySeriesDelta, but of the series done already (judged with
// their histograms).
func reqSeriesDelta(prev, cur map[string]requestCounts, done map[string]bool) (d requestCounts, reset bool) {
	d.set = true
	for _, k := range sortedKeys(cur) {
		p, ok := prev[k]
		if !ok || done[k] {
			continue
		}
		c := cur[k]
		mv := seriesMove(nil, nil, &p, &c)
		reset = reset || mv == restarted
		d = d.plus(reqDelta(p, c, mv))
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
