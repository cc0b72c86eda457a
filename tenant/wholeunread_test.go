package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// wholeDevice is a time-sliced GPU at second sec, its energy counter at
// 100 J a second, with SM activity sm and processes procs.
func wholeDevice(sec int64, sm float64, procs ...gpu.Process) *gpu.Readings {
	return &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 * gib,
		EnergyJoules: gpu.Float(100 * float64(sec)), Activity: gpu.Activity{SMActive: gpu.Float(sm)}, Processes: procs,
	}}}
}

// wholeProc is a process of a whole GPU with a kernel-busy sample.
func wholeProc(pid uint32, name string, busy float64, mem uint64) gpu.Process {
	return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(busy), UsedMemoryBytes: gpu.Uint(mem)}
}

// refused is r with its GPU's process list refused (no process read).
func refused(r *gpu.Readings) *gpu.Readings {
	r.Devices[0].Processes, r.Devices[0].ProcessesUnread = nil, true
	return r
}

// TestWholeGPUListRefusedCarriesHolders: while NVML refuses a whole GPU's
// process list (gpu.Device.ProcessesUnread), who runs there is not known
// and its tenants are not known to have left. Its activity, and the
// energy it splits, went to unassigned as if the GPU had emptied: now,
// as on a MIG instance, the tenants of the sample before are carried
// forward with their split and their processes, their memory not known,
// apportioned; only a GPU nobody held gives it to unassigned.
func TestWholeGPUListRefusedCarriesHolders(t *testing.T) {
	type fig struct {
		sm    float64
		procs int
	}
	cases := []struct {
		name   string
		before []gpu.Process // the GPU's processes in the sample before
		want   map[string]fig
	}{
		{"one tenant", []gpu.Process{wholeProc(1, "vllm", 0.4, 20*gib)}, map[string]fig{"chat": {0.6, 1}}},
		{"two tenants", []gpu.Process{wholeProc(1, "vllm", 0.4, 20*gib), wholeProc(2, "train", 0.2, 10*gib), wholeProc(3, "train", 0, 10*gib)},
			map[string]fig{"chat": {0.4, 1}, "batch": {0.2, 2}}},
		{"nobody", nil, map[string]fig{Unassigned: {0.6, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			b.Build(wholeDevice(100, 0.6, tc.before...), gpu.SamplerStats{})
			var s *Snapshot
			for sec := int64(101); sec <= 103; sec++ { // three samples refused
				s = b.Build(refused(wholeDevice(sec, 0.6)), gpu.SamplerStats{})
			}
			got := usageIn(s, "")
			if len(got) != len(tc.want) {
				t.Errorf("usage %+v, want tenants %v", got, tc.want)
			}
			for tn, w := range tc.want {
				u, ok := got[tn]
				if !ok {
					t.Errorf("%s: no usage", tn)
					continue
				}
				checkF(t, tn+" SM", u.SMActive, w.sm)
				if u.Method != Apportioned || u.Processes != w.procs || u.MemoryUnknown != (tn != Unassigned) || u.KernelBusy != nil {
					t.Errorf("%s: method %q, %d processes, memory unknown %v, kernel-busy %v; want apportioned, %d, %v, none",
						tn, u.Method, u.Processes, u.MemoryUnknown, u.KernelBusy, w.procs, tn != Unassigned)
				}
			}
			if tc.before != nil {
				if m := meterOf(s, Unassigned); m != nil && m.EnergyJoules > 0 {
					t.Errorf("unassigned charged %v J of the refused samples", m.EnergyJoules)
				}
			}
		})
	}
}

// TestWholeGPUListReadAgain: once the list is read again, a carried
// tenant that is not in it has left during the interval: the one still
// there gets no more than its own sample allows, the rest is unassigned's
// (it got the whole GPU's activity, the tenant's that left included).
func TestWholeGPUListReadAgain(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(wholeDevice(100, 0.6, wholeProc(1, "vllm", 0.4, 20*gib), wholeProc(2, "train", 0.2, 10*gib)), gpu.SamplerStats{})
	b.Build(refused(wholeDevice(101, 0.6)), gpu.SamplerStats{})
	s := b.Build(wholeDevice(102, 0.6, wholeProc(2, "train", 0.2, 10*gib)), gpu.SamplerStats{})
	got := usageIn(s, "")
	if _, ok := got["chat"]; ok {
		t.Errorf("chat, gone, has usage: %+v", got)
	}
	checkF(t, "batch SM", got["batch"].SMActive, 0.2)
	checkF(t, "unassigned SM", got[Unassigned].SMActive, 0.4)
}
