package collector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// meterDescs are the tenant collector's metering series: energy, GPU time,
// memory time and cost per tenant and GPU, the energy and cost no tenant
// is charged for, and the GPU's own memory time.
type meterDescs struct {
	energy, idleEnergy, unsampledEnergy, unattributedEnergy, usedSeconds *prometheus.Desc
	reservedSeconds, memorySeconds, cost, idleCost, gpuMemorySeconds     *prometheus.Desc
}

func (c *tenantCollector) addMeters() {
	m := &c.meters
	l := []string{"tenant", "gpu", "uuid"}
	m.energy = c.add("tenant_energy_joules_total", "Energy of the GPU apportioned to the tenant since the exporter started: the increase of the GPU's energy counter by the tenant's share of the GPU's activity (and of its idle energy with idle_energy: reservation); with vgpu_tenant_idle_energy_joules_total the tenants add up to the GPU's increase. Absent while no sample has known the tenant's activity, which splits it.", l...)
	m.idleEnergy = c.add("tenant_idle_energy_joules_total", "Energy of the GPU since the exporter started that no tenant is charged for (the part no tenant's activity accounts for, or with idle_energy: reservation the part no tenant holds), with the parts vgpu_tenant_idle_unsampled_energy_joules_total and vgpu_tenant_idle_unattributed_energy_joules_total count apart.", "gpu", "uuid")
	m.unsampledEnergy = c.add("tenant_idle_unsampled_energy_joules_total", "The part of vgpu_tenant_idle_energy_joules_total the GPU counted while no sample metered it (the GPU lost in the samples between; samples that read it without its energy counter are owed their part): energy over a time whose activity and reservations are not known, so no rule hands it to a tenant.", "gpu", "uuid")
	m.unattributedEnergy = c.add("tenant_idle_unattributed_energy_joules_total", "The part of vgpu_tenant_idle_energy_joules_total over samples whose activity is not known (a MIG GPU without GPM or DCGM profiling figures, a whole GPU with neither SM activity, a per-process figure nor NVML's answer that no process ran): what the tenants' known activity leaves, not known to be idle, so no rule hands it to a tenant.", "gpu", "uuid")
	m.usedSeconds = c.add("tenant_gpu_used_seconds_total", "GPU time the tenant used since the exporter started: time weighted by its share of the GPU's activity, over the samples that know it; absent while no sample has known it.", l...)
	m.reservedSeconds = c.add("tenant_gpu_reserved_seconds_total", "GPU time the tenant held since the exporter started: time weighted by what it holds of the GPU (its MIG instance's part of the SMs, its MPS active-thread cap, its vGPU profile's part of the memory, scaled down where they add up to more than the GPU; an equal part of what those leave of a shared GPU).", l...)
	m.memorySeconds = c.add("tenant_memory_byte_seconds_total", "Device memory held by the tenant integrated over time since the exporter started (divide by 2^30 for GiB-seconds), over the samples that know it; absent while no sample has known it.", l...)
	m.gpuMemorySeconds = c.add("gpu_memory_used_byte_seconds_total", "The GPU's used memory integrated over the samples metered since the exporter started; what the tenants' vgpu_tenant_memory_byte_seconds_total leave of it is memory no tenant's process holds (the driver's reserve, where the backend counts it as used).", "gpu", "uuid")
	m.cost = c.add("tenant_cost_total", "Cost charged to the tenant since the exporter started, in the currency's base unit, at the prices in force at each sample: component gpu_time is its reserved GPU-seconds at the price per GPU-hour / 3600, component energy its apportioned joules at the price per kWh / 3.6e6. With vgpu_tenant_idle_cost_total the tenants add up to the GPU's time and energy at the prices.", "tenant", "gpu", "uuid", "currency", "component")
	m.idleCost = c.add("tenant_idle_cost_total", "Cost of the GPU since the exporter started that no tenant is charged for, in the currency's base unit: component gpu_time is the GPU time no tenant held, component energy the idle energy (vgpu_tenant_idle_energy_joules_total), at the prices in force at each sample.", "gpu", "uuid", "currency", "component")
}

// costs sends the cost series of one tenant or GPU (lv: its labels before
// currency and component); the energy component only where the GPU has an
// energy counter (and the tenant's part of it is known), the GPU time one
// where the time held is known.
func (e *emitter) costs(d *prometheus.Desc, costs []tenant.Cost, energyKnown, timeKnown bool, lv ...string) {
	for _, c := range costs {
		if c.GPUTimePriced && timeKnown {
			e.counter(d, c.GPUTime, append(lv, c.Currency, tenant.CostGPUTime)...)
		}
		if c.EnergyPriced && energyKnown {
			e.counter(d, c.Energy, append(lv, c.Currency, tenant.CostEnergy)...)
		}
	}
}

func (c *tenantCollector) updateMeters(e *emitter, snap *tenant.Snapshot) {
	m := &c.meters
	energyKnown := map[string]bool{}
	// GPUs read in this sample without their memory (NVML refuses the
	// whole GPU's in MIG mode without privileges): their memory integral
	// is not known, as their vgpu_gpu_memory_used_bytes is not; a lost
	// GPU keeps it.
	memoryUnread := map[string]bool{}
	if snap.Readings != nil {
		for _, d := range snap.Readings.Devices {
			if d.Up && d.MemoryTotalBytes == 0 {
				memoryUnread[d.UUID] = true
			}
		}
	}
	seenGPU := make(firstSet[string], len(snap.GPUMeters))
	for _, g := range snap.GPUMeters {
		if !seenGPU.add(g.UUID) {
			e.fail(fmt.Errorf("meter of GPU %s reported twice; later copies skipped", g.UUID))
			continue
		}
		if g.EnergyKnown {
			energyKnown[g.UUID] = true
			e.counter(m.idleEnergy, g.IdleEnergyJoules, itoa(g.GPU), g.UUID)
			e.counter(m.unsampledEnergy, g.UnsampledEnergyJoules, itoa(g.GPU), g.UUID)
			e.counter(m.unattributedEnergy, g.UnattributedEnergyJoules, itoa(g.GPU), g.UUID)
		}
		if !memoryUnread[g.UUID] {
			e.counter(m.gpuMemorySeconds, g.MemoryByteSeconds, itoa(g.GPU), g.UUID)
		}
		e.costs(m.idleCost, g.IdleCosts, g.EnergyKnown, true, itoa(g.GPU), g.UUID)
	}
	type key struct{ tenant, uuid string }
	seen := make(firstSet[key], len(snap.Meters))
	for _, t := range snap.Meters {
		if !seen.add(key{t.Tenant, t.UUID}) {
			e.fail(fmt.Errorf("meter of tenant %q on GPU %s reported twice; later copies skipped", t.Tenant, t.UUID))
			continue
		}
		lv := []string{t.Tenant, itoa(t.GPU), t.UUID}
		// a tenant's energy and used time whose activity is not known,
		// its time held where its part of the GPU is not, and its memory
		// time while no sample has known its memory, are absent, not 0
		energy := energyKnown[t.UUID] && !t.EnergyUnknown
		if energy {
			e.counter(m.energy, t.EnergyJoules, lv...)
		}
		if !t.UsedUnknown {
			e.counter(m.usedSeconds, t.GPUSecondsUsed, lv...)
		}
		if !t.ReservedUnknown {
			e.counter(m.reservedSeconds, t.GPUSecondsReserved, lv...)
		}
		if !t.MemoryUnknown {
			e.counter(m.memorySeconds, t.MemoryByteSeconds, lv...)
		}
		e.costs(m.cost, t.Costs, energy, !t.ReservedUnknown, lv...)
	}
}
