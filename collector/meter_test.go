package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestCostSeries: a cost component is served once priced, in every
// currency priced so far; the energy component only on a GPU with an
// energy counter; the GPU's memory byte-seconds on every GPU metered.
func TestCostSeries(t *testing.T) {
	usd := func(gpuTime, energy float64) tenant.Cost {
		return tenant.Cost{Currency: "USD", GPUTime: gpuTime, Energy: energy, GPUTimePriced: true, EnergyPriced: true}
	}
	snap := &tenant.Snapshot{
		Meters: []tenant.Meter{
			// priced in EUR (GPU time only) until a reload to USD
			{GPU: 0, UUID: "GPU-0", Tenant: "chat", Costs: []tenant.Cost{{Currency: "EUR", GPUTime: 1.5, GPUTimePriced: true}, usd(0.25, 0.125)}},
			{GPU: 0, UUID: "GPU-0", Tenant: "batch"},                                  // before any price
			{GPU: 1, UUID: "GPU-1", Tenant: "train", Costs: []tenant.Cost{usd(2, 0)}}, // no energy counter
			{GPU: 1, UUID: "GPU-1", Tenant: "train", Costs: []tenant.Cost{usd(9, 9)}}, // reported twice: skipped
		},
		GPUMeters: []tenant.GPUMeter{
			{GPU: 0, UUID: "GPU-0", EnergyKnown: true, MemoryByteSeconds: 4096, IdleCosts: []tenant.Cost{usd(0.5, 0.0625)}},
			{GPU: 1, UUID: "GPU-1", MemoryByteSeconds: 1024, IdleCosts: []tenant.Cost{usd(0, 0)}},
		},
	}
	want := `
# HELP vgpu_tenant_cost_total Cost charged to the tenant since the exporter started, in the currency's base unit, at the prices in force at each sample: component gpu_time is its reserved GPU-seconds at the price per GPU-hour / 3600, component energy its apportioned joules at the price per kWh / 3.6e6. With vgpu_tenant_idle_cost_total the tenants add up to the GPU's time and energy at the prices.
# TYPE vgpu_tenant_cost_total counter
vgpu_tenant_cost_total{component="gpu_time",currency="EUR",gpu="0",tenant="chat",uuid="GPU-0"} 1.5
vgpu_tenant_cost_total{component="gpu_time",currency="USD",gpu="0",tenant="chat",uuid="GPU-0"} 0.25
vgpu_tenant_cost_total{component="energy",currency="USD",gpu="0",tenant="chat",uuid="GPU-0"} 0.125
vgpu_tenant_cost_total{component="gpu_time",currency="USD",gpu="1",tenant="train",uuid="GPU-1"} 2
# HELP vgpu_tenant_idle_cost_total Cost of the GPU since the exporter started that no tenant is charged for, in the currency's base unit: component gpu_time is the GPU time no tenant held, component energy the idle energy (vgpu_tenant_idle_energy_joules_total), at the prices in force at each sample.
# TYPE vgpu_tenant_idle_cost_total counter
vgpu_tenant_idle_cost_total{component="gpu_time",currency="USD",gpu="0",uuid="GPU-0"} 0.5
vgpu_tenant_idle_cost_total{component="energy",currency="USD",gpu="0",uuid="GPU-0"} 0.0625
vgpu_tenant_idle_cost_total{component="gpu_time",currency="USD",gpu="1",uuid="GPU-1"} 0
# HELP vgpu_gpu_memory_used_byte_seconds_total The GPU's used memory integrated over the samples metered since the exporter started; what the tenants' vgpu_tenant_memory_byte_seconds_total leave of it is memory no tenant's process holds (the driver's reserve, where the backend counts it as used).
# TYPE vgpu_gpu_memory_used_byte_seconds_total counter
vgpu_gpu_memory_used_byte_seconds_total{gpu="0",uuid="GPU-0"} 4096
vgpu_gpu_memory_used_byte_seconds_total{gpu="1",uuid="GPU-1"} 1024
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_cost_total", "vgpu_tenant_idle_cost_total", "vgpu_gpu_memory_used_byte_seconds_total"); err != nil {
		t.Error(err)
	}
}

// A GPU read without its memory (NVML's NO_PERMISSION for a MIG GPU's
// whole memory, without privileges) has no memory byte-seconds, as it has
// no vgpu_gpu_memory_used_bytes; a lost GPU keeps its counter.
func TestGPUMemorySecondsNeedMemory(t *testing.T) {
	snap := &tenant.Snapshot{
		Readings: &gpu.Readings{Devices: []gpu.Device{
			{Index: 0, UUID: "GPU-0", Up: true},
			{Index: 1, UUID: "GPU-1"},
			{Index: 2, UUID: "GPU-2", Up: true, MemoryTotalBytes: 4096, MemoryUsedBytes: 1024},
		}},
		GPUMeters: []tenant.GPUMeter{
			{GPU: 0, UUID: "GPU-0"},
			{GPU: 1, UUID: "GPU-1", MemoryByteSeconds: 512},
			{GPU: 2, UUID: "GPU-2", MemoryByteSeconds: 1024},
		},
	}
	want := `
# HELP vgpu_gpu_memory_used_byte_seconds_total The GPU's used memory integrated over the samples metered since the exporter started; what the tenants' vgpu_tenant_memory_byte_seconds_total leave of it is memory no tenant's process holds (the driver's reserve, where the backend counts it as used).
# TYPE vgpu_gpu_memory_used_byte_seconds_total counter
vgpu_gpu_memory_used_byte_seconds_total{gpu="1",uuid="GPU-1"} 512
vgpu_gpu_memory_used_byte_seconds_total{gpu="2",uuid="GPU-2"} 1024
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want), "vgpu_gpu_memory_used_byte_seconds_total"); err != nil {
		t.Error(err)
	}
}
