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
	var out []Point
	var scratch []float32
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
		scratch = append(scratch[:0], a.latencies[from:sp.end]...)
		slices.Sort(scratch)
		out = append(out, Point{T: t, V: *quantile32(scratch, q)})
	}
	return out
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
