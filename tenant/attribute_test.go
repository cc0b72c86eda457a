package tenant

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

const gib = uint64(1 << 30)

func mustBuilder(t testing.TB, yaml string, opts BuilderOptions) *Builder {
	t.Helper()
	var cfg *Config
	if yaml != "" {
		var err error
		cfg, err = ParseConfig("t.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
	}
	if opts.Clock == nil {
		opts.Clock = gpu.NewManualClock(time.Unix(0, 0))
	}
	b, err := NewBuilder(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func usageOf(t *testing.T, s *Snapshot, tenant, gi string) Usage {
	t.Helper()
	for _, u := range s.Usage {
		if u.Tenant == tenant && u.GPUInstance == gi {
			return u
		}
	}
	t.Fatalf("no usage for %q/%q in %+v", tenant, gi, s.Usage)
	return Usage{}
}

func checkF(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || !near(*got, want) {
		if got == nil {
			t.Errorf("%s = nil, want %v", what, want)
		} else {
			t.Errorf("%s = %v, want %v", what, *got, want)
		}
	}
}

const sharedTenants = `tenants:
  - name: chat
    class: latency
    selectors: [{executable: vllm}]
  - name: train
    class: batch
    selectors: [{uid: 1002}]
`

func sharedReadings(mode gpu.SharingMode, cs uint64) *gpu.Readings {
	return &gpu.Readings{Time: time.Unix(10, 0), Interval: time.Second, Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: mode,
		Activity:             gpu.Activity{SMActive: gpu.Float(0.85), DRAMActive: gpu.Float(0.5)},
		ContextSwitchesTotal: gpu.Uint(cs),
		Processes: []gpu.Process{
			{PID: 1, Name: "vllm", UID: 1000, GPUInstanceID: -1, SMUtil: gpu.Float(0.30), MemUtil: gpu.Float(0.20), UsedMemoryBytes: gpu.Uint(10 * gib)},
			{PID: 2, Name: "/usr/bin/vllm", UID: 1000, GPUInstanceID: -1, SMUtil: gpu.Float(0.15), MemUtil: gpu.Float(0.10), UsedMemoryBytes: gpu.Uint(6 * gib)},
			{PID: 3, Name: "python3", UID: 1002, GPUInstanceID: -1, SMUtil: gpu.Float(0.35), MemUtil: gpu.Float(0.60), UsedMemoryBytes: gpu.Uint(30 * gib)},
			{PID: 4, Name: "nvidia-smi", UID: 0, GPUInstanceID: -1, UsedMemoryBytes: gpu.Uint(1 * gib)},
		},
	}}}
}

// mpsReadings is sharedReadings on an MPS GPU whose vllm clients were
// started with half of the SMs as their active-thread fraction.
func mpsReadings(cs uint64) *gpu.Readings {
	r := sharedReadings(gpu.SharingMPS, cs)
	for i := range r.Devices[0].Processes {
		p := &r.Devices[0].Processes[i]
		p.Type, p.MPSActiveThreads = gpu.ProcessMPS, gpu.Float(1)
		if p.PID <= 2 {
			p.MPSActiveThreads = gpu.Float(0.5)
		}
	}
	return r
}

// TestTwoTenantsTimeSliced: chat (two vllm processes) and train (one
// python process) share GPU 0 by time-slicing or MPS. The device figures
// are split by busy time (on MPS weighted by the active-thread fraction),
// and the tenants add up to the device.
func TestTwoTenantsTimeSliced(t *testing.T) {
	for _, tc := range []struct {
		mode     gpu.SharingMode
		readings func(cs uint64) *gpu.Readings
		// SM weights of chat and train: kernel-busy time x threads
		chatW, trainW float64
		// DRAM weights: memory-busy time x threads
		chatM, trainM float64
		// reservations of chat (two clients at 0.5), train and
		// unassigned (one client at 1 each); nil without MPS
		reserve []*float64
	}{
		{gpu.SharingTimeSlice, func(cs uint64) *gpu.Readings { return sharedReadings(gpu.SharingTimeSlice, cs) }, 0.45, 0.35, 0.30, 0.60, []*float64{nil, nil, nil}},
		{gpu.SharingMPS, mpsReadings, 0.45 * 0.5, 0.35, 0.30 * 0.5, 0.60, []*float64{gpu.Float(1), gpu.Float(1), gpu.Float(1)}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			smW, memW := tc.chatW+tc.trainW, tc.chatM+tc.trainM
			b := mustBuilder(t, sharedTenants, BuilderOptions{})
			s := b.Build(tc.readings(1000), gpu.SamplerStats{})
			if len(s.Usage) != 3 || s.Usage[0].Tenant != "chat" || s.Usage[1].Tenant != "train" || s.Usage[2].Tenant != Unassigned {
				t.Fatalf("usage entries %+v", s.Usage)
			}
			chat, train, un := s.Usage[0], s.Usage[1], s.Usage[2]
			for i, u := range s.Usage {
				if w := tc.reserve[i]; w == nil {
					if u.Reservation != nil {
						t.Errorf("%s reservation %g, want none", u.Tenant, *u.Reservation)
					}
				} else {
					checkF(t, u.Tenant+" reservation", u.Reservation, *w)
				}
			}
			// kernel busy: per-process samples summed
			checkF(t, "chat busy", chat.KernelBusy, 0.45)
			checkF(t, "train busy", train.KernelBusy, 0.35)
			if un.KernelBusy != nil {
				t.Errorf("unassigned busy = %v without a sample", *un.KernelBusy)
			}
			// SM: device 0.85 split by the SM weights
			checkF(t, "chat SM", chat.SMActive, 0.85*tc.chatW/smW)
			checkF(t, "train SM", train.SMActive, 0.85*tc.trainW/smW)
			checkF(t, "unassigned SM", un.SMActive, 0)
			// DRAM: device 0.5 split by the memory weights
			checkF(t, "chat DRAM", chat.DRAMActive, 0.5*tc.chatM/memW)
			checkF(t, "train DRAM", train.DRAMActive, 0.5*tc.trainM/memW)
			checkF(t, "unassigned DRAM", un.DRAMActive, 0)
			for _, u := range s.Usage {
				if u.Method != Apportioned {
					t.Errorf("%s: method %q", u.Tenant, u.Method)
				}
			}
			if chat.MemoryUsedBytes != 16*gib || train.MemoryUsedBytes != 30*gib || un.MemoryUsedBytes != gib {
				t.Errorf("memory %d %d %d", chat.MemoryUsedBytes, train.MemoryUsedBytes, un.MemoryUsedBytes)
			}
			if chat.Processes != 2 || len(chat.PIDs) != 2 || chat.PIDs[0] != 1 || train.Processes != 1 || chat.Class != gpu.ClassLatency || train.Class != gpu.ClassBatch {
				t.Errorf("chat %+v train %+v", chat, train)
			}
			// context switches: first sample is the baseline
			checkF(t, "chat cs", chat.ContextSwitchesTotal, 0)
			// +600 split by the SM weights
			s = b.Build(tc.readings(1600), gpu.SamplerStats{})
			checkF(t, "chat cs", usageOf(t, s, "chat", "").ContextSwitchesTotal, 600*tc.chatW/smW)
			checkF(t, "train cs", usageOf(t, s, "train", "").ContextSwitchesTotal, 600*tc.trainW/smW)
			checkF(t, "unassigned cs", usageOf(t, s, Unassigned, "").ContextSwitchesTotal, 0)
			// the device counter resets (driver reload): per-tenant counters
			// keep growing by the new value
			s = b.Build(tc.readings(80), gpu.SamplerStats{})
			checkF(t, "chat cs after reset", usageOf(t, s, "chat", "").ContextSwitchesTotal, 680*tc.chatW/smW)
			checkF(t, "train cs after reset", usageOf(t, s, "train", "").ContextSwitchesTotal, 680*tc.trainW/smW)
		})
	}
}

// TestExclusiveSingleTenant: a tenant alone on a GPU gets the device's
// figures, by the same rule (and method) as when it shares the GPU.
func TestExclusiveSingleTenant(t *testing.T) {
	b := mustBuilder(t, sharedTenants, BuilderOptions{})
	r := sharedReadings(gpu.SharingExclusive, 5)
	r.Devices[0].Processes = r.Devices[0].Processes[:2] // only chat
	s := b.Build(r, gpu.SamplerStats{})
	if len(s.Usage) != 1 {
		t.Fatalf("usage %+v", s.Usage)
	}
	u := s.Usage[0]
	checkF(t, "SM", u.SMActive, 0.85) // the device's own GPM figure
	checkF(t, "DRAM", u.DRAMActive, 0.5)
	checkF(t, "busy", u.KernelBusy, 0.45)
	if u.Method != Apportioned {
		t.Errorf("method %q", u.Method)
	}
}

func TestMIGUsage(t *testing.T) {
	const yaml = `tenants:
  - name: a
    selectors: [{mig_uuid: MIG-1}]
  - name: b
    selectors: [{gpu_instance: {gpu: 0, id: 2}}]
  - name: c
    selectors: [{executable: trainer}]
`
	b := mustBuilder(t, yaml, BuilderOptions{})
	r := &gpu.Readings{Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		ContextSwitchesTotal: gpu.Uint(10),
		MIG: []gpu.MIGInstance{
			{UUID: "MIG-1", GPUInstanceID: 1, MemoryUsedBytes: 5 * gib, Activity: gpu.Activity{SMActive: gpu.Float(0.7), DRAMActive: gpu.Float(0.4)}},
			{UUID: "MIG-2", GPUInstanceID: 2, MemoryUsedBytes: 9 * gib, Activity: gpu.Activity{SMActive: gpu.Float(0.2), DRAMActive: gpu.Float(0.1)}},
			{UUID: "MIG-3", GPUInstanceID: 3, Activity: gpu.Activity{SMActive: gpu.Float(0.6), DRAMActive: gpu.Float(0.3)}},
			{UUID: "MIG-4", GPUInstanceID: 4, Activity: gpu.Activity{SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.5)}},
		},
		Processes: []gpu.Process{
			{PID: 1, Name: "server", GPUInstanceID: 1, UID: -1, UsedMemoryBytes: gpu.Uint(4 * gib)},
			{PID: 3, Name: "trainer", GPUInstanceID: 3, UID: -1, UsedMemoryBytes: gpu.Uint(2 * gib)},
			{PID: 4, Name: "trainer", GPUInstanceID: 4, UID: -1, UsedMemoryBytes: gpu.Uint(3 * gib)},
			{PID: 5, Name: "other", GPUInstanceID: 4, UID: -1, UsedMemoryBytes: gpu.Uint(1 * gib)},
		},
	}}}
	s := b.Build(r, gpu.SamplerStats{})
	ua := usageOf(t, s, "a", "1")
	checkF(t, "a SM", ua.SMActive, 0.7)
	checkF(t, "a DRAM", ua.DRAMActive, 0.4)
	if ua.Method != Measured || ua.KernelBusy != nil || ua.MemoryUsedBytes != 4*gib || ua.Processes != 1 || ua.ContextSwitchesTotal != nil {
		t.Errorf("a %+v", ua)
	}
	ub := usageOf(t, s, "b", "2") // no processes: the instance's own memory
	checkF(t, "b SM", ub.SMActive, 0.2)
	if ub.MemoryUsedBytes != 9*gib || ub.Processes != 0 {
		t.Errorf("b %+v", ub)
	}
	uc := usageOf(t, s, "c", "3") // by its process
	checkF(t, "c SM", uc.SMActive, 0.6)
	// instance 4 holds c (3 GiB) and an unassigned process (1 GiB):
	// apportioned by used memory
	uc4, un4 := usageOf(t, s, "c", "4"), usageOf(t, s, Unassigned, "4")
	checkF(t, "c SM in 4", uc4.SMActive, 0.5*0.75)
	checkF(t, "unassigned SM in 4", un4.SMActive, 0.5*0.25)
	if uc4.Method != Apportioned || un4.Method != Apportioned || uc.Method != Measured {
		t.Errorf("methods %+v %+v", uc4, un4)
	}
	if len(s.Usage) != 5 {
		t.Errorf("usage %+v", s.Usage)
	}
	for i := 1; i < len(s.Usage); i++ {
		if s.Usage[i-1].GPUInstance > s.Usage[i].GPUInstance {
			t.Errorf("not sorted: %+v", s.Usage)
		}
	}
}

func TestVGPUUsage(t *testing.T) {
	cfg, err := LoadConfig("testdata/tenants-vgpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilder(cfg, BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU, MemoryTotalBytes: 80 * gib,
		Activity: gpu.Activity{SMActive: gpu.Float(0.8), DRAMActive: gpu.Float(0.6)},
		// profiles of 10, 10, 40 GiB and one whose framebuffer is unknown
		VGPUs: []gpu.VGPUInstance{
			{ID: 1, UUID: "a", VMName: "vdi-1", HostPID: 4002, SMUtil: gpu.Float(0.2), MemUtil: gpu.Float(0.1), FramebufferUsed: gpu.Uint(2 * gib), FramebufferBytes: 10 * gib},
			{ID: 2, UUID: "b", VMName: "vdi-2", HostPID: 4001, SMUtil: gpu.Float(0.1), MemUtil: gpu.Float(0.1), FramebufferUsed: gpu.Uint(1 * gib), FramebufferBytes: 10 * gib},
			{ID: 3, UUID: "7f3c1a52-0000-4000-8000-000000000001", VMName: "llm", SMUtil: gpu.Float(0.5), MemUtil: gpu.Float(0.4), FramebufferUsed: gpu.Uint(8 * gib), FramebufferBytes: 40 * gib},
			{ID: 4, UUID: "d", VMName: "misc", SMUtil: gpu.Float(0.05), FramebufferUsed: gpu.Uint(1 * gib)},
		},
		Processes: []gpu.Process{{PID: 9, VGPUInstance: 3, GPUInstanceID: -1, UID: -1}},
	}}}
	s := b.Build(r, gpu.SamplerStats{})
	vdi, inf, un := usageOf(t, s, "vdi", ""), usageOf(t, s, "inference", ""), usageOf(t, s, Unassigned, "")
	// SM: the device's 0.8 split by the VMs' busy time (0.85 in all)
	checkF(t, "vdi busy", vdi.KernelBusy, 0.3)
	checkF(t, "vdi SM", vdi.SMActive, 0.8*0.3/0.85)
	checkF(t, "inference SM", inf.SMActive, 0.8*0.5/0.85)
	checkF(t, "unassigned SM", un.SMActive, 0.8*0.05/0.85)
	checkF(t, "vdi DRAM", vdi.DRAMActive, 0.6*0.2/0.6)
	checkF(t, "inference DRAM", inf.DRAMActive, 0.6*0.4/0.6)
	// reservations: the profiles' framebuffer over the GPU's memory
	checkF(t, "vdi reservation", vdi.Reservation, 0.25)
	checkF(t, "inference reservation", inf.Reservation, 0.5)
	if un.Reservation != nil {
		t.Errorf("unassigned reservation %g, want none (profile unknown)", *un.Reservation)
	}
	if vdi.Method != Apportioned || vdi.MemoryUsedBytes != 3*gib || inf.MemoryUsedBytes != 8*gib || inf.Processes != 1 || inf.PIDs[0] != 9 {
		t.Errorf("vdi %+v inference %+v", vdi, inf)
	}
	// the VMs' host processes, apart from the guests' PIDs
	if !slices.Equal(vdi.VMPIDs, []uint32{4001, 4002}) || vdi.PIDs != nil || inf.VMPIDs != nil {
		t.Errorf("VM host PIDs: vdi %v (PIDs %v), inference %v; want vdi 4001, 4002 and no PIDs, inference none", vdi.VMPIDs, vdi.PIDs, inf.VMPIDs)
	}
}

func TestAttributionConflict(t *testing.T) {
	const yaml = `tenants:
  - name: chat
    selectors: [{executable: vllm}]
  - name: ops
    selectors: [{uid: 1000}]
`
	var buf bytes.Buffer
	b := mustBuilder(t, yaml, BuilderOptions{Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
	r := sharedReadings(gpu.SharingTimeSlice, 0) // pids 1 and 2: vllm with uid 1000
	for i := 0; i < 3; i++ {
		s := b.Build(r, gpu.SamplerStats{})
		if s.Attribution.Conflicts != 2 || s.Attribution.ConflictsTotal != 2 {
			t.Fatalf("attribution status %+v", s.Attribution)
		}
		for _, u := range s.Usage {
			if u.Tenant == "chat" || u.Tenant == "ops" {
				t.Fatalf("a conflicting process was attributed: %+v", u)
			}
		}
		if u := usageOf(t, s, Unassigned, ""); u.Processes != 4 {
			t.Errorf("unassigned %+v", u)
		}
	}
	out := buf.String()
	if strings.Count(out, "more than one tenant") != 2 || !strings.Contains(out, "tenants=chat,ops") || !strings.Contains(out, "pid 1 on GPU 0") {
		t.Errorf("log (each conflict once, both names):\n%s", out)
	}
}

func TestAttributionFromProcfs(t *testing.T) {
	proc := fakeProc{50: {cgroup: "/system.slice/docker-" + strings.Repeat("5b", 32) + ".scope", comm: "trainer", uid: 1002}}
	const yaml = `tenants:
  - name: docker
    selectors: [{cgroup: "/system.slice/docker-*"}]
  - name: bob
    selectors: [{executable: other, uid: 1002}]
`
	b := mustBuilder(t, yaml, BuilderOptions{Proc: proc})
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Up: true, Processes: []gpu.Process{
		testutil.MIGProc(50, "", -1),
		testutil.MIGProc(51, "", -1), // no /proc entry
	}}}}
	s := b.Build(r, gpu.SamplerStats{})
	if u := usageOf(t, s, "docker", ""); u.Processes != 1 || u.PIDs[0] != 50 {
		t.Errorf("docker %+v", u)
	}
	if s.Attribution.CgroupErrorsTotal != 1 {
		t.Errorf("cgroup errors %d", s.Attribution.CgroupErrorsTotal)
	}
}

func TestDeviceDownSkipped(t *testing.T) {
	b := mustBuilder(t, sharedTenants, BuilderOptions{})
	r := sharedReadings(gpu.SharingTimeSlice, 0)
	r.Devices[0].Up = false
	if s := b.Build(r, gpu.SamplerStats{}); len(s.Usage) != 0 {
		t.Errorf("usage for a lost GPU: %+v", s.Usage)
	}
	if s := b.Build(nil, gpu.SamplerStats{}); s == nil || s.Usage != nil {
		t.Errorf("nil readings: %+v", s)
	}
}

func TestReloadBrokenKeepsConfig(t *testing.T) {
	good, err := os.ReadFile("testdata/tenants-mps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	var logs bytes.Buffer
	b, file := fileBuilder(t, string(good), BuilderOptions{Clock: clock, Logger: log.NewLogfmtLogger(&logs)})
	cfg := b.Config()
	r := sharedReadings(gpu.SharingMPS, 0)
	before := b.Build(r, gpu.SamplerStats{})

	broken, err := os.ReadFile("testdata/tenants-broken.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	err = b.Reload(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":6: slo.target: bad duration") {
		t.Fatalf("reload error %v, want it to name %s:6", err, file)
	}
	if b.Config() != cfg {
		t.Error("the configuration changed after a failed reload")
	}
	after := b.Build(r, gpu.SamplerStats{})
	want := ConfigStatus{File: file, LastReloadSuccessful: false, LastReloadSuccessTime: time.Unix(1000, 0), ReloadsTotal: 1, ReloadFailuresTotal: 1}
	if after.Config != want {
		t.Errorf("status %+v, want %+v", after.Config, want)
	}
	if len(after.Usage) != len(before.Usage) {
		t.Fatalf("usage changed: %+v vs %+v", after.Usage, before.Usage)
	}
	for i := range before.Usage {
		if before.Usage[i].Tenant != after.Usage[i].Tenant || before.Usage[i].Processes != after.Usage[i].Processes {
			t.Errorf("usage changed: %+v vs %+v", after.Usage[i], before.Usage[i])
		}
	}
	// The error names file:line; the caller logs it (once, in the
	// reload's outcome), the builder does not.
	if len(after.Tenants) != len(before.Tenants) || logs.String() != "" {
		t.Errorf("tenants %v; logs %s, want none", after.Tenants, logs.String())
	}

	// fixed file: applied
	if err := os.WriteFile(file, []byte("tenants:\n  - name: solo\n    selectors: [{uid: 1002}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	s := b.Build(r, gpu.SamplerStats{})
	if !s.Config.LastReloadSuccessful || s.Config.ReloadsTotal != 2 || s.Config.ReloadFailuresTotal != 1 || !s.Config.LastReloadSuccessTime.Equal(time.Unix(1120, 0)) {
		t.Errorf("status %+v", s.Config)
	}
	if len(s.Tenants) != 1 || usageOf(t, s, "solo", "").Processes != 1 {
		t.Errorf("new config not applied: %+v", s.Usage)
	}
}

func TestReloadKeepsLatencyCounters(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}
	cfgText := `tenants:
  - name: chat
    selectors: [{executable: vllm}]
    slo: {quantile: 0.99, target: 300ms}
    latency_source: {url: "sim://chat", preset: vllm-e2e, matchers: {model_name: llama}}
`
	clock := gpu.NewManualClock(time.Unix(0, 0))
	b, file := fileBuilder(t, cfgText, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app})})
	b.Refresh(context.Background())
	app.Set("chat", fixture(t, "vllm-2.txt"))
	clock.Advance(15 * time.Second)
	b.Refresh(context.Background())
	s := b.Build(nil, gpu.SamplerStats{})
	if len(s.SLOs) != 1 || s.SLOs[0].RequestsTotal != 300 || s.SLOs[0].Tenant != "chat" {
		t.Fatalf("SLOs %+v", s.SLOs)
	}
	// same source, another tenant added: counters kept
	if err := os.WriteFile(file, []byte(cfgText+"  - name: other\n    selectors: [{uid: 5}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(file); err != nil {
		t.Fatal(err)
	}
	if s := b.Build(nil, gpu.SamplerStats{}); s.SLOs[0].RequestsTotal != 300 {
		t.Errorf("counters lost on reload: %+v", s.SLOs)
	}
	// target changed: a new objective starts from zero
	if err := os.WriteFile(file, []byte(strings.Replace(cfgText, "300ms", "500ms", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(file); err != nil {
		t.Fatal(err)
	}
	if s := b.Build(nil, gpu.SamplerStats{}); s.SLOs[0].RequestsTotal != 0 || s.SLOs[0].TargetSeconds != 0.5 {
		t.Errorf("after a target change: %+v", s.SLOs)
	}
}

func TestStartScrapesLatencySources(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}
	clock := gpu.NewManualClock(time.Unix(0, 0))
	b := mustBuilder(t, `tenants:
  - name: chat
    selectors: [{executable: vllm}]
    latency_source: {url: "sim://chat", preset: vllm-e2e}
defaults: {scrape_interval: 15s}
`, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Start(ctx)
	waitFor := func(cond func(SLOStatus) bool) SLOStatus {
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := b.Build(nil, gpu.SamplerStats{})
			if len(s.SLOs) == 1 && cond(s.SLOs[0]) {
				return s.SLOs[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("condition never met: %+v", s.SLOs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(func(s SLOStatus) bool { return s.SourceUp })
	app.Set("chat", fixture(t, "vllm-2.txt"))
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(15 * time.Second)
	st := waitFor(func(s SLOStatus) bool { return s.RequestsTotal > 0 })
	if st.RequestsTotal != 300+900-9 {
		// no matchers: both models summed (llama 300, other 891)
		t.Errorf("requests %v", st.RequestsTotal)
	}
}

// TestReloadDropsRemovedTenantsCounters: a reload keeps the context-switch
// counters of tenants that stay and drops those of tenants that are gone,
// so that renaming tenants again and again does not grow memory.
func TestReloadDropsRemovedTenantsCounters(t *testing.T) {
	b, file := fileBuilder(t, sharedTenants, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	b.Build(sharedReadings(gpu.SharingTimeSlice, 1000), gpu.SamplerStats{})
	s := b.Build(sharedReadings(gpu.SharingTimeSlice, 1600), gpu.SamplerStats{})
	chatCS := *usageOf(t, s, "chat", "").ContextSwitchesTotal
	for i := 0; i < 5; i++ {
		renamed := strings.Replace(sharedTenants, "name: train", "name: train"+strconv.Itoa(i), 1)
		if err := os.WriteFile(file, []byte(renamed), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(file); err != nil {
			t.Fatal(err)
		}
		s = b.Build(sharedReadings(gpu.SharingTimeSlice, 1600), gpu.SamplerStats{})
	}
	if got := *usageOf(t, s, "chat", "").ContextSwitchesTotal; got != chatCS {
		t.Errorf("chat's counter after reloads = %v, want %v (kept)", got, chatCS)
	}
	b.buildMu.Lock()
	defer b.buildMu.Unlock()
	for k := range b.attr.csAcc {
		if k.tenant != "chat" && k.tenant != "train4" && k.tenant != Unassigned {
			t.Errorf("counter of removed tenant %q kept", k.tenant)
		}
	}
	if _, ok := b.attr.csAcc[csKey{"GPU-0", "chat"}]; !ok {
		t.Errorf("chat's counter dropped: %v", b.attr.csAcc)
	}
}

// TestUsageWorkloads: each attributed process carries what runs it where
// the attribution knows it: the pod that holds its GPU (pod resources),
// with the UID of its cgroup's pod (an eviction's precondition), the
// systemd service of its cgroup; a process with neither has none.
func TestUsageWorkloads(t *testing.T) {
	pods := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
		Name: "chat-0", Namespace: "llm",
		Containers: []*podresourcesv1.ContainerResources{{Name: "server", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-1"}}}}},
	}}})
	proc := fakeProc{
		60: {cgroup: "/system.slice/trainer.service", comm: "python", uid: 0},
		61: {cgroup: "/system.slice/trainer.service", comm: "python", uid: 0},
		62: {cgroup: "/user.slice/user-1000.slice/session-2.scope", comm: "python", uid: 0},
		70: {cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + strings.Repeat("ab", 32) + ".scope", comm: "vllm", uid: 0},
	}
	const yaml = `tenants:
  - name: train
    selectors: [{cgroup: "/system.slice/*"}, {cgroup: "/user.slice/*"}]
  - name: chat
    selectors: [{kubernetes: {namespace: llm}}]
`
	b := mustBuilder(t, yaml, BuilderOptions{Proc: proc, Pods: fixedPods{pods}})
	r := &gpu.Readings{Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-0", Up: true, Processes: []gpu.Process{testutil.MIGProc(61, "", -1), testutil.MIGProc(60, "", -1), testutil.MIGProc(62, "", -1)}},
		{Index: 1, UUID: "GPU-1", Up: true, Processes: []gpu.Process{testutil.MIGProc(70, "", -1)}},
	}}
	s := b.Build(r, gpu.SamplerStats{})
	train, chat := usageOf(t, s, "train", ""), usageOf(t, s, "chat", "")
	if got, want := fmt.Sprint(train.Workloads), "[{60 <nil> trainer.service} {61 <nil> trainer.service}]"; got != want {
		t.Errorf("train workloads %s, want %s", got, want)
	}
	if len(chat.Workloads) != 1 || chat.Workloads[0].PID != 70 || chat.Workloads[0].Pod == nil ||
		*chat.Workloads[0].Pod != (gpu.Pod{Namespace: "llm", Name: "chat-0", UID: "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5"}) || chat.Workloads[0].Unit != "" {
		t.Errorf("chat workloads %+v", chat.Workloads)
	}
}

// TestUsageWorkloadsWithoutCgroupSelector: tenants told apart by uid
// alone (no selector needs the cgroup) with processes in one systemd
// service: each usage names the service, so the rebalance planner sees
// that they share it. Before, the cgroup was read only for a cgroup or
// kubernetes selector: no workload was given, the move went out by PID
// alone, and systemd-move.sh restarted the service, the other tenant's
// process with it.
func TestUsageWorkloadsWithoutCgroupSelector(t *testing.T) {
	proc := fakeProc{
		60: {cgroup: "/system.slice/llm.service", comm: "python", uid: 1000},
		61: {cgroup: "/system.slice/llm.service", comm: "python", uid: 2000},
	}
	const yaml = `tenants:
  - name: train
    class: batch
    selectors: [{uid: 1000}]
  - name: chat
    class: latency
    selectors: [{uid: 2000}]
`
	b := mustBuilder(t, yaml, BuilderOptions{Proc: proc})
	r := &gpu.Readings{Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-0", Up: true, Processes: []gpu.Process{testutil.MIGProc(60, "", -1), testutil.MIGProc(61, "", -1), testutil.MIGProc(62, "", -1)}},
	}}
	s := b.Build(r, gpu.SamplerStats{})
	for _, tc := range []struct{ tenant, want string }{{"train", "[{60 <nil> llm.service}]"}, {"chat", "[{61 <nil> llm.service}]"}} {
		if got := fmt.Sprint(usageOf(t, s, tc.tenant, "").Workloads); got != tc.want {
			t.Errorf("%s workloads %s, want %s", tc.tenant, got, tc.want)
		}
	}
	// a process whose cgroup cannot be read is no error where no
	// selector needs the cgroup
	if n := s.Attribution.CgroupErrorsTotal; n != 0 {
		t.Errorf("cgroup errors %d, want 0", n)
	}
}

// TestDuplicateUUIDsFitOnce: two shared devices that report the same UUID
// share one footprint fit; it is fitted by one worker, in device order,
// so the usage is the same however many run at once (and, under -race,
// no two workers touch the fit).
func TestDuplicateUUIDsFitOnce(t *testing.T) {
	readings := func(i int) *gpu.Readings {
		r := sharedReadings(gpu.SharingTimeSlice, uint64(1000*(i+1)))
		r.Time = time.Unix(int64(10+i), 0)
		second := r.Devices[0]
		second.Index = 1
		second.Activity.SMActive = gpu.Float(0.4 + 0.05*float64(i%3))
		second.Activity.SMOccupancy = gpu.Float(0.2)
		r.Devices = append(r.Devices, second)
		return r
	}
	run := func(procs int) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		b := mustBuilder(t, sharedTenants, BuilderOptions{})
		var out strings.Builder
		for i := range 12 {
			for _, u := range b.Build(readings(i), gpu.SamplerStats{}).Usage {
				fmt.Fprintf(&out, "%s %s %s %v %v\n", u.Tenant, u.UUID, u.GPUInstance, fmtF(u.SMActive), fmtF(u.DRAMActive))
			}
		}
		return out.String()
	}
	serial := run(1)
	for _, procs := range []int{2, 4} {
		if got := run(procs); got != serial {
			t.Errorf("GOMAXPROCS=%d: usage\n%s\nwant (GOMAXPROCS=1)\n%s", procs, got, serial)
		}
	}
}

func fmtF(f *float64) string {
	if f == nil {
		return "nil"
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

// A process that exited between the GPU's listing and the read of its
// /proc entry is logged once, and does not keep a /proc entry that cannot
// be read (here a cgroup that is no regular file) from being logged.
func TestAttributionCgroupErrorsLogged(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "61", "cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	const yaml = `tenants:
  - name: docker
    selectors: [{cgroup: "/system.slice/docker-*"}]
`
	var buf bytes.Buffer
	b := mustBuilder(t, yaml, BuilderOptions{Proc: kube.NewProcReader(root), Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Up: true, Processes: []gpu.Process{
		testutil.MIGProc(60, "", -1), // gone
		testutil.MIGProc(61, "", -1), // cgroup unreadable
		testutil.MIGProc(62, "", -1), // gone
	}}}}
	s := b.Build(r, gpu.SamplerStats{})
	if s.Attribution.CgroupErrorsTotal != 3 {
		t.Errorf("cgroup errors %d, want 3", s.Attribution.CgroupErrorsTotal)
	}
	out := buf.String()
	if strings.Count(out, "level=warn") != 2 || strings.Count(out, "/proc entry is gone") != 1 || strings.Count(out, "cannot read a GPU process's cgroup") != 1 || !strings.Contains(out, "pid=61") {
		t.Errorf("log (a gone process and an unreadable cgroup, each once):\n%s", out)
	}
}
