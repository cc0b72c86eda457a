package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// migDevice is an H200 of 132 SMs in MIG mode at second sec, its energy
// counter at 100 J a second, with instances 1 (60 SMs) and 2 (32 SMs).
func migDevice(sec int64, act1, act2 float64, procs ...gpu.Process) *gpu.Readings {
	return &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 132,
		EnergyJoules: gpu.Float(100 * float64(sec)),
		MIG: []gpu.MIGInstance{
			{UUID: "MIG-1", GPUInstanceID: 1, SMCount: 60, MemoryUsedBytes: 30 * gib, Activity: gpu.Activity{SMActive: gpu.Float(act1), DRAMActive: gpu.Float(act1 / 2)}},
			{UUID: "MIG-2", GPUInstanceID: 2, SMCount: 32, MemoryUsedBytes: 1 * gib, Activity: gpu.Activity{SMActive: gpu.Float(act2), DRAMActive: gpu.Float(act2 / 2)}},
		},
		Processes: procs,
	}}}
}

func migProc(pid uint32, name string, gi int, mem uint64) gpu.Process {
	return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: gi, UsedMemoryBytes: gpu.Uint(mem)}
}

// usageIn returns the usages of instance gi by tenant.
func usageIn(s *Snapshot, gi string) map[string]Usage {
	out := map[string]Usage{}
	for _, u := range s.Usage {
		if u.GPUInstance == gi {
			out[u.Tenant] = u
		}
	}
	return out
}

// TestIdleMIGInstance: an instance without processes that no tenant's
// selector names is nobody's: it has no usage, holds nothing and its time
// and energy stay idle. One a selector names stays its tenant's, who
// holds it while it is idle (docs/metering.md).
func TestIdleMIGInstance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		yaml   string
		holder string // the tenant of instance 2, "" for none
	}{
		{"nobody's", `tenants:
  - name: chat
    selectors: [{executable: vllm}]
defaults: {idle_energy: reservation}
`, ""},
		{"named by a selector", `tenants:
  - name: chat
    selectors: [{executable: vllm}]
  - name: held
    selectors: [{gpu_instance: {gpu: 0, id: 2}}]
defaults: {idle_energy: reservation}
`, "held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, tc.yaml, BuilderOptions{})
			var s *Snapshot
			for sec := int64(100); sec <= 102; sec++ {
				s = b.Build(migDevice(sec, 0.7, 0, migProc(1, "vllm", 1, 20*gib)), gpu.SamplerStats{})
				got := usageIn(s, "2")
				switch {
				case tc.holder == "" && len(got) != 0:
					t.Fatalf("at %d s instance 2 has usage %+v, want none", sec, got)
				case tc.holder != "":
					u, ok := got[tc.holder]
					if !ok || len(got) != 1 || u.Method != Measured || u.Processes != 0 {
						t.Fatalf("at %d s instance 2 has usage %+v, want %s's alone, measured", sec, got, tc.holder)
					}
				}
			}
			reserved := map[string]float64{}
			for _, m := range s.Meters {
				reserved[m.Tenant] = m.GPUSecondsReserved
			}
			// three samples of 1 s metered; the energy of the last two
			// (200 J), what chat's activity does not account for split
			// by what the tenants hold, the rest idle
			want := map[string]float64{"chat": 3 * 60.0 / 132}
			unheld := 1 - 60.0/132
			if tc.holder != "" {
				want[tc.holder] = 3 * 32.0 / 132
				unheld = 1 - 92.0/132
			}
			idle := 200 * (1 - 0.7*60/132) * unheld
			if len(reserved) != len(want) {
				t.Errorf("meters %+v, want %v", s.Meters, want)
			}
			for tn, w := range want {
				if !near(reserved[tn], w) {
					t.Errorf("%s reserved %v s, want %v", tn, reserved[tn], w)
				}
			}
			if len(s.GPUMeters) != 1 {
				t.Fatalf("GPU meters %+v", s.GPUMeters)
			}
			checkConserved(t, s.Meters, s.GPUMeters)
			if g := s.GPUMeters[0]; !near(g.IdleEnergyJoules, idle) {
				t.Errorf("idle energy %v J, want %v", g.IdleEnergyJoules, idle)
			}
		})
	}
}

// TestIdleMIGInstanceActive: activity on an instance that no process of
// either sample ran (a process that came and went between two samples)
// has no tenant to go to: unassigned.
func TestIdleMIGInstanceActive(t *testing.T) {
	b := mustBuilder(t, "tenants:\n  - name: chat\n    selectors: [{executable: vllm}]\n", BuilderOptions{})
	s := b.Build(migDevice(100, 0.7, 0.4, migProc(1, "vllm", 1, 20*gib)), gpu.SamplerStats{})
	got := usageIn(s, "2")
	u, ok := got[Unassigned]
	if !ok || len(got) != 1 {
		t.Fatalf("instance 2: %+v, want unassigned alone", got)
	}
	checkF(t, "unassigned SM", u.SMActive, 0.4)
}

// TestMIGTenantLeaves: the figures of a MIG instance cover the interval
// since the previous sample, so a tenant whose processes left in it
// keeps its part of that interval, and a tenant is measured only when it
// was alone in the instance over the whole interval.
func TestMIGTenantLeaves(t *testing.T) {
	const yaml = `tenants:
  - name: a
    selectors: [{executable: vllm}]
  - name: b
    selectors: [{executable: python3}]
`
	type want struct {
		sm      float64
		method  Method
		procs   int
		present bool
	}
	for _, tc := range []struct {
		name  string
		steps [][]gpu.Process // instance 1's processes at 100 s, 101 s, ...
		// the usages of instance 1 at the last step
		want map[string]want
	}{
		{
			// a 30 GiB throughout, b 20 GiB until it leaves: split by the
			// memory each held over the interval, the mean of its two
			// ends (b: 10, a: 30)
			"one of two leaves",
			[][]gpu.Process{
				{migProc(1, "vllm", 1, 30*gib), migProc(2, "python3", 1, 20*gib)},
				{migProc(1, "vllm", 1, 30*gib)},
			},
			map[string]want{"a": {0.7 * 0.75, Apportioned, 1, true}, "b": {0.7 * 0.25, Apportioned, 0, true}},
		},
		{
			"one of two left an interval ago",
			[][]gpu.Process{
				{migProc(1, "vllm", 1, 30*gib), migProc(2, "python3", 1, 20*gib)},
				{migProc(1, "vllm", 1, 30*gib)},
				{migProc(1, "vllm", 1, 30*gib)},
			},
			map[string]want{"a": {0.7, Measured, 1, true}},
		},
		{
			// the instance's counters over the interval are a's alone
			"the last one leaves",
			[][]gpu.Process{
				{migProc(1, "vllm", 1, 30*gib)},
				nil,
			},
			map[string]want{"a": {0.7, Measured, 0, true}},
		},
		{
			"the last one left an interval ago",
			[][]gpu.Process{
				{migProc(1, "vllm", 1, 30*gib)},
				nil,
				nil,
			},
			map[string]want{},
		},
		{
			// b replaced a within one interval: both ran in it
			"one leaves, another comes",
			[][]gpu.Process{
				{migProc(1, "vllm", 1, 30*gib)},
				{migProc(2, "python3", 1, 10*gib)},
			},
			map[string]want{"a": {0.7 * 0.75, Apportioned, 0, true}, "b": {0.7 * 0.25, Apportioned, 1, true}},
		},
		{
			"one joins an empty instance",
			[][]gpu.Process{
				nil,
				{migProc(1, "vllm", 1, 30*gib)},
			},
			map[string]want{"a": {0.7, Measured, 1, true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, yaml, BuilderOptions{})
			var s *Snapshot
			for i, procs := range tc.steps {
				// instance 1 is active in an interval a process of
				// either end ran in; nothing runs in 2
				act := 0.0
				if len(procs) > 0 || i > 0 && len(tc.steps[i-1]) > 0 {
					act = 0.7
				}
				s = b.Build(migDevice(100+int64(i), act, 0, procs...), gpu.SamplerStats{})
			}
			got := usageIn(s, "1")
			if len(got) != len(tc.want) {
				t.Errorf("instance 1: %+v, want %v", got, tc.want)
			}
			for tn, w := range tc.want {
				u, ok := got[tn]
				if !ok {
					t.Errorf("no usage of %s", tn)
					continue
				}
				checkF(t, tn+" SM", u.SMActive, w.sm)
				if u.Method != w.method || u.Processes != w.procs {
					t.Errorf("%s: method %s, %d processes; want %s, %d", tn, u.Method, u.Processes, w.method, w.procs)
				}
			}
			for _, m := range s.Meters {
				if m.Tenant == Unassigned {
					t.Errorf("unassigned metered: %+v", m)
				}
			}
			checkConserved(t, s.Meters, s.GPUMeters)
		})
	}
}

// tsDevice is a time-sliced (or MPS) GPU at second sec with SM active sm
// and DRAM active dram, running procs.
func tsDevice(mode gpu.SharingMode, sec int64, sm, dram float64, procs ...gpu.Process) *gpu.Readings {
	return &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: mode,
		Activity:             gpu.Activity{SMActive: gpu.Float(sm), DRAMActive: gpu.Float(dram)},
		ContextSwitchesTotal: gpu.Uint(uint64(1000 * sec)),
		EnergyJoules:         gpu.Float(100 * float64(sec)),
		Processes:            procs,
	}}}
}

func tsProc(pid uint32, name string, busy, memBusy float64, mps bool) gpu.Process {
	p := gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(busy), MemUtil: gpu.Float(memBusy), UsedMemoryBytes: gpu.Uint(gib)}
	if mps {
		p.Type, p.MPSActiveThreads = gpu.ProcessMPS, gpu.Float(1)
	}
	return p
}

// TestSharedTenantLeaves: on a whole GPU, when a process leaves between
// two samples, the readings have no figure of its part of the interval;
// the tenants still there get at most what their own samples allow (an
// SM share no larger than their kernel-busy time, a DRAM share no larger
// than their memory-busy time) and the rest goes to unassigned.
func TestSharedTenantLeaves(t *testing.T) {
	const yaml = `tenants:
  - name: a
    selectors: [{executable: vllm}]
  - name: b
    selectors: [{executable: python3}]
`
	for _, mode := range []gpu.SharingMode{gpu.SharingTimeSlice, gpu.SharingMPS} {
		t.Run(string(mode), func(t *testing.T) {
			mps := mode == gpu.SharingMPS
			b := mustBuilder(t, yaml, BuilderOptions{})
			// a and b share the GPU; b leaves after the first sample
			b.Build(tsDevice(mode, 100, 0.93, 0.5, tsProc(1, "vllm", 0.37, 0.2, mps), tsProc(2, "python3", 0.56, 0.3, mps)), gpu.SamplerStats{})
			s := b.Build(tsDevice(mode, 101, 0.924, 0.5, tsProc(1, "vllm", 0.374, 0.2, mps)), gpu.SamplerStats{})
			a, un := usageOf(t, s, "a", ""), usageOf(t, s, Unassigned, "")
			checkF(t, "a kernel busy", a.KernelBusy, 0.374)
			checkF(t, "a SM", a.SMActive, 0.374)
			checkF(t, "a DRAM", a.DRAMActive, 0.2)
			checkF(t, "unassigned SM", un.SMActive, 0.924-0.374)
			checkF(t, "unassigned DRAM", un.DRAMActive, 0.5-0.2)
			if un.Processes != 0 || len(s.Usage) != 2 {
				t.Errorf("usage %+v", s.Usage)
			}
			// the context switches follow the SM split
			checkF(t, "a context switches", a.ContextSwitchesTotal, 1000*0.374/0.924)
			checkConserved(t, s.Meters, s.GPUMeters)
			// the next interval is a's alone: the whole figure
			s = b.Build(tsDevice(mode, 102, 0.63, 0.4, tsProc(1, "vllm", 0.63, 0.3, mps)), gpu.SamplerStats{})
			checkF(t, "a SM after", usageOf(t, s, "a", "").SMActive, 0.63)
			if len(s.Usage) != 1 {
				t.Errorf("usage after %+v", s.Usage)
			}
		})
	}
}

// TestUnplacedMIGProcessHasNoMethod: a process of a MIG GPU the readings
// place in no instance has a usage with its memory only; it was given the
// method measured, for figures nothing measured. It has none now (no
// vgpu_tenant_figure_info).
func TestUnplacedMIGProcessHasNoMethod(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	s := b.Build(migDevice(100, 0.7, 0, migProc(1, "vllm", -1, 2*gib)), gpu.SamplerStats{})
	u := usageOf(t, s, "chat", "")
	if u.Method != "" || u.SMActive != nil || u.DRAMActive != nil || u.MemoryUsedBytes != 2*gib {
		t.Errorf("unplaced process: method %q, SM %v, DRAM %v, memory %d; want no method nor figure, 2 GiB", u.Method, u.SMActive, u.DRAMActive, u.MemoryUsedBytes)
	}
}
