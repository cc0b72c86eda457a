package report

import (
	"math"
	"sort"
)

// A window keeps a uniform sample of its latencies beyond its limit
// (TenantWindow.Latencies), and a run's later windows keep fewer once its
// budget of latencies is spent: pooled as they are, a sampled window's
// latencies would weigh as little as the sample is small. The run's
// percentiles and its busy stretch's quantile weigh each kept latency by
// the requests it stands for, its window's judged over kept, so that each
// window counts as many requests as it judged. Where every window kept
// all (every weight 1) they are the plain nearest rank, worked out as
// before.

// sampledSpan is a step whose window kept fewer latencies than it judged
// (TenantWindow.Judged): its span's latencies stand for judged requests.
type sampledSpan struct {
	span   int // index into tenantAcc.spans
	judged int
}

// weightedSpan is a run of latencies, lat[start:end], each standing for w
// requests.
type weightedSpan struct {
	start, end int
	w          float64
}

// weighted returns a's steps from to to (indices into a.spans) as
// weighted spans, each latency weighing its window's judged over kept,
// and the requests they stand for. A step that kept no latency stands for
// none: what it judged has no latency to weigh.
func (a *tenantAcc) weighted(from, to int) (spans []weightedSpan, n int) {
	j := sort.Search(len(a.sampled), func(i int) bool { return a.sampled[i].span >= from })
	spans = make([]weightedSpan, 0, to-from)
	for i := from; i < to; i++ {
		sp := a.spans[i]
		kept := sp.end - sp.start
		if kept == 0 {
			continue
		}
		judged := kept
		if j < len(a.sampled) && a.sampled[j].span == i {
			judged = a.sampled[j].judged
			j++
		}
		spans = append(spans, weightedSpan{start: sp.start, end: sp.end, w: float64(judged) / float64(kept)})
		n += judged
	}
	return spans, n
}

// quantiles returns the nearest-rank median and 99th percentile (in
// seconds, 6 significant digits) of a's latencies over the run, each
// window's weighing the requests it judged; nil when there are none.
func (a *tenantAcc) quantiles() (p50, p99 *float64) {
	if len(a.sampled) == 0 {
		return quantiles32(a.latencies)
	}
	spans, n := a.weighted(0, len(a.spans))
	if n == 0 {
		return nil, nil
	}
	v := weightedRanks(a.latencies, spans, rankOf(n, 0.5), rankOf(n, 0.99))
	x, y := round6(float64(v[0])), round6(float64(v[1]))
	return &x, &y
}

// rankOf is the 1-based nearest rank of the q-quantile of n values.
func rankOf(n int, q float64) float64 { return float64(nearestRank(n, q) + 1) }

// weightedRanks returns, for each rank (ascending, from 1 to the spans'
// total weight), the smallest latency of the spans such that those at or
// below it weigh at least the rank: the weighted nearest rank, which with
// every weight 1 is the plain one. It counts the weights by the leading
// bits of the values' keys (as orderStats32 counts values), then by the
// rest among the values of each wanted bucket: two passes over the
// latencies, none copied. A NaN weighs nothing. Weights summed in floating
// point may fall short of a rank by rounding: a shortfall under a
// billionth of the total counts as reaching it.
func weightedRanks(lat []float32, spans []weightedSpan, ranks ...float64) []float32 {
	const shift = 32 - radixBits
	out := make([]float32, len(ranks))
	if len(ranks) == 0 {
		return out
	}
	hist := make([]float64, 1<<radixBits)
	total := 0.0
	for _, sp := range spans {
		for _, v := range lat[sp.start:sp.end] {
			if v == v {
				hist[floatKey(v)>>shift] += sp.w
			}
		}
		total += sp.w * float64(sp.end-sp.start)
	}
	tol := total * 1e-9
	// the bucket of each rank and the weight below it
	buckets, below := make([]uint32, len(ranks)), make([]float64, len(ranks))
	pick := func(h []float64, base float64, wants []float64, bs []uint32, bel []float64) {
		cum, j, last := base, 0, 0
		for b, w := range h {
			if w == 0 {
				continue
			}
			last = b
			for j < len(wants) && cum+w >= wants[j]-tol {
				bs[j], bel[j] = uint32(b), cum
				j++
			}
			cum += w
		}
		for ; j < len(wants); j++ { // short by more than rounding: the largest
			bs[j], bel[j] = uint32(last), cum-h[last]
		}
	}
	pick(hist, 0, ranks, buckets, below)
	// then each wanted bucket by the rest of the key
	for i := range ranks {
		if i > 0 && buckets[i] == buckets[i-1] {
			continue
		}
		clear(hist)
		b := buckets[i]
		for _, sp := range spans {
			for _, v := range lat[sp.start:sp.end] {
				if k := floatKey(v); v == v && k>>shift == b {
					hist[k&(1<<shift-1)] += sp.w
				}
			}
		}
		// the ranks in this bucket
		e := i + 1
		for e < len(ranks) && buckets[e] == b {
			e++
		}
		lows, bel := make([]uint32, e-i), make([]float64, e-i)
		pick(hist, below[i], ranks[i:e], lows, bel)
		for j, lo := range lows {
			out[i+j] = keyFloat(b<<shift | lo)
		}
	}
	return out
}

// busyLatency is the latency at a's SLO quantile over the requests that
// ended in its busy stretch, a dropped one counting as later than any
// completed (it never met the target), each kept latency weighing the
// requests its window judged (weighted); ok is false when none ended
// there, and v is +Inf when the quantile falls on a dropped request.
func busyLatency(a *tenantAcc) (v float64, ok bool) {
	peak := 0
	for _, m := range a.minutes {
		peak = max(peak, m.ended)
	}
	if peak == 0 {
		return 0, false
	}
	busy := func(m minuteSpan) bool { return float64(m.ended) >= BusyFraction*float64(peak) }
	size, dropped, sampled := 0, 0, false
	for _, m := range a.minutes {
		if busy(m) {
			size += m.end - m.start
			dropped += m.dropped
			sampled = sampled || m.sampled
		}
	}
	if sampled {
		return busyWeighted(a, busy, dropped)
	}
	// the busy minutes' latencies, copied into one allocation
	lat := make([]float32, 0, size)
	for _, m := range a.minutes {
		if busy(m) {
			lat = append(lat, a.latencies[m.start:m.end]...)
		}
	}
	n := len(lat) + dropped
	if n == 0 {
		return 0, false
	}
	i := nearestRank(n, a.sloQuantile)
	if i >= len(lat) {
		return math.Inf(1), true
	}
	if len(lat) < radixMin {
		// lat is this call's own copy: selected in place
		return round6(float64(orderStats(lat, i)[0])), true
	}
	return round6(float64(orderStats32(lat, i)[0])), true
}

// busyWeighted is busyLatency over busy minutes of which some kept a
// sample of their latencies.
func busyWeighted(a *tenantAcc, busy func(minuteSpan) bool, dropped int) (float64, bool) {
	var spans []weightedSpan
	completed := 0
	for _, m := range a.minutes {
		if busy(m) {
			s, n := a.weighted(m.spanFrom, m.spanTo)
			spans = append(spans, s...)
			completed += n
		}
	}
	n := completed + dropped
	if n == 0 {
		return 0, false
	}
	i := nearestRank(n, a.sloQuantile)
	if i >= completed {
		return math.Inf(1), true
	}
	return round6(float64(weightedRanks(a.latencies, spans, float64(i+1))[0])), true
}
