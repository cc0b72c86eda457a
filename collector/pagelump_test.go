package collector_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// dcgm-exporter's page refreshes a GPU's energy counter every 30 s and
// the exporter samples every second: the copies in between
// (EnergyRepeated) are served as the counter, at every sample, and the
// step when the page moves is billed over the samples since. Tenant b,
// busy in the 29 samples of copies, was billed 0 J and a, busy in the one
// where the page moved, the whole step.
func TestPageEnergyCopiesServedAndSpread(t *testing.T) {
	cfg, err := tenant.ParseConfig("t.yaml", []byte("tenants:\n  - {name: a, selectors: [{executable: a}]}\n  - {name: b, selectors: [{executable: b}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	var store tenant.Store
	reg := register(t, &store)
	mem := uint64(1 << 30)
	const head = "# HELP vgpu_gpu_energy_joules_total Energy consumed since the driver loaded.\n# TYPE vgpu_gpu_energy_joules_total counter\n"
	for i := 0; i <= 60; i++ {
		counter := 1e6 + 9000*float64(i/30) // J: 300 W, the page collected every 30 s
		busy := "b"
		if i%30 == 0 {
			busy = "a"
		}
		r := &gpu.Readings{Time: time.Unix(int64(1000+i), 0), Interval: time.Second, Devices: []gpu.Device{{
			Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 << 30,
			Activity:     gpu.Activity{SMActive: gpu.Float(1)},
			EnergyJoules: gpu.Float(counter), EnergyRepeated: i%30 != 0,
			Processes: []gpu.Process{{PID: 7, Name: busy, UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(1), UsedMemoryBytes: &mem}},
		}}}
		store.Store(b.Build(r, gpu.SamplerStats{}))
		want := fmt.Sprintf("%svgpu_gpu_energy_joules_total{gpu=\"0\",uuid=\"GPU-0\"} %g\n", head, counter)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vgpu_gpu_energy_joules_total"); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	got := scrapeLines(t, reg)
	for _, line := range []string{`vgpu_tenant_energy_joules_total{gpu="0",tenant="a",uuid="GPU-0"} 600`, `vgpu_tenant_energy_joules_total{gpu="0",tenant="b",uuid="GPU-0"} 17400`} {
		if !got[line] {
			var have []string
			for l := range got {
				if strings.HasPrefix(l, "vgpu_tenant_energy_joules_total") {
					have = append(have, l)
				}
			}
			t.Errorf("want %s (300 W over the tenant's seconds busy: a 2 s, b 58 s of 60); have %v", line, have)
		}
	}
}
