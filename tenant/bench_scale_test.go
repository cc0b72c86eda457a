package tenant

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// BenchmarkBuildAtScale attributes one sample of 8 MIG GPUs (7 instances
// each) running 512 processes to 64 tenants, and reports the cost per
// sample and per process.
func BenchmarkBuildAtScale(b *testing.B) {
	const nGPU, nMIG, nProc, nTenant = 8, 7, 512, 64
	var cfg strings.Builder
	cfg.WriteString("tenants:\n")
	for t := range nTenant {
		fmt.Fprintf(&cfg, "  - {name: t%02d, class: latency, selectors: [{executable: \"app%d\"}, {cgroup: \"/kubepods.slice/*pod%d_*\"}]}\n", t, t, t)
	}
	bl := mustBuilder(b, cfg.String(), BuilderOptions{})
	r := &gpu.Readings{}
	pid := uint32(0)
	for g := range nGPU {
		d := gpu.Device{Index: g, UUID: fmt.Sprint("GPU-", g), Up: true, MIGEnabled: true, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}}
		for m := range nMIG {
			d.MIG = append(d.MIG, gpu.MIGInstance{UUID: fmt.Sprint("MIG-", g, "-", m), GPUInstanceID: m + 1, SMCount: 16,
				Activity: gpu.Activity{SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.25)}})
		}
		for range nProc / nGPU {
			mem := uint64(1 << 28)
			t := int(pid) % nTenant
			d.Processes = append(d.Processes, gpu.Process{PID: pid, Name: fmt.Sprint("app", t), UID: 1000, GPUInstanceID: 1 + int(pid)%nMIG,
				Cgroup: fmt.Sprintf("/kubepods.slice/kubepods-pod%d_x.slice/cri-containerd-%d.scope", t, pid), UsedMemoryBytes: &mem})
			pid++
		}
		r.Devices = append(r.Devices, d)
	}
	if s := bl.Build(r, gpu.SamplerStats{}); len(s.Tenants) != nTenant {
		b.Fatalf("%d tenants built, want %d", len(s.Tenants), nTenant)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = bl.Build(r, gpu.SamplerStats{})
	}
	perSample := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perSample/1e3, "us/sample")
	b.ReportMetric(perSample/nProc, "ns/process")
}
