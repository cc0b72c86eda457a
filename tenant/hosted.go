package tenant

import (
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

// hostedSources follows, under BuilderOptions.SourcesWhereRunning, the
// tenants whose latency sources this host reads: those with usage on one
// of its GPUs within their SLO window. One tenants file serves every host
// (a DaemonSet's ConfigMap), and a source read on each would be scraped
// and served once a host. Guarded by the Builder's buildMu.
type hostedSources struct {
	lastUsage // of the tenants with a latency source, by GPU
	// read: the tenants whose sources the tracker was last given, in
	// the order of the configuration
	read []string
}

func newHostedSources() hostedSources {
	return hostedSources{lastUsage: newLastUsage()}
}

// update records the usage of the sample r and returns c's tenants whose
// sources this host reads as of r, and whether they differ from those
// returned before. A tenant's source is read from the first sample in
// which the tenant has usage here, and until it has had none on any GPU
// here for its SLO window (the figures of the window are then none of
// this host's): a restart or a sample that misses a process keeps it, its
// counters and window going on; one that stays away longer is forgotten,
// and back, its counters start at 0. As for the meters
// (departures.expire), the time a GPU is listed but not read does not
// count for the tenants that had usage on it, nor, for a tenant of pods,
// the time after the last good pod mapping (known; nil: none). Without a
// sample (r nil: a reload of the tenants file, which has no mapping's
// time to measure a tenant of pods by) nothing expires: the tenants no
// longer in c with a source are dropped, the others kept until a sample
// says otherwise, and none is added.
func (h *hostedSources) update(c *compiledConfig, r *gpu.Readings, usage []Usage, known func(string) time.Time) ([]*Tenant, bool) {
	var down map[string]bool
	if r != nil {
		down = h.record(r, usage, func(tenant string) bool { return c.sourceWindow[tenant] > 0 })
	}
	here := map[string]bool{} // the tenants with usage here within their window
	for k := range h.last {
		window := c.sourceWindow[k.tenant]
		if window <= 0 {
			delete(h.last, k) // no longer a tenant with a source
			continue
		}
		if r != nil {
			if age, left := h.absence(k, r.Time, down, known); left && age >= window {
				delete(h.last, k)
				continue
			}
		}
		here[k.tenant] = true
	}
	var read []*Tenant
	for i := range c.Tenants {
		if t := &c.Tenants[i]; t.LatencySource != nil && here[t.Name] {
			read = append(read, t)
		}
	}
	changed := !slices.EqualFunc(read, h.read, func(t *Tenant, name string) bool { return t.Name == name })
	if changed {
		h.read = h.read[:0]
		for _, t := range read {
			h.read = append(h.read, t.Name)
		}
	}
	return read, changed
}

// sourceSpecs are the latency specs of tenants, in the latency package's
// terms.
func sourceSpecs(tenants []*Tenant, d Defaults) []latency.Spec {
	specs := make([]latency.Spec, 0, len(tenants))
	for _, t := range tenants {
		specs = append(specs, latencySpec(t, d))
	}
	return specs
}

// knownAsOf is, for each tenant of c, the time up to which its absence
// from this host's usage is known (see forgetDeparted): the sample's time,
// or for a tenant of pods the last good pod mapping's; nil without one.
func knownAsOf(c *compiledConfig, r *gpu.Readings, ks *kube.Status) func(string) time.Time {
	if ks == nil || r == nil {
		return nil
	}
	pods, labels := mappingAsOf(ks)
	return func(tenant string) time.Time {
		switch {
		case c.ofLabels(tenant):
			return labels
		case c.ofPods(tenant):
			return pods
		}
		return r.Time
	}
}
