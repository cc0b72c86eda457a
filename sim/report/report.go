// Package report turns the simulator's ground-truth windows into what
// vgpusim shows and writes: a time series (one step per window) per tenant
// and per GPU, a run summary, CSV and JSON files and PNG plots.
//
// Every figure is computed from the windows alone, so the same windows give
// the same bytes: percentiles are nearest-rank over the exact request
// latencies (where a window kept a sample of them, each kept one weighing
// its window's requests over those kept: weighted.go); SLO attainment is
// good requests over completed plus dropped ones (a request the server
// rejected or lost did not meet its objective; under an ITL SLO, good
// tokens over those served and those the dropped requests will never
// produce: TenantWindow.Ended), and over the whole run also those still
// waiting at its end that are already past the target; shares and
// utilization are time-weighted means.
package report

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/parallel"
)

// Meta describes a run.
type Meta struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	Policy      string `json:"policy"`
	Seed        int64  `json:"seed"`
	// Settings are the policy's settings beyond its defaults, one per
	// flag ("enable-knob pause_duty", "autotune.param pause_gain=0.15"),
	// so that a run's figures say what made them; none for the defaults.
	Settings []string      `json:"settings,omitempty"`
	Start    time.Time     `json:"start"`
	Step     time.Duration `json:"-"`
	Duration time.Duration `json:"-"`
}

// TenantStep is one tenant's figures over one step. P50 and P99 are nil
// when the step holds no completed request; Attainment is nil when no
// request ended in it (completed or dropped) or the tenant has no SLO.
type TenantStep struct {
	Tenant     string   `json:"tenant"`
	GPU        string   `json:"gpu"`
	Completed  int      `json:"completed"`
	Good       int      `json:"good"`
	Attainment *float64 `json:"attainment"`
	P50        *float64 `json:"p50_seconds"`
	P99        *float64 `json:"p99_seconds"`
	// SLOQuantile and SLOTarget are the tenant's objective; zero when it
	// has none.
	SLOQuantile float64 `json:"slo_quantile"`
	SLOTarget   float64 `json:"slo_target_seconds"`
	// Throughput is completed requests per second.
	Throughput float64 `json:"throughput_rps"`
	// WorkRate is the simulator's useful work per second: FLOP/s for
	// inference, steps/s for training (docs/simulator.md).
	WorkRate float64 `json:"work_per_second"`
	SMShare  float64 `json:"sm_share"`
	BWShare  float64 `json:"bw_share"`
	OOMs     int     `json:"ooms"`
	// Dropped is requests rejected (queue full) or lost (process stopped).
	Dropped int `json:"dropped"`
}

// GPUStep is one GPU's figures over one step.
type GPUStep struct {
	UUID       string  `json:"uuid"`
	Index      int     `json:"index"`
	SMActive   float64 `json:"sm_active"`
	DRAMActive float64 `json:"dram_active"`
	PowerW     float64 `json:"power_watts"`
	SMClockMHz float64 `json:"sm_clock_mhz"`
}

// Step is one window of the run. T is the window's end in seconds since
// the start of the run.
type Step struct {
	T       float64      `json:"t_seconds"`
	Seconds float64      `json:"-"` // window length
	Tenants []TenantStep `json:"tenants"`
	GPUs    []GPUStep    `json:"gpus"`
}

// Recorder accumulates windows into a series and keeps every latency for
// the run's percentiles.
type Recorder struct {
	meta  Meta
	steps []Step

	tenants map[string]*tenantAcc
	order   []string // tenants in order of first appearance
	gpus    map[string]*gpuAcc
	gorder  []string
	elapsed float64

	// minute is the goodput window being filled; minuteN its index.
	minute  map[string]*minuteAcc
	minuteN int
	// gpuMinutes and heldMinutes count the closed goodput windows per GPU
	// and those in which every SLO on the GPU held.
	gpuMinutes, heldMinutes int

	changes []Change

	// summary is the Summary of the first summaryOf steps, for the next
	// call without an Add between (each Add records a step)
	mu        sync.Mutex
	summary   *Summary
	summaryOf int
}

type tenantAcc struct {
	gpu string
	// latencies of every completed request, in seconds; float32 keeps
	// seven significant digits (more than the reports show) in half the
	// memory of a time.Duration.
	latencies   []float32
	completed   int
	ended       int // what ended, good or not (TenantWindow.Ended)
	good        int
	work        float64
	smShareSec  float64 // share x seconds
	bwShareSec  float64
	seconds     float64
	ooms        int
	dropped     int
	overdue     int     // at the end of the last window
	redo        int     // steps lost and not yet redone, at the end of the last window
	goodWork    float64 // work in goodput windows whose SLOs held
	sloQuantile float64
	sloTarget   time.Duration
	sloMetric   string
	// minutes are the tenant's goodput windows, for its busy stretch.
	minutes []minuteSpan
	// spans are the tenant's steps, for windowed quantiles.
	spans []stepSpan
	// sampled are the steps whose window kept a sample of what it
	// judged (sampledSpan), in step order; none when every window kept
	// every latency.
	sampled []sampledSpan
}

// minuteSpan is one goodput window of a tenant: how many of its requests
// ended there, how many of them were dropped, and where the window's
// latencies are in tenantAcc.latencies and its steps in tenantAcc.spans.
type minuteSpan struct {
	ended      int
	start, end int
	// dropped is what ended without a latency (TenantWindow.Ended less
	// Judged: dropped requests, under an ITL SLO their missed tokens),
	// each later than any completed; sampled is whether a window of it
	// kept a sample of what it judged (weighted). spanFrom and spanTo are
	// its steps in tenantAcc.spans.
	dropped          int
	sampled          bool
	spanFrom, spanTo int
	// work is the tenant's work in the window, good that of it on GPUs
	// whose SLOs held (filled when the window closes)
	work, good float64
}

// BusyFraction picks a tenant's busy stretch: the goodput windows in which
// at least this fraction of its busiest window's requests ended.
const BusyFraction = 0.75

type gpuAcc struct {
	index                  int
	sm, dram, power, clock float64 // value x seconds
	seconds                float64
}

// NewRecorder returns an empty Recorder for a run.
func NewRecorder(m Meta) *Recorder {
	return &Recorder{meta: m, tenants: map[string]*tenantAcc{}, gpus: map[string]*gpuAcc{}}
}

// Add records one window. Windows must come in time order; an empty window
// (End not after Start) is ignored. A tenant's Latencies need not be
// sorted: unsorted ones Add reorders.
func (r *Recorder) Add(w WindowStats) {
	secs := w.End.Sub(w.Start).Seconds()
	if secs <= 0 {
		return
	}
	r.elapsed += secs
	if n := r.minuteIndex(); n != r.minuteN {
		r.flushMinute(r.minute)
		r.minute, r.minuteN = nil, n
	}
	st := Step{T: round6(r.elapsed), Seconds: secs}
	if !r.meta.Start.IsZero() {
		st.T = round6(w.End.Sub(r.meta.Start).Seconds())
	}
	// the step's percentiles, two a tenant, in one allocation
	pct := make([]float64, 0, 2*len(w.Tenants))
	// the step's tenants and GPUs at their size (left nil without any,
	// as a JSON null)
	if len(w.Tenants) > 0 {
		st.Tenants = make([]TenantStep, 0, len(w.Tenants))
	}
	if len(w.GPUs) > 0 {
		st.GPUs = make([]GPUStep, 0, len(w.GPUs))
	}
	for _, tw := range w.Tenants {
		p50, p99, ok := stepQuantiles(tw.Latencies)
		a := r.tenants[tw.Tenant]
		if a == nil {
			a = &tenantAcc{}
			r.tenants[tw.Tenant] = a
			r.order = append(r.order, tw.Tenant)
		}
		a.gpu = tw.GPU
		for len(a.minutes) <= r.minuteN {
			a.minutes = append(a.minutes, minuteSpan{start: len(a.latencies), end: len(a.latencies),
				spanFrom: len(a.spans), spanTo: len(a.spans)})
		}
		from := len(a.latencies)
		if need := from + len(tw.Latencies); need > cap(a.latencies) {
			// doubled: append grows a large slice by a quarter, so a
			// run's latencies (tens of MB in an hour) were allocated
			// and copied about five times over
			a.latencies = slices.Grow(a.latencies, max(need, 2*cap(a.latencies))-from)
		}
		for _, l := range tw.Latencies {
			a.latencies = append(a.latencies, float32(l.Seconds()))
		}
		a.spans = append(a.spans, stepSpan{step: len(r.steps), start: from, end: len(a.latencies)})
		mn := &a.minutes[r.minuteN]
		mn.spanTo = len(a.spans)
		judged, kept := tw.Judged(), len(tw.Latencies)
		if kept > 0 && judged > kept {
			a.sampled = append(a.sampled, sampledSpan{span: len(a.spans) - 1, judged: judged})
			mn.sampled = true
		}
		mn.dropped += max(0, tw.Ended()-judged)
		mn.ended += tw.Ended()
		mn.work += tw.Work
		mn.end = len(a.latencies)
		a.completed += tw.Completed
		a.ended += tw.Ended()
		a.good += tw.Good
		a.work += tw.Work
		a.smShareSec += tw.SMShare * secs
		a.bwShareSec += tw.BWShare * secs
		a.seconds += secs
		a.ooms += tw.OOMs
		a.dropped += tw.Dropped
		a.overdue = tw.Overdue
		a.redo = tw.Redo
		a.sloQuantile, a.sloTarget, a.sloMetric = tw.SLOQuantile, tw.SLOTarget, tw.SLOMetric
		r.addMinute(tw)

		ts := TenantStep{
			Tenant: tw.Tenant, GPU: tw.GPU, Completed: tw.Completed, Good: tw.Good,
			Attainment:  sloAttainment(tw.SLOTarget, tw.Good, tw.Ended()),
			P50:         secondsInto(&pct, p50, ok),
			P99:         secondsInto(&pct, p99, ok),
			SLOQuantile: tw.SLOQuantile, SLOTarget: round6(tw.SLOTarget.Seconds()),
			Throughput: round6(float64(tw.Completed) / secs),
			WorkRate:   round6(tw.Work / secs),
			SMShare:    round6(tw.SMShare), BWShare: round6(tw.BWShare),
			OOMs: tw.OOMs, Dropped: tw.Dropped,
		}
		st.Tenants = append(st.Tenants, ts)
	}
	for _, gw := range w.GPUs {
		a := r.gpus[gw.UUID]
		if a == nil {
			a = &gpuAcc{}
			r.gpus[gw.UUID] = a
			r.gorder = append(r.gorder, gw.UUID)
		}
		a.index = gw.Index
		a.sm += gw.SMActive * secs
		a.dram += gw.DRAMActive * secs
		a.power += gw.PowerW * secs
		a.clock += gw.SMClockMHz * secs
		a.seconds += secs
		st.GPUs = append(st.GPUs, GPUStep{
			UUID: gw.UUID, Index: gw.Index,
			SMActive: round6(gw.SMActive), DRAMActive: round6(gw.DRAMActive),
			PowerW: round6(gw.PowerW), SMClockMHz: round6(gw.SMClockMHz),
		})
	}
	// the same pdqsort as sort.Slice, without its reflection
	slices.SortFunc(st.Tenants, func(a, b TenantStep) int { return strings.Compare(a.Tenant, b.Tenant) })
	slices.SortFunc(st.GPUs, func(a, b GPUStep) int { return cmp.Compare(a.Index, b.Index) })
	r.steps = append(r.steps, st)
}

// Steps returns the recorded steps in time order. The slice is shared.
func (r *Recorder) Steps() []Step { return r.steps }

// Meta returns the run's description.
func (r *Recorder) Meta() Meta { return r.meta }

// nearestRank is the index of the nearest-rank q-quantile (0 < q <= 1)
// among n > 0 ascending values: the smallest value with at least q of the
// values at or below it.
func nearestRank(n int, q float64) int {
	return max(0, min(int(math.Ceil(q*float64(n)))-1, n-1))
}

// Attainment returns good/ended rounded down to 6 significant digits
// (floorRatio), or nil when no request ended. ended is every request that
// left the server: completed plus dropped (rejected by a full queue or
// lost with the process). A dropped request is not good: counting only
// completed ones would make a tenant whose queue overflows look better
// the more it rejects.
func Attainment(good, ended int) *float64 {
	if ended <= 0 {
		return nil
	}
	v := floorRatio(good, ended)
	return &v
}

// floorRatio is good/ended (ended > 0) rounded down to 6 significant
// digits, worked out in integers: an attainment rounded to nearest could
// reach its SLO's quantile when it fell short (2,474,999 of 2,500,000 is
// 0.99 at 6 digits, not met), and so never does.
func floorRatio(good, ended int) float64 {
	v := float64(good) / float64(ended)
	if good <= 0 || good >= ended {
		return round6(v) // 0, or all (1) and beyond: exact
	}
	// the decimal places of 6 significant digits, by v's magnitude and
	// then by the digits themselves (v rounds to 1 just under it)
	p := 5 - int(math.Floor(math.Log10(v)))
	for {
		if p > 19 { // under 10^-14: 10^p is past uint64
			return math.Floor(v*math.Pow10(p)) / math.Pow10(p)
		}
		hi, lo := bits.Mul64(uint64(good), pow10(p))
		q, _ := bits.Div64(hi, lo, uint64(ended)) // good < ended: hi < ended
		switch {
		case q < 1e5:
			p++
		case q >= 1e6:
			p--
		default:
			return float64(q) / math.Pow10(p)
		}
	}
}

// pow10 is 10^p for 0 <= p <= 19.
func pow10(p int) uint64 {
	n := uint64(1)
	for range p {
		n *= 10
	}
	return n
}

// FloorPercent renders an attainment (0-1) as a percentage with one
// decimal, rounded down as Attainment is: a printed figure reaches a
// quantile only when the attainment does ("98.9%" for 0.989999).
func FloorPercent(v float64) string { return floorPercent(v, 1) }

// FloorPercentFor renders the attainment v of an SLO at quantile q as
// FloorPercent does, with one more decimal for each digit q carries
// beyond 0.1% (p99.95: "99.94%" for 0.99949, not met; "99.99%" for
// 0.99995, met), up to four: the figure reaches q's exactly when v does.
// A quantile on a tenth of a percent (or none, 0) prints as FloorPercent.
func FloorPercentFor(v, q float64) string {
	d := 1
	for ; d < 4; d++ {
		x := q * 100 * math.Pow10(d)
		if math.Abs(x-math.Round(x)) < 1e-6 {
			break
		}
	}
	return floorPercent(v, d)
}

// floorPercent is v as a percentage rounded down to d decimals.
func floorPercent(v float64, d int) string {
	// v is within rounding of a decimal of 6 digits (or a mean of such
	// over seeds): the ten-millionth added keeps a figure on a decimal
	// place from falling below it
	return strconv.FormatFloat(math.Floor(v*math.Pow10(d+2)+1e-7)/math.Pow10(d), 'f', d, 64) + "%"
}

// sloAttainment is the attainment of a tenant with an SLO; nil without one.
func sloAttainment(target time.Duration, good, ended int) *float64 {
	if target <= 0 {
		return nil
	}
	return Attainment(good, ended)
}

// quantiles32 returns the nearest-rank median and 99th percentile, in
// seconds (6 significant digits), of latencies in any order, which it
// leaves as they are; nil when there are none.
func quantiles32(latencies []float32) (p50, p99 *float64) {
	n := len(latencies)
	if n == 0 {
		return nil, nil
	}
	v := orderStats32(latencies, nearestRank(n, 0.5), nearestRank(n, 0.99))
	a, b := round6(float64(v[0])), round6(float64(v[1]))
	return &a, &b
}

// stepQuantiles returns the nearest-rank median and 99th percentile of
// a window's latencies, sorted or not (an unsorted slice it reorders); ok
// is false when there are none.
func stepQuantiles(lat []time.Duration) (p50, p99 time.Duration, ok bool) {
	n := len(lat)
	if n == 0 {
		return 0, 0, false
	}
	k50, k99 := nearestRank(n, 0.5), nearestRank(n, 0.99)
	if slices.IsSorted(lat) {
		return lat[k50], lat[k99], true
	}
	// a duration is never NaN: every selection succeeds
	if k99 == n-1 {
		// under 100 latencies, the largest: one pass, no reordering
		p99 = slices.Max(lat)
		selectK(lat, k50)
		return lat[k50], p99, true
	}
	selectK(lat, k99)
	p99 = lat[k99]
	if k50 < k99 {
		selectK(lat[:k99], k50) // the k99 smallest are before k99
	}
	return lat[k50], p99, true
}

// secondsInto returns d in seconds (6 significant digits), nil unless ok;
// the figure is appended to *buf, which must have the room (the pointer
// is into it).
func secondsInto(buf *[]float64, d time.Duration, ok bool) *float64 {
	if !ok {
		return nil
	}
	*buf = append(*buf, round6(d.Seconds()))
	return &(*buf)[len(*buf)-1]
}

// round6 rounds to 6 significant digits so files stay short and stable.
func round6(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	mag := math.Pow(10, 5-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*mag) / mag
}

// TenantSummary is one tenant's figures over the whole run.
type TenantSummary struct {
	Tenant      string   `json:"tenant"`
	GPU         string   `json:"gpu"` // the GPU at the end of the run
	Requests    int      `json:"requests"`
	Good        int      `json:"good"`
	Attainment  *float64 `json:"attainment"`
	SLOQuantile float64  `json:"slo_quantile"`
	SLOTarget   float64  `json:"slo_target_seconds"`
	// SLOMetric is what the SLO bounds: "" for end-to-end latency, "ttft"
	// for time to first token (then P50, P99 and BusyLatency are too),
	// "itl" for inter-token latency (then they are of tokens, and Good
	// counts tokens).
	SLOMetric string `json:"slo_metric,omitempty"`
	// SLOMet is true when the tenant has an SLO and attainment reached
	// its quantile; nil when it has no SLO. A tenant with an SLO whose
	// Attainment is nil (no request ended, completed or dropped, nor was
	// overdue at the end: it never served) has not met it.
	SLOMet     *bool    `json:"slo_met"`
	P50        *float64 `json:"p50_seconds"`
	P99        *float64 `json:"p99_seconds"`
	Throughput float64  `json:"throughput_rps"`
	WorkRate   float64  `json:"work_per_second"`
	// Goodput is useful work per second counted only in the goodput
	// windows (GoodputWindow) in which every SLO on the tenant's GPU held:
	// work taken from a tenant whose SLO it broke is not good.
	Goodput float64 `json:"goodput_per_second"`
	// BusyLatency is the latency at the SLO's quantile of the requests
	// that ended in the tenant's busy stretch (the goodput windows in which
	// at least BusyFraction of its busiest window's requests ended; a
	// dropped request counts as later than any completed one), and Slack
	// the SLO target over it: how far the target is above what the tenant
	// got when busiest. Both nil without an SLO or such requests; Slack is
	// 0 and BusyLatency nil when the quantile falls on a dropped request.
	BusyLatency *float64 `json:"busy_latency_seconds"`
	Slack       *float64 `json:"slack"`
	SMShare     float64  `json:"sm_share"`
	BWShare     float64  `json:"bw_share"`
	OOMs        int      `json:"ooms"`
	Dropped     int      `json:"dropped"`
	// Overdue is the requests still waiting or running at the end of the
	// run that were already past the SLO target: they count as missed.
	Overdue int `json:"overdue_at_end"`
}

// NeverServed says whether t has an SLO and no request was judged against
// it over the run (none ended nor was overdue): its SLO is not met, and
// its attainment is nil.
func (t TenantSummary) NeverServed() bool { return t.SLOTarget > 0 && t.Attainment == nil }

// GPUSummary is one GPU's means over the run: the figures of a step, over
// the whole run.
type GPUSummary = GPUStep

// Summary is the run's result.
type Summary struct {
	Meta     Meta            `json:"-"` // in the JSON file beside the summary
	Seconds  float64         `json:"seconds"`
	Steps    int             `json:"steps"`
	Tenants  []TenantSummary `json:"tenants"`
	GPUs     []GPUSummary    `json:"gpus"`
	SLOsMet  int             `json:"slos_met"`  // tenants with an SLO that met it
	SLOsHeld int             `json:"slos_held"` // tenants with an SLO, served or not
	// HeldFraction is the fraction of GPU goodput windows (GoodputWindow
	// on each GPU) in which every SLO on the GPU held; nil (null) where
	// no window had a tenant on its GPU: none to hold, not none held.
	HeldFraction *float64 `json:"held_fraction"`
	// EnergyJ is the energy the GPUs used over the run, in joules: the
	// sum of their energy counters' increase.
	EnergyJ float64 `json:"energy_joules"`
}

// Summary computes the run's summary from everything recorded so far. A
// call with no Add since the last returns the same figures (in slices of
// its own) without working them out again.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.summary == nil || r.summaryOf != len(r.steps) {
		s := r.summarize()
		r.summary, r.summaryOf = &s, len(r.steps)
	}
	s := *r.summary
	s.Tenants, s.GPUs = slices.Clone(s.Tenants), slices.Clone(s.GPUs)
	return s
}

// summarize is Summary, worked out.
func (r *Recorder) summarize() Summary {
	s := Summary{Meta: r.meta, Seconds: round6(r.elapsed), Steps: len(r.steps)}
	names := slices.Clone(r.order)
	sort.Strings(names)
	// the window being filled counts as it stands
	partial := minuteGoodWork(r.minute)
	g, h := countHeld(r.minute)
	gpuMinutes, heldMinutes := r.gpuMinutes+g, r.heldMinutes+h
	if gpuMinutes > 0 {
		f := round6(float64(heldMinutes) / float64(gpuMinutes))
		s.HeldFraction = &f
	}
	// each tenant's order statistics (the summary's costly part) at once
	type stats struct {
		p50, p99 *float64
		busy     float64
		busyOK   bool
	}
	st := make([]stats, len(names))
	parallel.Each(len(names), func(i int) {
		a := r.tenants[names[i]]
		st[i].p50, st[i].p99 = a.quantiles()
		if a.sloTarget > 0 {
			st[i].busy, st[i].busyOK = busyLatency(a)
		}
	})
	for i, name := range names {
		a := r.tenants[name]
		p50, p99 := st[i].p50, st[i].p99
		ts := TenantSummary{
			Tenant: name, GPU: a.gpu, Requests: a.completed, Good: a.good,
			Attainment:  sloAttainment(a.sloTarget, a.good, a.ended+a.overdue),
			SLOQuantile: a.sloQuantile, SLOTarget: round6(a.sloTarget.Seconds()), SLOMetric: a.sloMetric,
			P50: p50, P99: p99,
			OOMs: a.ooms, Dropped: a.dropped, Overdue: a.overdue,
		}
		if r.elapsed > 0 {
			ts.Throughput = round6(float64(a.completed) / r.elapsed)
			// steps a restart threw away that the job has not redone
			// by the end were counted when first done: they are not
			// work, nor good work where they counted as good
			lost, lostGood := a.unredone(partial[name])
			ts.WorkRate = round6(max(0, a.work-lost) / r.elapsed)
			ts.Goodput = round6(max(0, a.goodWork+partial[name]-lostGood) / r.elapsed)
		}
		if a.seconds > 0 {
			ts.SMShare = round6(a.smShareSec / a.seconds)
			ts.BWShare = round6(a.bwShareSec / a.seconds)
		}
		if a.sloTarget > 0 {
			if q, ok := st[i].busy, st[i].busyOK; ok && q > 0 {
				// a quantile on a dropped request: no latency, slack 0
				v := 0.0
				if !math.IsInf(q, 1) {
					ts.BusyLatency = &q
					v = round6(a.sloTarget.Seconds() / q)
				}
				ts.Slack = &v
			}
		}
		if a.sloTarget > 0 {
			// an SLO no request was judged against was never served:
			// not met
			met := SLOMet(a.good, a.ended+a.overdue, a.sloQuantile)
			ts.SLOMet = &met
			s.SLOsHeld++
			if met {
				s.SLOsMet++
			}
		}
		s.Tenants = append(s.Tenants, ts)
	}
	for _, uuid := range r.gorder {
		a := r.gpus[uuid]
		g := GPUSummary{UUID: uuid, Index: a.index}
		if a.seconds > 0 {
			g.SMActive = round6(a.sm / a.seconds)
			g.DRAMActive = round6(a.dram / a.seconds)
			g.PowerW = round6(a.power / a.seconds)
			g.SMClockMHz = round6(a.clock / a.seconds)
		}
		s.EnergyJ += a.power
		s.GPUs = append(s.GPUs, g)
	}
	sort.Slice(s.GPUs, func(i, j int) bool { return s.GPUs[i].Index < s.GPUs[j].Index })
	s.EnergyJ = round6(s.EnergyJ)
	return s
}

// unredone returns a's steps lost to restarts and not redone by the end
// of the run (the last window's Redo), and how much of them counted as
// good work (Unredone); partial is a's good work in the goodput window
// being filled.
func (a *tenantAcc) unredone(partial float64) (lost, lostGood float64) {
	ms := make([]MinuteWork, len(a.minutes))
	for i, m := range a.minutes {
		ms[i] = MinuteWork{Work: m.work, Good: m.good}
	}
	if n := len(ms); n > 0 {
		ms[n-1].Good = partial // the window being filled
	}
	return Unredone(a.redo, ms)
}

// MinuteWork is a tenant's work in one goodput window and, of it, the
// good work: that done on a GPU whose SLOs held over the window.
type MinuteWork struct{ Work, Good float64 }

// Unredone is how a run's figures leave out the redo steps a training job
// lost to restarts and has not redone by the end (TenantWindow.Redo of
// the last window), given its work in each goodput window (minutes, in
// time order): it returns how much work they are and how much of it
// counted as good. A training job redoes its lost steps before any new
// one, and only new steps count as work, so the steps never redone are
// the last ones it counted: they are taken from its goodput windows from
// the last back, as good work in the share of each window's work that was
// good.
func Unredone(redo int, minutes []MinuteWork) (lost, lostGood float64) {
	left := float64(redo)
	for i := len(minutes) - 1; i >= 0 && left > 0; i-- {
		m := minutes[i]
		if m.Work <= 0 {
			continue
		}
		take := min(left, m.Work)
		left -= take
		lost += take
		lostGood += take * min(1, m.Good/m.Work)
	}
	return lost, lostGood
}
