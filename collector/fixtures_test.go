package collector

import (
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const gib = 1 << 30

// H200 figures from docs/calibration.md (hardware, MIG): 132 SMs, 141 GB, 4.8 TB/s,
// 1980 MHz max SM clock; "3g.71gb = 60 SMs, 4g.71gb = 64 SMs".

// migDevice is an H200 in MIG mode with two instances and every optional
// reading set.
func migDevice() gpu.Device {
	return gpu.Device{
		Index: 0, UUID: "GPU-0000", Name: "NVIDIA H200", PCIBusID: "00000000:18:00.0",
		Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		SMCount: 132, MemoryTotalBytes: 141 * gib, MemoryUsedBytes: 40 * gib, MemoryBandwidthBytesPS: 4.8e12,
		SMClockHz: gpu.Float(1.98e9), SMClockMaxHz: gpu.Float(1.98e9), MemClockHz: gpu.Float(3.201e9),
		ClocksLocked: gpu.Bool(true), PowerWatts: gpu.Float(512.5), PowerLimitW: gpu.Float(700),
		TemperatureC: gpu.Float(61), ThrottleReason: 0x4 | 0x20, EnergyJoules: gpu.Float(123456.5),
		PersistenceMode: gpu.Bool(true), ComputeMode: "Default", ECCEnabled: gpu.Bool(true),
		ECCCorrectedTotal: gpu.Uint(3), ECCUncorrectedTotal: gpu.Uint(0),
		GPUUtil: gpu.Float(0.9), MemUtil: gpu.Float(0.4),
		Activity:             gpu.Activity{SMActive: gpu.Float(0.75), SMOccupancy: gpu.Float(0.5), DRAMActive: gpu.Float(0.625), TensorActive: gpu.Float(0.25), Source: "gpm"},
		ContextSwitchesTotal: gpu.Uint(1000), ContextSwitchCyclesTotal: gpu.Uint(5000000),
		Health: gpu.Health{
			NVLinkLinks: gpu.Uint(18), NVLinkActive: gpu.Uint(17),
			NVLinkTxBytes: gpu.Uint(1 << 40), NVLinkRxBytes: gpu.Uint(2 << 40),
			NVLinkCRCFlitErrors: gpu.Uint(4), NVLinkCRCDataErrors: gpu.Uint(1), NVLinkReplayErrors: gpu.Uint(2), NVLinkRecoveryErrors: gpu.Uint(0),
			PCIeTxBytesPS: gpu.Float(4e6), PCIeRxBytesPS: gpu.Float(8e6), PCIeReplays: gpu.Uint(3),
			RemappedRowsCorrectable: gpu.Uint(2), RemappedRowsUncorrectable: gpu.Uint(1),
			RowRemapPending: gpu.Bool(true), RowRemapFailure: gpu.Bool(false),
			RetiredPagesSingleBit: gpu.Uint(5), RetiredPagesDoubleBit: gpu.Uint(1), RetiredPagesPending: gpu.Bool(false),
		},
		MIG: []gpu.MIGInstance{
			{UUID: "MIG-aaaa", GPUInstanceID: 1, ComputeInstanceID: 0, Profile: "3g.71gb", SMCount: 60,
				MemoryTotalBytes: 70 * gib, MemoryUsedBytes: 30 * gib,
				Activity: gpu.Activity{SMActive: gpu.Float(0.875), SMOccupancy: gpu.Float(0.5), DRAMActive: gpu.Float(0.75), TensorActive: gpu.Float(0.375), Source: "gpm"}},
			{UUID: "MIG-bbbb", GPUInstanceID: 2, ComputeInstanceID: 0, Profile: "4g.71gb", SMCount: 64,
				MemoryTotalBytes: 70 * gib, MemoryUsedBytes: 10 * gib},
		},
		ComputeTimeSlice: gpu.TimeSliceDefault,
		Processes: []gpu.Process{
			{PID: 100, Type: gpu.ProcessCompute, GPUInstanceID: 1, ComputeInstanceID: 0, UsedMemoryBytes: gpu.Uint(30 * gib), UID: -1},
			{PID: 101, Type: gpu.ProcessCompute, GPUInstanceID: 2, ComputeInstanceID: 0, UsedMemoryBytes: gpu.Uint(10 * gib), UID: -1},
		},
	}
}

// timeSlicedDevice is an H100 shared by time-slicing with NVML readings
// only (no profiling activity).
func timeSlicedDevice() gpu.Device {
	return gpu.Device{
		Index: 1, UUID: "GPU-1111", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:2A:00.0",
		Up: true, Mode: gpu.SharingTimeSlice,
		SMCount: 132, MemoryTotalBytes: 80 * gib, MemoryUsedBytes: 20 * gib,
		SMClockHz: gpu.Float(1.755e9), PowerWatts: gpu.Float(300),
		GPUUtil: gpu.Float(1), MemUtil: gpu.Float(0.25),
		ContextSwitchesTotal: gpu.Uint(42),
		ComputeTimeSlice:     gpu.TimeSliceMedium,
		Processes: []gpu.Process{
			{PID: 200, Type: gpu.ProcessCompute, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1},
			{PID: 201, Type: gpu.ProcessCompute, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1},
			{PID: 202, Type: gpu.ProcessCompute, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1},
		},
	}
}

// vgpuDevice is a vGPU host GPU with two VMs.
func vgpuDevice() gpu.Device {
	return gpu.Device{
		Index: 2, UUID: "GPU-2222", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:3A:00.0",
		Up: true, Mode: gpu.SharingVGPU,
		SMCount: 132, MemoryTotalBytes: 80 * gib, MemoryUsedBytes: 40 * gib,
		VGPUs: []gpu.VGPUInstance{
			{ID: 7, UUID: "vgpu-7", VMID: "vm-1", VMName: "inference-a", Type: "H100-20C",
				FramebufferBytes: 20 * gib, FramebufferUsed: gpu.Uint(12 * gib),
				SMUtil: gpu.Float(0.5), MemUtil: gpu.Float(0.25), EncUtil: gpu.Float(0), DecUtil: gpu.Float(0.125)},
			{ID: 8, UUID: "vgpu-8", VMID: "vm-2", VMName: "batch-b", Type: "H100-20C",
				FramebufferBytes: 20 * gib, FramebufferUsed: gpu.Uint(4 * gib)},
		},
		Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort, ARREnabled: true, TimeSlice: 2 * time.Millisecond,
			AvgFactor: 33, Frequency: 960, MinTimeSlice: time.Millisecond, MaxTimeSlice: 30 * time.Millisecond},
	}
}

// downDevice is a GPU that could not be read.
func downDevice() gpu.Device {
	return gpu.Device{Index: 3, UUID: "GPU-3333", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:4A:00.0",
		Up: false, Err: "GPU is lost", Mode: gpu.SharingExclusive, MemoryTotalBytes: 80 * gib}
}

// bareDevice is up but every optional reading is unavailable.
func bareDevice() gpu.Device {
	return gpu.Device{Index: 4, UUID: "GPU-4444", Name: "Tesla T4", PCIBusID: "00000000:5A:00.0", Up: true, Mode: gpu.SharingExclusive,
		ThrottleReasonUnknown: true}
}

func readings(devs ...gpu.Device) *gpu.Readings {
	return &gpu.Readings{Time: t0, Interval: time.Second, Backend: "sim", DriverVersion: "580.65.06", CUDAVersion: "13.0", Devices: devs}
}

// richSnapshot sets every field the collectors render.
func richSnapshot() *tenant.Snapshot {
	r := readings(migDevice(), timeSlicedDevice(), vgpuDevice(), downDevice(), bareDevice())
	r.DCGMExporter = &gpu.ScrapeHealth{Up: true, ScrapeErrorsTotal: 3, PageAgeSeconds: gpu.Float(12.5), GPUsMatched: 2}
	return &tenant.Snapshot{
		Time:     t0,
		Readings: r,
		Sampler: gpu.SamplerStats{SamplesTotal: 100, ErrorsTotal: 2, LastDuration: 15 * time.Millisecond, PublishDuration: 40 * time.Millisecond, DuplicatesDropped: 3,
			LastSuccess: t0, ConsecutiveErr: 0, Interval: time.Second},
		VGPURunlists: []tenant.RunlistCount{
			{GPU: 2, UUID: "GPU-2222", Runlist: 0, RunTime: 1500 * time.Millisecond, Preemption: 250 * time.Millisecond, Slices: 750},
			{GPU: 2, UUID: "GPU-2222", Runlist: 1}, // seen, nothing counted yet
		},
		Tenants: []tenant.Info{
			{Name: "chat", Class: "latency", Priority: 10},
			{Name: "train", Class: "batch", Priority: 1},
		},
		Usage: []tenant.Usage{
			{Tenant: "chat", Class: "latency", GPU: 0, UUID: "GPU-0000", GPUInstance: "1", Processes: 1, PIDs: []uint32{100},
				Method: tenant.Measured, SMActive: gpu.Float(0.875), DRAMActive: gpu.Float(0.75),
				MemoryUsedBytes: 30 * gib},
			{Tenant: "train", Class: "batch", GPU: 1, UUID: "GPU-1111", Processes: 2, PIDs: []uint32{200, 201},
				Method: tenant.Apportioned, SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.25), KernelBusy: gpu.Float(0.625),
				MemoryUsedBytes: 16 * gib, ContextSwitchesTotal: gpu.Float(28)},
			{Tenant: tenant.Unassigned, GPU: 1, UUID: "GPU-1111", Processes: 1, PIDs: []uint32{202},
				Method: tenant.Apportioned, MemoryUsedBytes: 4 * gib, ContextSwitchesTotal: gpu.Float(14)},
		},
		// a tenant that left GPU 1 keeps its count
		KeptContextSwitches: []tenant.KeptCount{{Tenant: "infer", Class: "best-effort", GPU: 1, UUID: "GPU-1111", Total: 7}},
		Meters: []tenant.Meter{
			// at 3.6 USD per GPU-hour and 36 USD per kWh
			{GPU: 0, UUID: "GPU-0000", Tenant: "chat", EnergyJoules: 5000, GPUSecondsUsed: 40, GPUSecondsReserved: 60, MemoryByteSeconds: 3000 * gib,
				Costs: []tenant.Cost{{Currency: "USD", GPUTime: 0.06, Energy: 0.05, GPUTimePriced: true, EnergyPriced: true}}},
			// GPU 1 has no energy counter: no energy series
			{GPU: 1, UUID: "GPU-1111", Tenant: "train", GPUSecondsUsed: 50, GPUSecondsReserved: 100, MemoryByteSeconds: 1600 * gib,
				Costs: []tenant.Cost{{Currency: "USD", GPUTime: 0.1, GPUTimePriced: true, EnergyPriced: true}}},
		},
		GPUMeters: []tenant.GPUMeter{
			{GPU: 0, UUID: "GPU-0000", EnergyJoules: 7000, IdleEnergyJoules: 2000, UnsampledEnergyJoules: 450, EnergyKnown: true, MemoryByteSeconds: 3500 * gib,
				IdleCosts: []tenant.Cost{{Currency: "USD", GPUTime: 0.04, Energy: 0.02, GPUTimePriced: true, EnergyPriced: true}}},
			{GPU: 1, UUID: "GPU-1111", MemoryByteSeconds: 1700 * gib,
				IdleCosts: []tenant.Cost{{Currency: "USD", GPUTimePriced: true, EnergyPriced: true}}},
		},
		SLOs: []tenant.SLOStatus{
			{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 0.5, Window: 5 * time.Minute,
				Quantiles:     map[float64]float64{0.5: 0.125, 0.9: 0.25, 0.99: 0.625},
				RequestsTotal: 1000, GoodRequestsTotal: 985, Attainment: gpu.Float(0.985), SourceUp: true, SourceRead: true, ScrapeErrorsTotal: 1,
				GoodKnown: true, MeanSeconds: gpu.Float(0.1875), WindowRequests: 600}},
			// A mean-only source without a target (Triton): no good
			// requests, attainment or target.
			{Tenant: "train", Status: latency.Status{Window: 5 * time.Minute, Quantiles: map[float64]float64{},
				RequestsTotal: 50, MeanSeconds: gpu.Float(2.5), WindowRequests: 30, SourceUp: false, SourceRead: true, ScrapeErrorsTotal: 4,
				LastError: "connection refused"}},
		},
		Attribution: tenant.AttributionStatus{Conflicts: 1, ConflictsTotal: 2, CgroupErrorsTotal: 3,
			ShareMinSums: []tenant.ShareMinSum{
				{GPU: 0, UUID: "GPU-0000", GPUInstance: "1", Tenants: []string{"chat"}, MinSum: 0.25},
				{GPU: 1, UUID: "GPU-1111", Tenants: []string{"train"}, MinSum: 0.5},
			}},
		Config: tenant.ConfigStatus{File: "/etc/vgpu/tenants.yml", LastReloadSuccessful: true,
			LastReloadSuccessTime: t0.Add(-time.Hour), ReloadsTotal: 3, ReloadFailuresTotal: 1},
		Kubelet: &tenant.KubeletStatus{Up: true, LastSuccess: t0.Add(-10 * time.Second), ErrorsTotal: 2, PodsMapped: 5,
			Metadata: kube.MetadataStatus{Source: "https://10.0.0.5:10250/pods", LastSuccess: t0.Add(-70 * time.Second), ErrorsTotal: 6}},
		PodInfo: &tenant.PodInfo{MaxSeries: 512, DroppedTotal: 1, Allocations: []tenant.PodAllocation{
			{Tenant: "chat", GPU: 0, UUID: "GPU-0000", GPUInstance: "1", Namespace: "llm", Pod: "chat-0", Container: "server"},
			{Tenant: "train", GPU: 1, UUID: "GPU-1111", Namespace: "research", Pod: "train-0", Container: "trainer"},
		}},
		Events: []tenant.EventCount{
			{GPU: 0, UUID: "GPU-0000", Kind: gpu.EventXID, Code: 79, Total: 2},
			{GPU: 1, UUID: "GPU-1111", Kind: gpu.EventOOM, Total: 1},
		},
	}
}

// bigSnapshot is nGPU H200s, each with 7 MIG instances, and nTenants
// tenants spread over the instances, each with an SLO.
func bigSnapshot(nGPU, nTenants int) *tenant.Snapshot {
	s := &tenant.Snapshot{Time: t0, Sampler: gpu.SamplerStats{SamplesTotal: 1, LastSuccess: t0},
		Config: tenant.ConfigStatus{File: "tenants.yml", LastReloadSuccessful: true, LastReloadSuccessTime: t0, ReloadsTotal: 1}}
	r := readings()
	for i := 0; i < nGPU; i++ {
		d := migDevice()
		d.Index = i
		d.UUID = fmt.Sprintf("GPU-%04d", i)
		d.MIG = nil
		d.Processes = nil
		for gi := 1; gi <= 7; gi++ {
			d.MIG = append(d.MIG, gpu.MIGInstance{UUID: fmt.Sprintf("MIG-%d-%d", i, gi), GPUInstanceID: gi, Profile: "1g.18gb", SMCount: 16,
				MemoryTotalBytes: 18 * gib, MemoryUsedBytes: 9 * gib,
				Activity: gpu.Activity{SMActive: gpu.Float(0.5), SMOccupancy: gpu.Float(0.25), DRAMActive: gpu.Float(0.5), TensorActive: gpu.Float(0.125), Source: "gpm"}})
			d.Processes = append(d.Processes, gpu.Process{PID: uint32(1000*i + gi), Type: gpu.ProcessCompute, GPUInstanceID: gi, UID: -1})
		}
		r.Devices = append(r.Devices, d)
	}
	s.Readings = r
	for t := 0; t < nTenants; t++ {
		name := fmt.Sprintf("tenant-%02d", t)
		s.Tenants = append(s.Tenants, tenant.Info{Name: name, Class: "latency", Priority: t})
		s.SLOs = append(s.SLOs, tenant.SLOStatus{Tenant: name, Status: latency.Status{Quantile: 0.99, TargetSeconds: 0.5, Window: 5 * time.Minute,
			Quantiles:     map[float64]float64{0.5: 0.1, 0.9: 0.2, 0.99: 0.4},
			RequestsTotal: 100, GoodRequestsTotal: 99, Attainment: gpu.Float(0.99), SourceUp: true, SourceRead: true,
			GoodKnown: true, MeanSeconds: gpu.Float(0.12), WindowRequests: 300}})
	}
	k := 0
	for i := 0; i < nGPU; i++ {
		for gi := 1; gi <= 7; gi++ {
			t := k % nTenants
			k++
			s.Usage = append(s.Usage, tenant.Usage{Tenant: fmt.Sprintf("tenant-%02d", t), Class: "latency", GPU: i,
				UUID: fmt.Sprintf("GPU-%04d", i), GPUInstance: fmt.Sprint(gi), Processes: 1,
				Method: tenant.Measured, SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.5),
				MemoryUsedBytes: 9 * gib})
		}
	}
	return s
}
