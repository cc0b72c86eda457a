package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestWholeGPUSplitNotByUnknownMemory: without a busy sample a whole
// GPU's activity was split by used memory with a memory the driver did
// not report (a process's, a vGPU's framebuffer) read as none: its tenant
// got no share and the others all of it. Now, as on a MIG instance, an
// unknown is not weighted as none: where any tenant's memory is not
// known the split falls back to the number of processes.
func TestWholeGPUSplitNotByUnknownMemory(t *testing.T) {
	proc := func(pid uint32, name string, mem *uint64) gpu.Process {
		return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: -1, UsedMemoryBytes: mem}
	}
	cases := []struct {
		name  string
		procs []gpu.Process
		want  map[string]float64 // SM active
	}{
		{"all known: by memory", []gpu.Process{proc(1, "vllm", gpu.Uint(30*gib)), proc(2, "train", gpu.Uint(10*gib))},
			map[string]float64{"chat": 0.45, "batch": 0.15}},
		{"one tenant's unknown", []gpu.Process{proc(1, "vllm", gpu.Uint(20*gib)), proc(2, "train", nil)},
			map[string]float64{"chat": 0.3, "batch": 0.3}},
		{"one of a tenant's two unknown", []gpu.Process{proc(1, "vllm", gpu.Uint(10*gib)), proc(2, "vllm", nil), proc(3, "train", gpu.Uint(30*gib))},
			map[string]float64{"chat": 0.4, "batch": 0.2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			s := b.Build(&gpu.Readings{Time: time.Unix(100, 0), Interval: time.Second, Devices: []gpu.Device{{
				Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 * gib,
				Activity: gpu.Activity{SMActive: gpu.Float(0.6)}, Processes: tc.procs,
			}}}, gpu.SamplerStats{})
			for tn, sm := range tc.want {
				u := usageOf(t, s, tn, "")
				checkF(t, tn+" SM", u.SMActive, sm)
			}
		})
	}
}
