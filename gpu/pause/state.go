package pause

import (
	"maps"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

var (
	_ gpu.PauseReporter          = (*Pauser)(nil)
	_ gpu.PauseFailuresForgetter = (*Pauser)(nil)
)

// PausesInForce implements gpu.PauseReporter: each paused tenant, for each
// GPU that asks for a pause of it, at the duty its pulse runs (the largest
// any of its GPUs asks for, the longest pause capped at MaxPause), 0 where
// its latest period's freeze failed or found none of its groups left to
// freeze (nothing paused). Sorted by tenant and GPU.
func (p *Pauser) PausesInForce() []gpu.PauseInForce {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []gpu.PauseInForce
	for _, tenant := range slices.Sorted(maps.Keys(p.tenants)) {
		pl := p.tenants[tenant]
		failed, none := pl.failed.Load(), pl.none.Load()
		pl.mu.Lock()
		duty := min(pl.dutyLocked(), float64(p.o.MaxPause)/float64(p.o.Period))
		for _, uuid := range slices.Sorted(maps.Keys(pl.duties)) {
			if pl.duties[uuid] <= 0 {
				continue
			}
			in := gpu.PauseInForce{UUID: uuid, Tenant: tenant, Duty: duty, FreezeFailed: failed}
			if failed || none {
				in.Duty = 0
			}
			out = append(out, in)
		}
		pl.mu.Unlock()
	}
	return out
}

// PauseFreezeFailures implements gpu.PauseReporter.
func (p *Pauser) PauseFreezeFailures() map[string]uint64 {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	return maps.Clone(p.failures)
}

// PausePeriod implements gpu.PauseReporter.
func (p *Pauser) PausePeriod() time.Duration { return p.o.Period }

// countFailure counts a period of tenant whose freeze failed.
func (p *Pauser) countFailure(tenant string) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if p.failures == nil {
		p.failures = map[string]uint64{}
	}
	p.failures[tenant]++
}

// ForgetPauseFailures implements gpu.PauseFailuresForgetter: the count of
// a tenant that no pulse pauses now is dropped. The check and the drop are
// one critical section under p.mu: a pause of the tenant that starts
// between them (and its failed freezes) cannot lose its count.
func (p *Pauser) ForgetPauseFailures(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, paused := p.tenants[tenant]; paused {
		return
	}
	p.failMu.Lock()
	defer p.failMu.Unlock()
	delete(p.failures, tenant)
}
