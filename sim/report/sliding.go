package report

import (
	"math"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// QuantileWindow is the sliding window the latency plot takes its
// quantiles over: a quantile of one step's few requests is noise (at 6
// requests per second, a 1 s step's p99 is its slowest request).
const QuantileWindow = time.Minute

// maxWindowPoints bounds the points of a windowed series: a longer run is
// sampled at evenly spaced steps (a plot has fewer pixels than that).
const maxWindowPoints = 2000

// Point is one value of a series at T seconds since the start of the run.
type Point struct {
	T, V float64
}

// stepSpan is where one step's latencies are in tenantAcc.latencies.
type stepSpan struct {
	step       int // index into Recorder.steps
	start, end int
}

// WindowQuantiles returns, at the end of each step, the nearest-rank
// q-quantile (in seconds) of the latencies of the tenant's requests that
// completed in the sliding window (T-window, T]; a step whose window holds
// none has no point. At most maxWindowPoints steps, evenly spaced, are
// computed.
func (r *Recorder) WindowQuantiles(tenant string, q float64, window time.Duration) []Point {
	a := r.tenants[tenant]
	if a == nil || len(r.steps) == 0 {
		return nil
	}
	stride := (len(r.steps) + maxWindowPoints - 1) / maxWindowPoints
	w := window.Seconds()
	// each step's latencies sorted on their own: a window's order
	// statistic is then taken by merging its steps (ranker)
	rk := ranker{vals: slices.Clone(a.latencies)}
	sortSpans(rk.vals, a.spans)
	var out []Point
	lo := 0 // first span inside the window
	for i, sp := range a.spans {
		t := r.steps[sp.step].T
		for lo < i && r.steps[a.spans[lo].step].T <= t-w+1e-9 {
			lo++
		}
		if sp.step%stride != 0 && sp.step != len(r.steps)-1 {
			continue
		}
		from := a.spans[lo].start
		if from == sp.end {
			continue
		}
		v := rk.rank(a.spans[lo:i+1], nearestRank(sp.end-from, q))
		out = append(out, Point{T: t, V: round6(float64(v))})
	}
	return out
}

// sortSpans sorts each span of latencies (never NaN, nor -0: a
// duration's seconds) on its own, as slices.Sort would: a long one by a
// radix sort of the values' order keys (floatKey), byte by byte from the
// lowest, skipping a byte all its keys share; a short one by slices.Sort.
func sortSpans(vals []float32, spans []stepSpan) {
	var keys, tmp []uint32
	for _, sp := range spans {
		a := vals[sp.start:sp.end]
		if len(a) < radixSortMin {
			slices.Sort(a)
			continue
		}
		keys, tmp = slices.Grow(keys[:0], len(a)), slices.Grow(tmp[:0], len(a))[:len(a)]
		var count [4][256]int
		for _, v := range a {
			k := floatKey(v)
			keys = append(keys, k)
			count[0][k&0xff]++
			count[1][k>>8&0xff]++
			count[2][k>>16&0xff]++
			count[3][k>>24]++
		}
		src, dst := keys, tmp
		for d := range 4 {
			c, shift := &count[d], 8*d
			if c[src[0]>>shift&0xff] == len(src) {
				continue // every key has this byte
			}
			sum := 0
			for i, n := range c {
				c[i] = sum
				sum += n
			}
			for _, k := range src {
				b := k >> shift & 0xff
				dst[c[b]] = k
				c[b]++
			}
			src, dst = dst, src
		}
		for i, k := range src {
			a[i] = keyFloat(k)
		}
	}
}

// radixSortMin is the shortest span sortSpans sorts by radix: below it
// the four passes' counts cost more than a comparison sort.
const radixSortMin = 48

// keyFloat is the value of a floatKey (+0 for either zero).
func keyFloat(k uint32) float32 {
	if k>>31 == 1 {
		return math.Float32frombits(k &^ (1 << 31))
	}
	return math.Float32frombits(^k)
}

// ranker finds order statistics of windows of latencies, each step's span
// of vals sorted on its own. Latencies are never NaN, so a value it finds
// is the one a sort of the whole window would put at its index.
type ranker struct {
	vals []float32
	heap []run // scratch of merge
	cuts []cut // scratch of rank
	// last is the value found last (when found): the next window's is
	// usually near it, so the next search starts there
	last  float32
	found bool
}

// run is a part of one step's sorted latencies in a merge: next is the
// value it gives next (negated when the merge takes the largest first, so
// that the heap always puts the least key on top), at its index in vals
// and stop the index past the last one it gives, going up or down.
type run struct {
	next     float32
	at, stop int
}

// cut is where a value falls in a span: vals[lo:hi] equal it, those
// before lo are below it and those from hi on above.
type cut struct{ lo, hi int }

// rank returns the value at index k of the ascending order of the
// latencies of spans, at least one of them not empty.
func (r *ranker) rank(spans []stepSpan, k int) float32 {
	r.heap = r.heap[:0]
	var v float32
	if !r.found {
		// merge from the end of the order nearer k
		n := 0
		for _, sp := range spans {
			n += sp.end - sp.start
		}
		up := k <= n-1-k
		for _, sp := range spans {
			r.push(sp.start, sp.end, up)
		}
		take := k + 1
		if !up {
			take = n - k
		}
		v = r.merge(take, up)
	} else {
		// the last value g cuts each span into the latencies below it,
		// equal to it and above it; the value at k is g, or found by
		// merging upwards from above g or downwards from below it
		g := r.last
		below, upto := 0, 0
		r.cuts = r.cuts[:0]
		for _, sp := range spans {
			i, j := sp.start, sp.end // first index not below g
			for i < j {
				m := int(uint(i+j) >> 1)
				if r.vals[m] < g {
					i = m + 1
				} else {
					j = m
				}
			}
			j = i // first index above g
			for j < sp.end && r.vals[j] == g {
				j++
			}
			below += i - sp.start
			upto += j - sp.start
			r.cuts = append(r.cuts, cut{i, j})
		}
		switch {
		case k < below: // downwards from below g
			for s, sp := range spans {
				r.push(sp.start, r.cuts[s].lo, false)
			}
			v = r.merge(below-k, false)
		case k >= upto: // upwards from above g
			for s, sp := range spans {
				r.push(r.cuts[s].hi, sp.end, true)
			}
			v = r.merge(k-upto+1, true)
		default:
			v = g
		}
	}
	r.last, r.found = v, true
	return v
}

// push adds vals[from:to] to the merge, if not empty: from its smallest
// (up) or its largest.
func (r *ranker) push(from, to int, up bool) {
	switch {
	case from == to:
	case up:
		r.heap = append(r.heap, run{r.vals[from], from, to})
	default:
		r.heap = append(r.heap, run{-r.vals[to-1], to - 1, from - 1})
	}
}

// merge returns the take-th value (from 1) of the runs in r.heap merged
// upwards or downwards.
func (r *ranker) merge(take int, up bool) float32 {
	step, sign := 1, float32(1)
	if !up {
		step, sign = -1, -1
	}
	heap := r.heap
	for i := len(heap)/2 - 1; i >= 0; i-- {
		siftDown(heap, i)
	}
	for ; take > 1; take-- {
		h := &heap[0]
		if h.at += step; h.at == h.stop {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		} else {
			h.next = sign * r.vals[h.at]
		}
		siftDown(heap, 0)
	}
	return sign * heap[0].next
}

// siftDown moves heap[i] down to its place in the min-heap of next keys.
func siftDown(heap []run, i int) {
	for {
		c := 2*i + 1
		if c >= len(heap) {
			return
		}
		if c+1 < len(heap) && heap[c+1].next < heap[c].next {
			c++
		}
		if !(heap[c].next < heap[i].next) {
			return
		}
		heap[i], heap[c] = heap[c], heap[i]
		i = c
	}
}

// Change is a setting a policy applied during the run; the plots mark it.
type Change struct {
	Time   time.Time
	GPU    string // UUID
	Tenant string // "" for a setting of the whole GPU
	Knob   gpu.Knob
	To     string
}

// AddChange records an applied change. Changes before the run's start, or
// in a run without a start time, are not shown.
func (r *Recorder) AddChange(c Change) { r.changes = append(r.changes, c) }

// Changes returns the recorded changes in the order they were added. The
// slice is shared.
func (r *Recorder) Changes() []Change { return r.changes }

// changeTimes returns the distinct times, in seconds since the start of
// the run and ascending, of the changes on the GPU with uuid ("" for every
// GPU).
func (r *Recorder) changeTimes(uuid string) []float64 {
	if r.meta.Start.IsZero() {
		return nil
	}
	var out []float64
	for _, c := range r.changes {
		t := c.Time.Sub(r.meta.Start).Seconds()
		if t < 0 || (uuid != "" && c.GPU != uuid) {
			continue
		}
		out = append(out, round6(t))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
