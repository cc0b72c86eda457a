package tenant

import (
	"strconv"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestBuildNoTenantsFile(t *testing.T) {
	b, err := NewBuilder(nil, BuilderOptions{ProcRoot: t.TempDir(), Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	mem := uint64(1 << 30)
	r := &gpu.Readings{Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingTimeSlice, Processes: []gpu.Process{
			{PID: 10, Name: "python", GPUInstanceID: -1, UID: -1, UsedMemoryBytes: &mem, SMUtil: gpu.Float(0.3)},
			{PID: 11, Name: "vllm", GPUInstanceID: -1, UID: -1, UsedMemoryBytes: &mem, SMUtil: gpu.Float(0.2)},
		}},
		{Index: 1, UUID: "GPU-b", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, MIG: []gpu.MIGInstance{
			{UUID: "MIG-1", GPUInstanceID: 1, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}},
			{UUID: "MIG-2", GPUInstanceID: 2},
		}, Processes: []gpu.Process{{PID: 12, GPUInstanceID: 1, ComputeInstanceID: 0, UID: -1}}},
	}}
	s := b.Build(r, gpu.SamplerStats{})
	if len(s.Tenants) != 0 {
		t.Fatalf("tenants %v", s.Tenants)
	}
	if len(s.Usage) != 3 {
		t.Fatalf("usage %+v", s.Usage)
	}
	for _, u := range s.Usage {
		if u.Tenant != Unassigned {
			t.Errorf("usage for %q, want only %q", u.Tenant, Unassigned)
		}
	}
	if u := s.Usage[0]; u.Processes != 2 || *u.SMActive != 0.5 || u.MemoryUsedBytes != 2<<30 || len(u.PIDs) != 2 {
		t.Errorf("time-sliced usage %+v", u)
	}
	if u := s.Usage[1]; u.GPUInstance != "1" || *u.SMActive != 0.5 || u.Processes != 1 {
		t.Errorf("MIG 1 usage %+v", u)
	}
	if u := s.Usage[2]; u.GPUInstance != "2" || u.SMActive != nil || u.Processes != 0 {
		t.Errorf("MIG 2 usage %+v", u)
	}
}

// BenchmarkBuild attributes a host of 8 time-sliced GPUs with 32 processes
// each to 16 tenants.
func BenchmarkBuild(b *testing.B) {
	yaml := "tenants:\n"
	for i := 0; i < 16; i++ {
		yaml += "  - name: t" + strconv.Itoa(i) + "\n    selectors: [{executable: \"app" + strconv.Itoa(i) + "\"}, {cgroup: \"/kubepods.slice/*pod" + strconv.Itoa(i) + "_*\"}]\n"
	}
	cfg, err := ParseConfig("b.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	bl, err := NewBuilder(cfg, BuilderOptions{ProcRoot: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	r := &gpu.Readings{}
	for g := 0; g < 8; g++ {
		d := gpu.Device{Index: g, UUID: "GPU-" + strconv.Itoa(g), Up: true, Mode: gpu.SharingTimeSlice,
			Activity: gpu.Activity{SMActive: gpu.Float(0.9), DRAMActive: gpu.Float(0.5)}, ContextSwitchesTotal: gpu.Uint(100)}
		for p := 0; p < 32; p++ {
			mem := uint64(1 << 30)
			d.Processes = append(d.Processes, gpu.Process{
				PID: uint32(g*100 + p), Name: "app" + strconv.Itoa(p%17), UID: 1000, GPUInstanceID: -1,
				Cgroup: "/kubepods.slice/kubepods-pod" + strconv.Itoa(p%16) + "_x.slice/cri-containerd-ab.scope",
				SMUtil: gpu.Float(0.02), MemUtil: gpu.Float(0.01), UsedMemoryBytes: &mem,
			})
		}
		r.Devices = append(r.Devices, d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = bl.Build(r, gpu.SamplerStats{})
	}
}
