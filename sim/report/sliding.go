package report

import (
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
	// statistic is then taken by merging its steps (windowRank)
	sorted := slices.Clone(a.latencies)
	for _, sp := range a.spans {
		slices.Sort(sorted[sp.start:sp.end])
	}
	var out []Point
	var heap []run
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
		var v float32
		v, heap = windowRank(sorted, a.spans[lo:i+1], nearestRank(sp.end-from, q), heap)
		out = append(out, Point{T: t, V: round6(float64(v))})
	}
	return out
}

// run is one step's sorted latencies in a merge: next is the value it
// gives next (negated when the merge takes the largest first, so that the
// heap always puts the least key on top), at its index in vals and stop
// the index past the last one it gives, going up or down.
type run struct {
	next     float32
	at, stop int
}

// windowRank returns the value at index k of the ascending order of the
// latencies of spans, each span of vals sorted on its own and at least
// one not empty. It merges the spans from the end of the order nearer k,
// smallest or largest first, through a heap of their next values; heap
// is scratch space, returned for reuse. Latencies are never NaN, so the
// value is the one a sort of the whole window would put at k (a negation
// is exact and reverses the order).
func windowRank(vals []float32, spans []stepSpan, k int, heap []run) (float32, []run) {
	n := 0
	for _, sp := range spans {
		n += sp.end - sp.start
	}
	top := k > n-1-k // nearer the largest: take from the top
	take, step, sign := k+1, 1, float32(1)
	if top {
		take, step, sign = n-k, -1, -1
	}
	heap = heap[:0]
	for _, sp := range spans {
		switch {
		case sp.end == sp.start:
		case top:
			heap = append(heap, run{-vals[sp.end-1], sp.end - 1, sp.start - 1})
		default:
			heap = append(heap, run{vals[sp.start], sp.start, sp.end})
		}
	}
	for i := len(heap)/2 - 1; i >= 0; i-- {
		siftDown(heap, i)
	}
	for ; take > 1; take-- {
		r := &heap[0]
		if r.at += step; r.at == r.stop {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		} else {
			r.next = sign * vals[r.at]
		}
		siftDown(heap, 0)
	}
	return sign * heap[0].next, heap
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
