package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

const memTenants = `tenants:
  - name: chat
    selectors: [{executable: vllm}]
  - name: batch
    selectors: [{executable: train}]
`

// TestTenantMemoryKnownOnlyFromASource: a tenant's memory is known only
// where a figure gives it: its processes' used memory, all reported; a
// vGPU's framebuffer used, read; the MIG instance's own used memory where
// the tenant has the instance alone. A process whose memory the driver
// does not report (NVML's "not available"), or a vGPU whose framebuffer
// use NVML did not give, leaves it unknown, not 0.
func TestTenantMemoryKnownOnlyFromASource(t *testing.T) {
	proc := func(pid uint32, name string, gi int, mem *uint64) gpu.Process {
		return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: gi, SMUtil: gpu.Float(0.2), UsedMemoryBytes: mem}
	}
	whole := func(procs ...gpu.Process) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 * gib, MemoryUsedBytes: 30 * gib,
			Activity: gpu.Activity{SMActive: gpu.Float(0.4)}, Processes: procs}
	}
	mig := func(instTotal uint64, procs ...gpu.Process) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
			MIG:       []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, MemoryTotalBytes: instTotal, MemoryUsedBytes: 25 * gib, Activity: gpu.Activity{SMActive: gpu.Float(0.8)}}},
			Processes: procs}
	}
	type want struct {
		mem     uint64
		unknown bool
	}
	cases := []struct {
		name string
		dev  gpu.Device
		gi   string
		want map[string]want
	}{
		{"process memory reported", whole(proc(1, "vllm", -1, gpu.Uint(20*gib))), "", map[string]want{"chat": {20 * gib, false}}},
		{"process memory not reported", whole(proc(1, "vllm", -1, nil), proc(2, "train", -1, gpu.Uint(2*gib))), "",
			map[string]want{"chat": {0, true}, "batch": {2 * gib, false}}},
		{"one of two processes not reported", whole(proc(1, "vllm", -1, gpu.Uint(20*gib)), proc(2, "vllm", -1, nil)), "", map[string]want{"chat": {20 * gib, true}}},
		{"vGPU framebuffer", gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU, MemoryTotalBytes: 80 * gib,
			VGPUs: []gpu.VGPUInstance{{ID: 7, UUID: "vgpu-7", VMName: "vm", FramebufferBytes: 20 * gib, FramebufferUsed: gpu.Uint(12 * gib)}}}, "",
			map[string]want{Unassigned: {12 * gib, false}}},
		{"vGPU framebuffer used not read", gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU, MemoryTotalBytes: 80 * gib,
			VGPUs: []gpu.VGPUInstance{{ID: 7, UUID: "vgpu-7", VMName: "vm", FramebufferBytes: 20 * gib}}}, "",
			map[string]want{Unassigned: {0, true}}},
		{"MIG instance alone: the instance's memory", mig(40*gib, proc(1, "vllm", 1, nil)), "1", map[string]want{"chat": {25 * gib, false}}},
		{"MIG instance alone, its memory unread", mig(0, proc(1, "vllm", 1, nil)), "1", map[string]want{"chat": {0, true}}},
		{"MIG instance shared", mig(40*gib, proc(1, "vllm", 1, gpu.Uint(20*gib)), proc(2, "train", 1, nil)), "1",
			map[string]want{"chat": {20 * gib, false}, "batch": {0, true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			s := b.Build(&gpu.Readings{Time: time.Unix(100, 0), Interval: time.Second, Devices: []gpu.Device{tc.dev}}, gpu.SamplerStats{})
			for tn, w := range tc.want {
				u := usageOf(t, s, tn, tc.gi)
				if u.MemoryUsedBytes != w.mem || u.MemoryUnknown != w.unknown {
					t.Errorf("%s: memory %d unknown %v, want %d unknown %v", tn, u.MemoryUsedBytes, u.MemoryUnknown, w.mem, w.unknown)
				}
			}
		})
	}
}

// TestMIGSplitNotByUnknownMemory: two tenants share a MIG instance, one's
// process memory not reported. Its unknown is not weighted as none (which
// gave the other all of the instance's activity): the split falls back to
// the number of processes each had.
func TestMIGSplitNotByUnknownMemory(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	r := migDevice(100, 0.8, 0, migProc(1, "vllm", 1, 20*gib), gpu.Process{PID: 2, Name: "train", UID: -1, GPUInstanceID: 1})
	s := b.Build(r, gpu.SamplerStats{})
	got := usageIn(s, "1")
	checkF(t, "chat SM", got["chat"].SMActive, 0.4)
	checkF(t, "batch SM", got["batch"].SMActive, 0.4)
}

// TestMemoryByteSecondsUnknown: the memory byte-seconds of a tenant whose
// memory no sample has known are unknown (not 0), as its energy is where
// its activity is; once a sample knows it, it is known, and samples that
// do not add nothing.
func TestMemoryByteSecondsUnknown(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	dev := func(sec int64, mem *uint64) *gpu.Readings {
		return &gpu.Readings{Time: time.Unix(sec, 0), Interval: 10 * time.Second, Devices: []gpu.Device{{
			Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 * gib, MemoryUsedBytes: 30 * gib,
			Activity:  gpu.Activity{SMActive: gpu.Float(0.4)},
			Processes: []gpu.Process{{PID: 1, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.4), UsedMemoryBytes: mem}},
		}}}
	}
	steps := []struct {
		mem     *uint64
		want    float64
		unknown bool
	}{
		{nil, 0, true},
		{nil, 0, true},
		{gpu.Uint(gib), 10 * float64(gib), false},
		{nil, 10 * float64(gib), false},
		{gpu.Uint(2 * gib), 30 * float64(gib), false},
	}
	for i, st := range steps {
		s := b.Build(dev(int64(100+10*i), st.mem), gpu.SamplerStats{})
		m := meterOf(s, "chat")
		if m.MemoryByteSeconds != st.want || m.MemoryUnknown != st.unknown {
			t.Errorf("sample %d: byte-seconds %v unknown %v, want %v unknown %v", i, m.MemoryByteSeconds, m.MemoryUnknown, st.want, st.unknown)
		}
	}
}
