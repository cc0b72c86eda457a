package tenant

import (
	"cmp"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// KeptCount is the context-switch count a tenant was attributed on a GPU
// where it has no usage in the sample (its processes left; it may come
// back): served with the usage series' labels, so that the tenants of a
// GPU still add up to the GPU's context switches since the exporter
// started, and a tenant's counter does not vanish while it is away, for
// BuilderOptions.DepartedRetention.
type KeptCount struct {
	Tenant string
	Class  gpu.TenantClass
	GPU    int
	UUID   string
	Total  float64
}

// keptContextSwitches are the counts (addCS) of the tenants without usage
// on a GPU of r that was read, is not in MIG mode and counts context
// switches, by GPU UUID and tenant; a count is kept, not served, while
// its GPU is in MIG mode. Called with buildMu held.
func (b *Builder) keptContextSwitches(compiled *compiledConfig, r *gpu.Readings, usage []Usage) []KeptCount {
	if r == nil || len(b.attr.csAcc) == 0 {
		return nil
	}
	// mostly every tenant with a count has usage: nothing kept, nothing
	// allocated (this runs at every sample)
	n := 0
	for _, u := range usage {
		if _, ok := b.attr.csAcc[csKey{u.UUID, u.Tenant}]; ok && u.GPUInstance == "" {
			n++ // (a whole GPU's usage: one a tenant)
		}
	}
	if n == len(b.attr.csAcc) {
		return nil
	}
	counting := map[string]int{} // UUID: index
	for i := range r.Devices {
		// a MIG GPU's counts no tenant's (not per instance): none served
		if d := &r.Devices[i]; d.Up && d.ContextSwitchesTotal != nil && wholeGPU(d) {
			counting[d.UUID] = d.Index
		}
	}
	present := make(map[csKey]bool, len(usage))
	for _, u := range usage {
		present[csKey{u.UUID, u.Tenant}] = true
	}
	var out []KeptCount
	for k, total := range b.attr.csAcc {
		if idx, ok := counting[k.uuid]; ok && !present[k] {
			out = append(out, KeptCount{Tenant: k.tenant, Class: compiled.classOf(k.tenant), GPU: idx, UUID: k.uuid, Total: total})
		}
	}
	slices.SortFunc(out, func(a, b KeptCount) int {
		return cmp.Or(cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Tenant, b.Tenant))
	})
	return out
}

// wholeGPU says whether d is read as one GPU: MIG off, and no MIG
// instance listed.
func wholeGPU(d *gpu.Device) bool { return !d.MIGEnabled && len(d.MIG) == 0 }
