package collector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// meterDescs are the tenant collector's metering series: energy, GPU time
// and memory time per tenant and GPU, and the energy no tenant is charged
// for.
type meterDescs struct {
	energy, idleEnergy, usedSeconds, reservedSeconds, memorySeconds *prometheus.Desc
}

func (c *tenantCollector) addMeters() {
	m := &c.meters
	l := []string{"tenant", "gpu", "uuid"}
	m.energy = c.add("tenant_energy_joules_total", "Energy of the GPU apportioned to the tenant since the exporter started: the increase of the GPU's energy counter by the tenant's share of the GPU's activity (and of its idle energy with idle_energy: reservation); with vgpu_tenant_idle_energy_joules_total the tenants add up to the GPU's increase.", l...)
	m.idleEnergy = c.add("tenant_idle_energy_joules_total", "Energy of the GPU since the exporter started that no tenant is charged for (the part no tenant's activity accounts for, or with idle_energy: reservation the part no tenant holds).", "gpu", "uuid")
	m.usedSeconds = c.add("tenant_gpu_used_seconds_total", "GPU time the tenant used since the exporter started: time weighted by its share of the GPU's activity.", l...)
	m.reservedSeconds = c.add("tenant_gpu_reserved_seconds_total", "GPU time the tenant held since the exporter started: time weighted by what it holds of the GPU (its MIG instance's part of the SMs, an equal part of a shared GPU).", l...)
	m.memorySeconds = c.add("tenant_memory_byte_seconds_total", "Device memory held by the tenant integrated over time since the exporter started (divide by 2^30 for GiB-seconds).", l...)
}

func (c *tenantCollector) updateMeters(e *emitter, snap *tenant.Snapshot) {
	m := &c.meters
	energyKnown := map[string]bool{}
	seenGPU := make(firstSet[string], len(snap.GPUMeters))
	for _, g := range snap.GPUMeters {
		if !seenGPU.add(g.UUID) {
			e.fail(fmt.Errorf("meter of GPU %s reported twice; later copies skipped", g.UUID))
			continue
		}
		if g.EnergyKnown {
			energyKnown[g.UUID] = true
			e.counter(m.idleEnergy, g.IdleEnergyJoules, itoa(g.GPU), g.UUID)
		}
	}
	type key struct{ tenant, uuid string }
	seen := make(firstSet[key], len(snap.Meters))
	for _, t := range snap.Meters {
		if !seen.add(key{t.Tenant, t.UUID}) {
			e.fail(fmt.Errorf("meter of tenant %q on GPU %s reported twice; later copies skipped", t.Tenant, t.UUID))
			continue
		}
		lv := []string{t.Tenant, itoa(t.GPU), t.UUID}
		if energyKnown[t.UUID] {
			e.counter(m.energy, t.EnergyJoules, lv...)
		}
		e.counter(m.usedSeconds, t.GPUSecondsUsed, lv...)
		e.counter(m.reservedSeconds, t.GPUSecondsReserved, lv...)
		e.counter(m.memorySeconds, t.MemoryByteSeconds, lv...)
	}
}
