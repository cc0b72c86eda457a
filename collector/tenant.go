package collector

import (
	"fmt"
	"slices"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func init() {
	registerCollector("tenant", true, newTenantCollector)
}

// sloQuantileLabel carries a quantile on the SLO gauges. promlint reserves
// "quantile" for summaries, and these are gauges (window quantiles computed
// from the tenant's own histogram), so the label is named "q".
const sloQuantileLabel = "q"

type tenantCollector struct {
	descSet
	info, figureInfo                                      *prometheus.Desc
	smActive, dramActive, memUsed, ctxSwitches, processes *prometheus.Desc
	kernelBusy                                            *prometheus.Desc
	target, latency, requests, good, attainment, window   *prometheus.Desc
	objective                                             *prometheus.Desc
	sourceUp, sourceErrors                                *prometheus.Desc
	mean, windowRequests                                  *prometheus.Desc
	conflicting, conflicts, cgroupErrors                  *prometheus.Desc
	shareMinSum                                           *prometheus.Desc
	meters                                                meterDescs
	podInfo                                               podInfoDescs
}

func newTenantCollector(log.Logger) (Collector, error) {
	c := &tenantCollector{}
	l := []string{"tenant", "class", "gpu", "uuid", "gpu_instance"}
	lm := append(append([]string{}, l...), "method")
	c.info = c.add("tenant_info", "A configured tenant; always 1.", "tenant", "class", "priority")
	c.figureInfo = c.add("tenant_figure_info", "How the tenant's SM, DRAM and context-switch figures on the GPU (or MIG instance) are obtained: method measured (the counters of a MIG instance the tenant has alone) or apportioned (the GPU's, or a shared MIG instance's, counters split among its tenants); always 1.", lm...)
	c.smActive = c.add("tenant_sm_active_ratio", "The tenant's share of SM activity of the GPU (or MIG instance) over the sample interval; the tenants of a GPU (or instance) add up to its SM active ratio.", l...)
	c.dramActive = c.add("tenant_dram_active_ratio", "The tenant's share of peak device memory bandwidth of the GPU (or MIG instance) over the sample interval; the tenants of a GPU (or instance) add up to its DRAM active ratio.", l...)
	c.kernelBusy = c.add("tenant_kernel_busy_ratio", "Fraction of the sample interval during which a kernel of the tenant ran on the GPU, however many SMs it filled (NVML process or vGPU utilization); tenants may add up to more than 1 under MPS.", l...)
	c.memUsed = c.add("tenant_memory_used_bytes", "Device memory held by the tenant's processes on the GPU (or MIG instance); absent where the driver does not report it.", l...)
	c.ctxSwitches = c.add("tenant_context_switches_total", "Context switches of the GPU attributed to the tenant; the tenants of a GPU add up to its context switches' increase over any window in which no tenant was forgotten (a tenant that left keeps its count for --tenants.departed-retention). Not per MIG instance: absent on a MIG GPU.", l...)
	c.processes = c.add("tenant_processes", "The tenant's processes with a context on the GPU (or MIG instance).", l...)
	c.target = c.add("tenant_slo_target_seconds", "The tenant's latency objective: a fraction q of requests completes within this time.", "tenant", sloQuantileLabel)
	c.objective = c.add("tenant_slo_objective_ratio", "The tenant's latency objective q as a value: the fraction of requests that must complete within vgpu_tenant_slo_target_seconds; 1 - q is the error budget.", "tenant")
	c.latency = c.add("tenant_request_latency_seconds", "The q-quantile of the tenant's request latency over the SLO window; absent while the window holds no request.", "tenant", sloQuantileLabel)
	c.requests = c.add("tenant_requests_total", "Requests the tenant's latency source reported since the exporter started.", "tenant")
	c.good = c.add("tenant_slo_good_requests_total", "Requests that completed within the SLO target since the exporter started.", "tenant")
	c.attainment = c.add("tenant_slo_attainment_ratio", "Good requests over all requests in the SLO window; absent while the window holds no request.", "tenant")
	c.window = c.add("tenant_slo_window_seconds", "Length of the sliding window the latency quantiles and attainment cover.", "tenant")
	c.sourceUp = c.add("tenant_latency_source_up", "1 if the last read of the tenant's latency source succeeded, 0 if not; absent before its first read.", "tenant")
	c.sourceErrors = c.add("tenant_latency_source_scrape_errors_total", "Failed reads of the tenant's latency source since the exporter started.", "tenant")
	c.mean = c.add("tenant_request_latency_mean_seconds", "Mean request latency of the tenant over the SLO window; absent while the window holds no request.", "tenant")
	c.windowRequests = c.add("tenant_slo_window_requests", "Requests in the SLO window; divided by vgpu_tenant_slo_window_seconds it is the request rate the quantiles rest on.", "tenant")
	c.conflicting = c.add("attribution_conflicting_subjects", "Processes and instances that matched two or more tenants in the last sample; each is reported under the unassigned tenant.")
	c.conflicts = c.add("attribution_conflicts_total", "Distinct attribution conflicts (a process or instance with a set of tenants it matched) seen since the exporter started.")
	c.cgroupErrors = c.add("attribution_cgroup_errors_total", "Processes whose cgroup could not be read for attribution since the exporter started.")
	c.shareMinSum = c.add("tenant_share_min_sum_ratio", "Sum of the share.min guarantees of the tenants with usage on the GPU (or MIG instance) in the last sample; above 1 the guarantees are over-committed and cannot all be met.", "gpu", "uuid", "gpu_instance")
	c.addMeters()
	c.addPodInfo()
	return c, nil
}

func (c *tenantCollector) Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	e := c.emit(ch)
	defer e.close()
	seenTenant := make(firstSet[string], len(snap.Tenants))
	for _, t := range snap.Tenants {
		if !seenTenant.add(t.Name) {
			e.fail(fmt.Errorf("tenant %q listed twice; later copies skipped", t.Name))
			continue
		}
		e.gauge(c.info, 1, t.Name, string(t.Class), itoa(t.Priority))
	}

	type key struct{ tenant, uuid, gi string }
	seen := make(firstSet[key], len(snap.Usage))
	for i := range snap.Usage {
		u := &snap.Usage[i]
		if !seen.add(key{u.Tenant, u.UUID, u.GPUInstance}) {
			e.fail(fmt.Errorf("usage of tenant %q on GPU %s instance %q reported twice; later copies skipped", u.Tenant, u.UUID, u.GPUInstance))
			continue
		}
		g := itoa(u.GPU)
		lv := []string{u.Tenant, string(u.Class), g, u.UUID, u.GPUInstance}
		if u.Method != "" {
			e.gauge(c.figureInfo, 1, append(lv, string(u.Method))...)
		}
		e.optGauge(c.smActive, u.SMActive, lv...)
		e.optGauge(c.dramActive, u.DRAMActive, lv...)
		e.optGauge(c.kernelBusy, u.KernelBusy, lv...)
		if !u.MemoryUnknown {
			// the driver did not report its processes' memory: absent,
			// not 0
			e.gauge(c.memUsed, float64(u.MemoryUsedBytes), lv...)
		}
		if u.ContextSwitchesTotal != nil {
			e.counter(c.ctxSwitches, *u.ContextSwitchesTotal, lv...)
		}
		e.gauge(c.processes, float64(u.Processes), lv...)
	}
	for _, k := range snap.KeptContextSwitches {
		if !seen.add(key{k.Tenant, k.UUID, ""}) {
			e.fail(fmt.Errorf("context switches of tenant %q on GPU %s reported twice; later copies skipped", k.Tenant, k.UUID))
			continue
		}
		e.counter(c.ctxSwitches, k.Total, k.Tenant, string(k.Class), itoa(k.GPU), k.UUID, "")
	}

	seenSLO := make(firstSet[string], len(snap.SLOs))
	var qs []float64
	for i := range snap.SLOs {
		s := &snap.SLOs[i]
		if !seenSLO.add(s.Tenant) {
			e.fail(fmt.Errorf("SLO of tenant %q reported twice; later copies skipped", s.Tenant))
			continue
		}
		if s.TargetSeconds > 0 {
			e.gauge(c.target, s.TargetSeconds, s.Tenant, formatQuantile(s.Quantile))
			// PromQL cannot turn the q label into a number: burn rates
			// read the objective from this series.
			e.gauge(c.objective, s.Quantile, s.Tenant)
		}
		qs = qs[:0]
		for q := range s.Quantiles {
			if !(q >= 0 && q <= 1) { // NaN included
				e.fail(fmt.Errorf("tenant %q: latency quantile %v outside [0, 1]; skipped", s.Tenant, q))
				continue
			}
			qs = append(qs, q)
		}
		slices.Sort(qs)
		for _, q := range qs {
			e.gauge(c.latency, s.Quantiles[q], s.Tenant, formatQuantile(q))
		}
		e.optGauge(c.mean, s.MeanSeconds, s.Tenant)
		e.counter(c.requests, s.RequestsTotal, s.Tenant)
		if s.GoodKnown {
			// Without a target, or from a source that gives only a mean,
			// good requests cannot be counted: absent, not zero.
			e.counter(c.good, s.GoodRequestsTotal, s.Tenant)
			e.optGauge(c.attainment, s.Attainment, s.Tenant)
		}
		if s.Window > 0 {
			e.gauge(c.window, s.Window.Seconds(), s.Tenant)
			e.gauge(c.windowRequests, s.WindowRequests, s.Tenant)
		}
		if s.SourceRead {
			// Before the first read the source is not down, only not
			// read yet: absent, not 0, as the window's figures are.
			e.gauge(c.sourceUp, boolValue(s.SourceUp), s.Tenant)
		}
		e.counter(c.sourceErrors, float64(s.ScrapeErrorsTotal), s.Tenant)
	}

	a := snap.Attribution
	e.gauge(c.conflicting, float64(a.Conflicts))
	e.counter(c.conflicts, float64(a.ConflictsTotal))
	e.counter(c.cgroupErrors, float64(a.CgroupErrorsTotal))
	type domain struct{ uuid, gi string }
	seenDomain := make(firstSet[domain], len(a.ShareMinSums))
	for i := range a.ShareMinSums {
		s := &a.ShareMinSums[i]
		if !seenDomain.add(domain{s.UUID, s.GPUInstance}) {
			e.fail(fmt.Errorf("share.min sum of GPU %s instance %q reported twice; later copies skipped", s.UUID, s.GPUInstance))
			continue
		}
		e.gauge(c.shareMinSum, s.MinSum, itoa(s.GPU), s.UUID, s.GPUInstance)
	}
	c.updateMeters(e, snap)
	c.updatePodInfo(e, snap)
	return e.err()
}
