package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A reload that removes tenant batch drops its context-switch series at
// once (docs/metrics.md, vgpu_tenant_context_switches_total). While the
// GPU's process list is refused, batch is carried forward under the name
// the file no longer has: its series comes back and counts from 0.
func TestRemovedTenantSeriesNotBackWhileListRefused(t *testing.T) {
	const before = "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n  - {name: batch, selectors: [{executable: train}]}\n"
	file := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(file, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	dev := func(sec int64, refused bool) *gpu.Readings {
		cs := uint64(1000 * sec)
		d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 << 30,
			Activity: gpu.Activity{SMActive: gpu.Float(0.6)}, ContextSwitchesTotal: &cs, EnergyJoules: gpu.Float(100 * float64(sec))}
		if refused {
			d.ProcessesUnread = true
		} else {
			d.Processes = []gpu.Process{
				{PID: 7, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.3), UsedMemoryBytes: gpu.Uint(1 << 30)},
				{PID: 8, Name: "train", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.3), UsedMemoryBytes: gpu.Uint(1 << 30)},
			}
		}
		return &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{d}}
	}
	b.Build(dev(100, false), gpu.SamplerStats{})
	b.Build(dev(101, false), gpu.SamplerStats{})
	if err := os.WriteFile(file, []byte(strings.Replace(before, "name: batch", "name: training", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(file); err != nil {
		t.Fatal(err)
	}
	snap := b.Build(dev(102, true), gpu.SamplerStats{})
	// chat: 500 of sample 101's 1000 switches, then all of sample 102's
	// (the only tenant of the file left that held the GPU)
	want := `
# HELP vgpu_tenant_context_switches_total Context switches of the GPU attributed to the tenant; the tenants of a GPU add up to its context switches' increase over any window in which no tenant was forgotten (a tenant that left keeps its count for --tenants.departed-retention). Not per MIG instance: absent on a MIG GPU.
# TYPE vgpu_tenant_context_switches_total counter
vgpu_tenant_context_switches_total{class="best-effort",gpu="0",gpu_instance="",tenant="chat",uuid="GPU-0"} 1500
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want), "vgpu_tenant_context_switches_total"); err != nil {
		t.Error(err)
	}
}
