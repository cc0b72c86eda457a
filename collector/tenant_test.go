package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A process whose used memory the driver does not report (NVML's "not
// available": without permission, or from a container in its own PID
// namespace) left its tenant's memory served as 0 and its memory
// byte-seconds growing by nothing: now both series are absent, not 0,
// while a tenant whose processes' memory was reported keeps its own.
func TestTenantMemoryUnknownAbsent(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n  - {name: batch, selectors: [{executable: train}]}\n", func(energy float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, SMCount: 132,
			MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 32 << 30, EnergyJoules: gpu.Float(energy),
			Activity: gpu.Activity{SMActive: gpu.Float(0.5)},
			Processes: []gpu.Process{
				{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5)}, // memory not reported
				{PID: 8, Name: "train", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.25), UsedMemoryBytes: gpu.Uint(2 << 30)},
			}}
	})
	want := `
# HELP vgpu_tenant_memory_used_bytes Device memory held by the tenant's processes on the GPU (or MIG instance); absent where the driver does not report it.
# TYPE vgpu_tenant_memory_used_bytes gauge
vgpu_tenant_memory_used_bytes{class="best-effort",gpu="0",gpu_instance="",tenant="batch",uuid="GPU-0"} 2.147483648e+09
# HELP vgpu_tenant_memory_byte_seconds_total Device memory held by the tenant integrated over time since the exporter started (divide by 2^30 for GiB-seconds), over the samples that know it; absent while no sample has known it.
# TYPE vgpu_tenant_memory_byte_seconds_total counter
vgpu_tenant_memory_byte_seconds_total{gpu="0",tenant="batch",uuid="GPU-0"} 2.147483648e+10
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_memory_used_bytes", "vgpu_tenant_memory_byte_seconds_total"); err != nil {
		t.Error(err)
	}
}

// A tenant's kernel-busy series vanished whenever the GPU was idle,
// though NVML answered that no process ran a kernel over the interval
// (gpu.Device.NoProcessSamples): it is served 0 then.
func TestTenantKernelBusyZeroWhileIdle(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n", func(energy float64) gpu.Device {
		d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 << 30, GPUUtil: gpu.Float(0.5),
			Processes: []gpu.Process{{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5), UsedMemoryBytes: gpu.Uint(1 << 30)}}}
		if energy > 0 { // the second sample: idle
			d.GPUUtil, d.Processes[0].SMUtil, d.NoProcessSamples = gpu.Float(0), nil, true
		}
		return d
	})
	want := `
# HELP vgpu_tenant_kernel_busy_ratio Fraction of the sample interval during which a kernel of the tenant ran on the GPU, however many SMs it filled (NVML process or vGPU utilization); tenants may add up to more than 1 under MPS.
# TYPE vgpu_tenant_kernel_busy_ratio gauge
vgpu_tenant_kernel_busy_ratio{class="best-effort",gpu="0",gpu_instance="",tenant="chat",uuid="GPU-0"} 0
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want), "vgpu_tenant_kernel_busy_ratio"); err != nil {
		t.Error(err)
	}
}

// The context switches a tenant was counted on a GPU were served, kept,
// after the GPU went to MIG mode, where the metric is absent (not counted
// per instance).
func TestTenantContextSwitchesAbsentOnMIG(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n", func(energy float64) gpu.Device {
		if energy == 0 { // the first sample: time-sliced
			return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, ContextSwitchesTotal: gpu.Uint(1000),
				Processes: []gpu.Process{{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5)}}}
		}
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, ContextSwitchesTotal: gpu.Uint(5000),
			MIG: []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}}}}
	})
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(""), "vgpu_tenant_context_switches_total"); err != nil {
		t.Error(err)
	}
}

// A process of a MIG GPU placed in no instance has memory and a process
// count only: it was served a figure_info of method measured, for
// figures nothing measured. Only the instance's tenant has one now.
func TestTenantFigureInfoNotForUnplacedMIGProcess(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n  - {name: batch, selectors: [{executable: train}]}\n", func(float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
			MIG: []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}}},
			Processes: []gpu.Process{
				{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(1 << 30)},
				{PID: 8, Name: "train", UID: -1, GPUInstanceID: -1, UsedMemoryBytes: gpu.Uint(1 << 30)}, // in no instance
			}}
	})
	want := `
# HELP vgpu_tenant_figure_info How the tenant's SM, DRAM and context-switch figures on the GPU (or MIG instance) are obtained: method measured (the counters of a MIG instance the tenant has alone) or apportioned (the GPU's, or a shared MIG instance's, counters split among its tenants); always 1.
# TYPE vgpu_tenant_figure_info gauge
vgpu_tenant_figure_info{class="best-effort",gpu="0",gpu_instance="1",method="measured",tenant="chat",uuid="GPU-0"} 1
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want), "vgpu_tenant_figure_info"); err != nil {
		t.Error(err)
	}
}

// While NVML refuses a process list (a MIG instance's, or a whole GPU's),
// its tenants of the sample before are carried forward: their figures
// were, but their vgpu_tenant_processes read 0 (MIG), or the tenant's
// series went and its activity to unassigned (whole GPU). Now a carried
// tenant keeps its process count as it keeps its split.
func TestTenantProcessesCarriedWhileListRefused(t *testing.T) {
	const tenants = "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n"
	for _, tc := range []struct {
		name string
		dev  func(refused bool) gpu.Device
		want string
	}{
		{"MIG instance", func(refused bool) gpu.Device {
			d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
				MIG: []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, MemoryTotalBytes: 40 << 30, MemoryUsedBytes: 2 << 30, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}}}}
			if refused {
				d.ProcessesUnread, d.MIG[0].ProcessesUnread = true, true
			} else {
				d.Processes = []gpu.Process{
					{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(1 << 30)},
					{PID: 8, Name: "vllm", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(1 << 30)},
				}
			}
			return d
		}, `vgpu_tenant_processes{class="best-effort",gpu="0",gpu_instance="1",tenant="chat",uuid="GPU-0"} 2`},
		{"whole GPU", func(refused bool) gpu.Device {
			d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 << 30,
				Activity: gpu.Activity{SMActive: gpu.Float(0.5)}}
			if refused {
				d.ProcessesUnread = true
			} else {
				d.Processes = []gpu.Process{
					{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5), UsedMemoryBytes: gpu.Uint(1 << 30)},
					{PID: 8, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.25), UsedMemoryBytes: gpu.Uint(1 << 30)},
				}
			}
			return d
		}, `vgpu_tenant_processes{class="best-effort",gpu="0",gpu_instance="",tenant="chat",uuid="GPU-0"} 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := meterTwoSamples(t, tenants, func(energy float64) gpu.Device { return tc.dev(energy > 0) })
			want := `
# HELP vgpu_tenant_processes The tenant's processes with a context on the GPU (or MIG instance).
# TYPE vgpu_tenant_processes gauge
` + tc.want + "\n"
			if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want), "vgpu_tenant_processes"); err != nil {
				t.Error(err)
			}
		})
	}
}

// A vGPU whose framebuffer use NVML did not give (nvmlVgpuInstanceGetFbUsage
// failed) was served as using none, and its tenant's memory as known: now
// both series are absent, not 0; its framebuffer size is still served.
func TestVGPUFramebufferUsedUnreadAbsent(t *testing.T) {
	snap := meterTwoSamples(t, "tenants:\n  - {name: vdi, selectors: [{vgpu: {vm_name: vdi-1}}]}\n", func(float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU, MemoryTotalBytes: 80 << 30,
			VGPUs: []gpu.VGPUInstance{{ID: 7, UUID: "vgpu-7", VMID: "vm-1", VMName: "vdi-1", Type: "H100-20C", FramebufferBytes: 20 << 30}}}
	})
	want := `
# HELP vgpu_vgpu_framebuffer_total_bytes Framebuffer (device memory) size of the vGPU instance.
# TYPE vgpu_vgpu_framebuffer_total_bytes gauge
vgpu_vgpu_framebuffer_total_bytes{gpu="0",uuid="GPU-0",vgpu_instance="7"} 2.147483648e+10
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant", "vgpu"), strings.NewReader(want),
		"vgpu_vgpu_framebuffer_total_bytes", "vgpu_vgpu_framebuffer_used_bytes", "vgpu_tenant_memory_used_bytes"); err != nil {
		t.Error(err)
	}
}
