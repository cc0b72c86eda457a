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
	last map[string]time.Time // by tenant: the latest sample with usage here
	prev time.Time            // the latest sample's time
	// read: the tenants whose sources the tracker was last given, in
	// the order of the configuration
	read []string
}

func newHostedSources() hostedSources {
	return hostedSources{last: map[string]time.Time{}}
}

// update records the usage of the sample r and returns c's tenants whose
// sources this host reads as of r, and whether they differ from those
// returned before. A tenant's source is read from the first sample in
// which the tenant has usage here, and until it has had none for its SLO
// window (the figures of the window are then none of this host's): a
// restart or a sample that misses a process keeps it, its counters and
// window going on; one that stays away longer is forgotten, and back, its
// counters start at 0. The time a GPU is listed but not read does not
// count, as for the meters (departures.expire), nor, for a tenant of pods,
// the time after the last good pod mapping (known; nil: none).
func (h *hostedSources) update(c *compiledConfig, r *gpu.Readings, usage []Usage, known func(string) time.Time) ([]*Tenant, bool) {
	if r != nil {
		h.observe(c, r, usage)
	}
	var read []*Tenant
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if t.LatencySource == nil {
			continue
		}
		last, ok := h.last[t.Name]
		if !ok {
			continue
		}
		window := c.Defaults.SLOWindow
		if t.SLO != nil && t.SLO.Window > 0 {
			window = t.SLO.Window
		}
		seen := h.prev
		if known != nil {
			if s := known(t.Name); s.Before(seen) {
				seen = s
			}
		}
		if seen.Sub(last) >= window {
			delete(h.last, t.Name)
			continue
		}
		read = append(read, t)
	}
	for name := range h.last {
		if !c.sourced[name] {
			delete(h.last, name) // no longer a tenant with a source
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

// observe moves the latest usage of r's tenants with a latency source in c
// to r's time, and that of every tenant followed on by the time since the
// previous sample when one of r's GPUs is not read (its tenants are not
// known to have left).
func (h *hostedSources) observe(c *compiledConfig, r *gpu.Readings, usage []Usage) {
	at := r.Time
	if !at.After(h.prev) {
		return
	}
	if !h.prev.IsZero() && slices.ContainsFunc(r.Devices, func(d gpu.Device) bool { return !d.Up }) {
		lost := at.Sub(h.prev)
		for name, t := range h.last {
			h.last[name] = t.Add(lost)
		}
	}
	h.prev = at
	for _, u := range usage {
		if c.sourced[u.Tenant] {
			h.last[u.Tenant] = at
		}
	}
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
