package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestKernelBusyKnownZeroServed: where the backend read the per-process
// utilization without a sample over the interval while the GPU's own
// utilization read 0 (gpu.Device.NoProcessSamples), no process ran a
// kernel: a tenant with a process or VM on the GPU has kernel-busy time 0,
// known, which was left nil (a series gone while the GPU is idle, back
// with the next kernel). Without that answer it stays unknown; a tenant
// with no context there (the activity of processes gone) has none.
func TestKernelBusyKnownZeroServed(t *testing.T) {
	dev := func(noSamples bool) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, GPUUtil: gpu.Float(0),
			NoProcessSamples: noSamples, Processes: []gpu.Process{{PID: 1, Name: "vllm", UID: -1, GPUInstanceID: -1}}}
	}
	vm := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU, GPUUtil: gpu.Float(0), NoProcessSamples: true,
		VGPUs: []gpu.VGPUInstance{{ID: 7, UUID: "vgpu-7", VMName: "vm"}}}
	gone := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, GPUUtil: gpu.Float(0), NoProcessSamples: true,
		Activity: gpu.Activity{SMActive: gpu.Float(0.1)}}
	cases := []struct {
		name   string
		dev    gpu.Device
		tenant string
		want   *float64
	}{
		{"no process sample, GPU idle", dev(true), "chat", gpu.Float(0)},
		{"no answer", dev(false), "chat", nil},
		{"a VM, no sample, GPU idle", vm, Unassigned, gpu.Float(0)},
		{"no context on the GPU", gone, Unassigned, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			s := b.Build(&gpu.Readings{Time: time.Unix(100, 0), Interval: time.Second, Devices: []gpu.Device{tc.dev}}, gpu.SamplerStats{})
			got := usageOf(t, s, tc.tenant, "").KernelBusy
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("kernel busy %v, want none", *got)
			case tc.want != nil:
				checkF(t, "kernel busy", got, *tc.want)
			}
		})
	}
}
