package collector

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A MIG tenant whose activity the exporter's first sample knows (DCGM's
// profiling figures are there from the first scrape) keeps its
// used-seconds and energy series when the next sample does not know it
// (one dcgm-exporter scrape failed): a figure the first sample knows is
// known from then on, as one a later sample knows. They were served 0,
// dropped, and served again.
func TestMeterKnownFromFirstSampleKept(t *testing.T) {
	cfg, err := tenant.ParseConfig("t.yaml", []byte("tenants:\n  - {name: train, selectors: [{executable: train}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	active := []*float64{gpu.Float(0.5), nil, gpu.Float(0.5)}
	var got []int
	for i := range 3 {
		d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 108,
			MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 20 << 30, EnergyJoules: gpu.Float(float64(i) * 3000),
			MIG: []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1, Profile: "7g.80gb", SMCount: 98, MemoryTotalBytes: 10 << 30, MemoryUsedBytes: 2 << 30,
				Activity: gpu.Activity{SMActive: active[i]}}},
			Processes: []gpu.Process{{PID: 7, Name: "train", UID: -1, GPUInstanceID: 1, UsedMemoryBytes: gpu.Uint(2 << 30)}}}
		r := &gpu.Readings{Time: time.Unix(int64(10*i), 0), Devices: []gpu.Device{d}}
		if i > 0 {
			r.Interval = 10 * time.Second
		}
		e := newExporter(t, b.Build(r, gpu.SamplerStats{}), "tenant")
		got = append(got, testutil.CollectAndCount(e, "vgpu_tenant_gpu_used_seconds_total", "vgpu_tenant_energy_joules_total"))
	}
	if got[0] != 2 || got[1] != 2 || got[2] != 2 {
		t.Errorf("used-seconds and energy series on samples 0, 1, 2: %v, want [2 2 2] (served from the first sample, known then, kept)", got)
	}
}
