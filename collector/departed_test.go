package collector

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The series of a tenant that left a GPU (its meters, costs and
// context-switch count) stay for the retention, then go; the idle series
// stay.
func TestDepartedTenantSeriesGo(t *testing.T) {
	cfg, err := tenant.ParseConfig("t.yaml", []byte(`tenants:
  - name: web
    selectors: [{executable: web}]
  - name: job
    selectors: [{executable: job}]
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0)), DepartedRetention: time.Hour,
		Prices: &tenant.Prices{Currency: "USD", PerGPUHour: gpu.Float(2)}})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"vgpu_tenant_energy_joules_total", "vgpu_tenant_gpu_used_seconds_total", "vgpu_tenant_gpu_reserved_seconds_total",
		"vgpu_tenant_memory_byte_seconds_total", "vgpu_tenant_cost_total", "vgpu_tenant_context_switches_total"}
	idle := []string{"vgpu_tenant_idle_energy_joules_total", "vgpu_tenant_idle_cost_total"}
	// a sample every 10 minutes; the job's last usage is sample 1
	for i, want := range []int{12, 12, 12, 12, 12, 12, 12, 6, 6} {
		d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice,
			Activity: gpu.Activity{SMActive: gpu.Float(0.5)}, EnergyJoules: gpu.Float(float64(i) * 1000), ContextSwitchesTotal: gpu.Uint(uint64(i) * 100),
			Processes: []gpu.Process{{PID: 1, Name: "web", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.2), UsedMemoryBytes: gpu.Uint(1 << 30)}}}
		if i <= 1 {
			d.Processes = append(d.Processes, gpu.Process{PID: 2, Name: "job", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.3), UsedMemoryBytes: gpu.Uint(1 << 30)})
		} else {
			d.Activity.SMActive = gpu.Float(0.2) // web's: no activity left for unassigned
		}
		r := &gpu.Readings{Time: time.Unix(0, 0).Add(time.Duration(i) * 10 * time.Minute), Interval: 10 * time.Minute, Devices: []gpu.Device{d}}
		e := newExporter(t, b.Build(r, gpu.SamplerStats{}), "tenant")
		if got := testutil.CollectAndCount(e, names...); got != want {
			t.Errorf("sample %d: %d tenant meter series, want %d", i, got, want)
		}
		if got := testutil.CollectAndCount(e, idle...); got != 2 {
			t.Errorf("sample %d: %d idle series, want 2", i, got)
		}
	}
}
