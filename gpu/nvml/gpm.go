package nvml

import (
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// gpmMinInterval is the shortest time between two GPM samples NVML accepts
// for a metric computation (docs/calibration.md, NVML: two samples more
// than 100 ms apart).
const gpmMinInterval = 100 * time.Millisecond

// GPM metric IDs read for the whole GPU and for each MIG GPU instance.
var activityMetrics = []nvml.GpmMetricId{
	nvml.GPM_METRIC_SM_UTIL,
	nvml.GPM_METRIC_SM_OCCUPANCY,
	nvml.GPM_METRIC_DRAM_BW_UTIL,
	nvml.GPM_METRIC_ANY_TENSOR_UTIL,
}

// Context-switch metrics of the graphics engines GR0..GR7: requests and
// cycles spent switching over the interval between two samples.
var (
	ctxswRequests     []nvml.GpmMetricId
	ctxswCyclesActive []nvml.GpmMetricId
)

func init() {
	for gr := 0; gr < 8; gr++ {
		step := nvml.GpmMetricId(5 * gr)
		ctxswRequests = append(ctxswRequests, nvml.GPM_METRIC_GR0_CTXSW_REQUESTS+step)
		ctxswCyclesActive = append(ctxswCyclesActive, nvml.GPM_METRIC_GR0_CTXSW_CYCLES_ACTIVE+step)
	}
}

// gpmUsable says whether GPM can be used on this GPU (Hopper or later, and a
// driver with the GPM calls).
func (rd *devReader) gpmUsable() bool {
	if !rd.b.has(symGpmSupport, symGpmAlloc, symGpmFree, symGpmSampleGet, symGpmMetricsGet) {
		rd.skip(symGpmSampleGet)
		return false
	}
	if rd.ds.gpmSupported == nil {
		s, r := rd.ds.handle.GpmQueryDeviceSupport()
		if !rd.ok("nvmlGpmQueryDeviceSupport", r) {
			if rd.fatal == nil {
				rd.ds.gpmSupported = gpu.Bool(false)
			}
			return false
		}
		rd.ds.gpmSupported = gpu.Bool(s.IsSupportedDevice != 0)
		if s.IsSupportedDevice == 0 {
			rd.b.logOnce(rd.ds.uuid+"/gpm", "msg", "GPU has no GPM (needs Hopper or later); profiling ratios left out",
				"gpu", rd.ds.index, "uuid", rd.ds.uuid)
		}
	}
	return *rd.ds.gpmSupported
}

// readGPM takes a GPM sample of the whole GPU and of each MIG instance and,
// once a previous sample is more than 100 ms old, computes the activity
// ratios and accumulates the context-switch counters.
func (rd *devReader) readGPM(d *gpu.Device, now time.Time) {
	ds := rd.ds
	defer func() {
		if ds.ctxKnown {
			d.ContextSwitchesTotal = gpu.Uint(uint64(ds.ctxSwitches))
			d.ContextSwitchCyclesTotal = gpu.Uint(uint64(ds.ctxCycles))
		}
	}()
	if !rd.gpmUsable() {
		return
	}
	ids := append(append(append([]nvml.GpmMetricId{}, activityMetrics...), ctxswRequests...), ctxswCyclesActive...)
	vals, elapsed, ok := rd.gpmStep(&ds.gpm, now, ids, func(s nvml.GpmSample) nvml.Return {
		return ds.handle.GpmSampleGet(s)
	}, "nvmlGpmSampleGet")
	if ok {
		d.Activity = activity(vals)
		var req, cyc float64
		var any bool
		// Counters only grow: a negative, non-finite or impossible
		// figure of an engine is left out rather than added.
		most := elapsed.Seconds() * maxCyclesPerSecond
		for i := range ctxswRequests {
			if v, ok := vals[ctxswRequests[i]]; ok && countable(v, most) {
				req += v
				any = true
			}
			if v, ok := vals[ctxswCyclesActive[i]]; ok && countable(v, most) {
				cyc += v
			}
		}
		if any {
			ds.ctxSwitches += req
			ds.ctxCycles += cyc
			ds.ctxKnown = true
		}
	}
	if ds.gpm.named() {
		// GPM holds a sample: its ratios come with the next, and the
		// source is named from this one on (no ratio yet, too soon for
		// one, a passing failure), so that it does not change. A lasting
		// failure drops the sample (gpmPrev.failed): the source is then
		// "" until GPM gives a ratio again, and another may give them.
		d.Activity.Source = "gpm"
	}
	if rd.fatal != nil {
		return
	}
	if !d.MIGEnabled {
		ds.dropMIGSamples(nil) // MIG turned off: no instance is left
		return
	}
	if !rd.b.has(symGpmMigSampleGet) {
		rd.skip(symGpmMigSampleGet)
		return
	}
	seen := map[int]bool{}
	for i := range d.MIG {
		gi := d.MIG[i].GPUInstanceID
		if gi < 0 || seen[gi] {
			continue
		}
		seen[gi] = true
		p := ds.migGPMPrev[gi]
		if p.uuid != d.MIG[i].UUID {
			// Another instance under the same ID since the last sample:
			// the old sample is not comparable.
			p.drop()
			p = gpmPrev{uuid: d.MIG[i].UUID}
		}
		vals, _, ok := rd.gpmStep(&p, now, activityMetrics, func(s nvml.GpmSample) nvml.Return {
			return ds.handle.GpmMigSampleGet(gi, s)
		}, "nvmlGpmMigSampleGet")
		ds.migGPMPrev[gi] = p
		if ok {
			d.MIG[i].Activity = activity(vals)
		}
		if p.named() {
			d.MIG[i].Activity.Source = "gpm" // as the GPU's, from its first sample
		}
		if rd.fatal != nil {
			return
		}
	}
	ds.dropMIGSamples(seen)
}

// dropMIGSamples frees the kept samples of the GPU instances not in keep
// (nil: of every one).
func (ds *devState) dropMIGSamples(keep map[int]bool) {
	for gi, p := range ds.migGPMPrev {
		if !keep[gi] {
			p.drop()
			delete(ds.migGPMPrev, gi)
		}
	}
}

// gpmFailLimit is how many GPM steps in a row may give no ratio through a
// failed call before the kept sample is dropped: a passing failure keeps
// the source "gpm" (vgpu_gpu_info keeps its labels), a lasting one leaves
// it "" so that another source (dcgm-exporter) may give the ratios.
const gpmFailLimit = 3

// gpmStep takes a new sample with get; when p's sample is older than 100 ms
// it computes ids between the two samples, over the time it returns, and
// the new one becomes p's. A step that gives no activity ratio because a
// call failed counts towards dropping p's sample (failed).
func (rd *devReader) gpmStep(p *gpmPrev, now time.Time, ids []nvml.GpmMetricId,
	get func(nvml.GpmSample) nvml.Return, call string) (map[nvml.GpmMetricId]float64, time.Duration, bool) {
	if p.sample != nil && now.Sub(p.at) <= gpmMinInterval {
		return nil, 0, false // too soon: keep the older sample for a longer interval
	}
	cur, r := rd.b.lib.GpmSampleAlloc()
	if !rd.ok("nvmlGpmSampleAlloc", r) || cur == nil {
		p.failed(r)
		return nil, 0, false
	}
	if r := get(cur); !rd.ok(call, r) {
		_ = cur.Free()
		p.failed(r)
		return nil, 0, false
	}
	old, elapsed := p.sample, now.Sub(p.at)
	p.sample, p.at = cur, now
	if old == nil {
		return nil, 0, false
	}
	defer old.Free()
	m := &nvml.GpmMetricsGetType{NumMetrics: uint32(len(ids)), Sample1: old, Sample2: cur}
	for i, id := range ids {
		m.Metrics[i].MetricId = uint32(id)
	}
	if r := rd.b.lib.GpmMetricsGet(m); !rd.ok("nvmlGpmMetricsGet", r) {
		p.failed(r)
		return nil, 0, false
	}
	vals := make(map[nvml.GpmMetricId]float64, len(ids))
	for i := range ids {
		if m.Metrics[i].NvmlReturn == uint32(nvml.SUCCESS) {
			vals[nvml.GpmMetricId(m.Metrics[i].MetricId)] = m.Metrics[i].Value
		}
	}
	// None of the activity metrics computed is a step
	// with no ratio, as a failed call.
	for _, id := range activityMetrics {
		if _, ok := vals[id]; ok {
			p.fails, p.stopped = 0, false
			return vals, elapsed, true
		}
	}
	p.failed(nvml.Return(m.Metrics[0].NvmlReturn))
	return vals, elapsed, true
}

// failed counts a step that gave no ratio because a call returned r and
// drops the kept sample when the reason lasts: the driver refuses GPM
// (NOT_SUPPORTED, NO_PERMISSION) or gpmFailLimit steps in a row failed.
// Without a kept sample the activity source is "" until GPM gives one again.
func (p *gpmPrev) failed(r nvml.Return) {
	p.fails++
	if r == nvml.ERROR_NOT_SUPPORTED || r == nvml.ERROR_NO_PERMISSION || p.fails >= gpmFailLimit {
		p.drop()
		p.stopped = true
	}
}

// named says whether the activity source is GPM's: it holds a sample, and
// has given a ratio since its last lasting failure (or had none).
func (p *gpmPrev) named() bool { return p.sample != nil && !p.stopped }

// drop frees the kept sample and forgets the failures.
func (p *gpmPrev) drop() {
	if p.sample != nil {
		_ = p.sample.Free()
	}
	p.sample, p.fails = nil, 0
}

// activity converts GPM percentages into 0-1 ratios.
func activity(vals map[nvml.GpmMetricId]float64) gpu.Activity {
	var a gpu.Activity
	ratio := func(id nvml.GpmMetricId) *float64 {
		v, ok := vals[id]
		if !ok || math.IsNaN(v) {
			return nil
		}
		v /= 100
		if v < 0 {
			v = 0
		}
		if v > 1 {
			v = 1
		}
		return gpu.Float(v)
	}
	a.SMActive = ratio(nvml.GPM_METRIC_SM_UTIL)
	a.SMOccupancy = ratio(nvml.GPM_METRIC_SM_OCCUPANCY)
	a.DRAMActive = ratio(nvml.GPM_METRIC_DRAM_BW_UTIL)
	a.TensorActive = ratio(nvml.GPM_METRIC_ANY_TENSOR_UTIL)
	if a.SMActive != nil || a.SMOccupancy != nil || a.DRAMActive != nil || a.TensorActive != nil {
		a.Source = "gpm"
	}
	return a
}

// maxCyclesPerSecond bounds an engine's context-switch requests and cycles
// per second: the cycles of a 10 GHz clock, several times any GPU's.
const maxCyclesPerSecond = 1e10

// countable says whether a per-interval GPM count may be added to a
// counter: finite, not negative and at most most (a figure beyond what the
// interval allows would stay in the counter for good).
func countable(v, most float64) bool {
	return v >= 0 && v <= most && !math.IsInf(v, 0) && !math.IsNaN(v)
}
