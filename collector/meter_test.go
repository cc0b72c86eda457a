package collector

import (
	"strings"
	"testing"
	"time"

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

// A MIG GPU without its instances' SM activity (no GPM before Hopper, no
// DCGM profiling) was served a tenant running flat out as 0 GPU-seconds
// used and 0 J, all of its energy as idle: now those two series are
// absent, its reserved GPU-seconds served, and the energy the GPU's
// unattributed part of its idle energy.
func TestMeterMIGWithoutActivityAbsent(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: train, selectors: [{executable: train}]}\n", func(energy float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 108,
			MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30, EnergyJoules: gpu.Float(energy),
			MIG:       []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, Profile: "7g.80gb", SMCount: 98, MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30}},
			Processes: []gpu.Process{{PID: 7, Name: "train", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(20 << 30)}}}
	})
	want := `
# HELP vgpu_tenant_gpu_reserved_seconds_total GPU time the tenant held since the exporter started: time weighted by what it holds of the GPU (its MIG instance's part of the SMs, its MPS active-thread cap, its vGPU profile's part of the memory, scaled down where they add up to more than the GPU; an equal part of what those leave of a shared GPU).
# TYPE vgpu_tenant_gpu_reserved_seconds_total counter
vgpu_tenant_gpu_reserved_seconds_total{gpu="0",tenant="train",uuid="GPU-0"} 9.074074074074074
# HELP vgpu_tenant_idle_unattributed_energy_joules_total The part of vgpu_tenant_idle_energy_joules_total over samples whose activity is not known (a MIG GPU without GPM or DCGM profiling figures, a whole GPU with neither SM activity, a per-process figure nor NVML's answer that no process ran): what the tenants' known activity leaves, not known to be idle, so no rule hands it to a tenant.
# TYPE vgpu_tenant_idle_unattributed_energy_joules_total counter
vgpu_tenant_idle_unattributed_energy_joules_total{gpu="0",uuid="GPU-0"} 3000
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_gpu_used_seconds_total", "vgpu_tenant_energy_joules_total", "vgpu_tenant_gpu_reserved_seconds_total",
		"vgpu_tenant_idle_unattributed_energy_joules_total"); err != nil {
		t.Error(err)
	}
}

// A tenant whose MIG instance's part of the GPU is not known has no
// reserved GPU-seconds nor GPU-time cost served, not 0; its memory and its
// energy cost are.
func TestMeterReservedUnknownAbsent(t *testing.T) {
	snap := &tenant.Snapshot{
		Meters: []tenant.Meter{{GPU: 0, UUID: "GPU-0", Tenant: "small", EnergyJoules: 30, GPUSecondsUsed: 1, MemoryByteSeconds: 50, ReservedUnknown: true,
			Costs: []tenant.Cost{{Currency: "USD", Energy: 0.5, GPUTimePriced: true, EnergyPriced: true}}}},
		GPUMeters: []tenant.GPUMeter{{GPU: 0, UUID: "GPU-0", EnergyKnown: true}},
	}
	want := `
# HELP vgpu_tenant_cost_total Cost charged to the tenant since the exporter started, in the currency's base unit, at the prices in force at each sample: component gpu_time is its reserved GPU-seconds at the price per GPU-hour / 3600, component energy its apportioned joules at the price per kWh / 3.6e6. With vgpu_tenant_idle_cost_total the tenants add up to the GPU's time and energy at the prices.
# TYPE vgpu_tenant_cost_total counter
vgpu_tenant_cost_total{component="energy",currency="USD",gpu="0",tenant="small",uuid="GPU-0"} 0.5
# HELP vgpu_tenant_memory_byte_seconds_total Device memory held by the tenant integrated over time since the exporter started (divide by 2^30 for GiB-seconds), over the samples that know it; absent while no sample has known it.
# TYPE vgpu_tenant_memory_byte_seconds_total counter
vgpu_tenant_memory_byte_seconds_total{gpu="0",tenant="small",uuid="GPU-0"} 50
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_gpu_reserved_seconds_total", "vgpu_tenant_cost_total", "vgpu_tenant_memory_byte_seconds_total"); err != nil {
		t.Error(err)
	}
}

// A MIG tenant whose activity, or its instance's part of the GPU, no
// sample knows was served 0 GPU-seconds used and 0 J (and 0 reserved
// GPU-seconds) on the exporter's first sample, which metered no time, and
// absent from the next: series that flapped on every restart. Now they are
// absent from the first sample on; a tenant whose figures that sample
// knows has them served from it, as before.
func TestMeterUnknownAbsentFromFirstSample(t *testing.T) {
	for _, tc := range []struct {
		name            string
		gpuSMs, instSMs int
		profile         string
		active          *float64 // the instance's SM activity
		// series served on each sample: used-seconds and energy, reserved
		usedEnergy, reserved int
	}{
		{"activity unknown", 108, 98, "7g.80gb", nil, 0, 1},
		{"instance's part unknown", 0, 14, "1g.10gb", nil, 0, 0},
		{"known", 108, 98, "7g.80gb", gpu.Float(0.5), 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tenant.ParseConfig("t.yaml", []byte("tenants:\n  - {name: train, selectors: [{executable: train}]}\n"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: tc.gpuSMs,
					MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30, EnergyJoules: gpu.Float(float64(i) * 3000),
					MIG: []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, Profile: tc.profile, SMCount: tc.instSMs, MemoryTotalBytes: 10 << 30, MemoryUsedBytes: 2 << 30,
						Activity: gpu.Activity{SMActive: tc.active}}},
					Processes: []gpu.Process{{PID: 7, Name: "train", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(2 << 30)}}}
				r := &gpu.Readings{Time: time.Unix(int64(10*i), 0), Devices: []gpu.Device{d}}
				if i > 0 {
					r.Interval = 10 * time.Second
				}
				e := newExporter(t, b.Build(r, gpu.SamplerStats{}), "tenant")
				used := testutil.CollectAndCount(e, "vgpu_tenant_gpu_used_seconds_total", "vgpu_tenant_energy_joules_total")
				reserved := testutil.CollectAndCount(e, "vgpu_tenant_gpu_reserved_seconds_total")
				if used != tc.usedEnergy || reserved != tc.reserved {
					t.Errorf("sample %d: %d used-seconds and energy series, %d reserved; want %d and %d", i, used, reserved, tc.usedEnergy, tc.reserved)
				}
			}
		})
	}
}

// Under idle_energy: reservation, on a MIG GPU one of whose instances has
// no SM activity (dcgm-exporter without an instance created after it
// started), the tenant of the instance whose activity is known was charged
// its part of the activity and its energy series was not served: the
// tenants served and the idle energy added up to less than the GPU's
// increase, and the charge surfaced later at once, as the first point of
// a new series, which increase() does not count.
func TestMeterReservationServesKnownEnergy(t *testing.T) {
	snap := meterTwoSamples(t, "defaults: {idle_energy: reservation}\ntenants:\n  - {name: train, selectors: [{executable: train}]}\n  - {name: infer, selectors: [{executable: infer}]}\n", func(energy float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 132,
			MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30, EnergyJoules: gpu.Float(energy),
			MIG: []gpu.MIGInstance{
				{UUID: "MIG-1", GPUInstanceID: 1, Profile: "3g.40gb", SMCount: 60, MemoryTotalBytes: 40 << 30, MemoryUsedBytes: 10 << 30,
					Activity: gpu.Activity{SMActive: gpu.Float(0.66), Source: "dcgm"}},
				{UUID: "MIG-2", GPUInstanceID: 2, Profile: "4g.40gb", SMCount: 64, MemoryTotalBytes: 40 << 30, MemoryUsedBytes: 10 << 30}},
			Processes: []gpu.Process{
				{PID: 7, Name: "train", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(10 << 30)},
				{PID: 8, Name: "infer", UID: -1, GPUInstanceID: 2, UsedMemoryBytes: gpu.Uint(10 << 30)}}}
	})
	// train: 3000 J × 0.66 × 60/132 = 900 J; the rest idle, infer's
	// energy (its activity unknown) absent
	want := `
# HELP vgpu_tenant_energy_joules_total Energy of the GPU apportioned to the tenant since the exporter started: the increase of the GPU's energy counter by the tenant's share of the GPU's activity (and of its idle energy with idle_energy: reservation); with vgpu_tenant_idle_energy_joules_total the tenants add up to the GPU's increase. Absent while no sample has known the tenant's activity, which splits it.
# TYPE vgpu_tenant_energy_joules_total counter
vgpu_tenant_energy_joules_total{gpu="0",tenant="train",uuid="GPU-0"} 900
# HELP vgpu_tenant_idle_energy_joules_total Energy of the GPU since the exporter started that no tenant is charged for (the part no tenant's activity accounts for, or with idle_energy: reservation the part no tenant holds), with the parts vgpu_tenant_idle_unsampled_energy_joules_total and vgpu_tenant_idle_unattributed_energy_joules_total count apart.
# TYPE vgpu_tenant_idle_energy_joules_total counter
vgpu_tenant_idle_energy_joules_total{gpu="0",uuid="GPU-0"} 2100
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_energy_joules_total", "vgpu_tenant_idle_energy_joules_total"); err != nil {
		t.Error(err)
	}
}

// meterTwoSamples builds, with the tenants file tenants, the snapshot of
// two samples 10 s apart of the device dev gives at the energy counter's
// reading (0 J, then 3000 J).
func meterTwoSamples(t *testing.T, tenants string, dev func(energy float64) gpu.Device) *tenant.Snapshot {
	t.Helper()
	cfg, err := tenant.ParseConfig("t.yaml", []byte(tenants))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	var snap *tenant.Snapshot
	for i := range 2 {
		r := &gpu.Readings{Time: time.Unix(int64(10*i), 0), Devices: []gpu.Device{dev(float64(i) * 3000)}}
		if i > 0 {
			r.Interval = 10 * time.Second
		}
		snap = b.Build(r, gpu.SamplerStats{})
	}
	return snap
}
