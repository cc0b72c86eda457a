package collector_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// scrapeLines renders every sample g serves, except the scrape durations
// (wall time), one line each.
func scrapeLines(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if mf.GetName() == "vgpu_scrape_collector_duration_seconds" {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]bool{}
	for _, l := range strings.Split(buf.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out[l] = true
		}
	}
	return out
}

// TestBrokenReloadChangesOnlyReloadStatus: reloading a tenants file with an
// error changes nothing served but the reload status (success 1 -> 0 and
// the reload counters), and logs the file, the line and the problem.
func TestBrokenReloadChangesOnlyReloadStatus(t *testing.T) {
	const good = `tenants:
  - name: chat
    class: latency
    selectors: [{executable: vllm}]
  - name: train
    class: batch
    selectors: [{uid: 1002}]
`
	broken := strings.Replace(good, "    class: batch", "    clas: batch", 1) // line 6
	file := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: clock, Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
	if err != nil {
		t.Fatal(err)
	}
	mem := uint64(8 << 30)
	r := &gpu.Readings{Time: time.Unix(1000, 0), Interval: time.Second, Backend: "sim", Devices: []gpu.Device{{
		Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice,
		Activity:             gpu.Activity{SMActive: gpu.Float(0.8), DRAMActive: gpu.Float(0.4)},
		ContextSwitchesTotal: gpu.Uint(100),
		Processes: []gpu.Process{
			{PID: 1, Name: "vllm", UID: 1000, GPUInstanceID: -1, SMUtil: gpu.Float(0.5), MemUtil: gpu.Float(0.3), UsedMemoryBytes: &mem},
			{PID: 2, Name: "python3", UID: 1002, GPUInstanceID: -1, SMUtil: gpu.Float(0.3), MemUtil: gpu.Float(0.1), UsedMemoryBytes: &mem},
		},
	}}}
	var store tenant.Store
	reg := register(t, &store)
	store.Store(b.Build(r, gpu.SamplerStats{SamplesTotal: 1, LastSuccess: r.Time}))
	before := scrapeLines(t, reg)
	if !before[`vgpu_tenant_info{class="batch",priority="0",tenant="train"} 1`] || !before["vgpu_config_last_reload_successful 1"] {
		t.Fatalf("unexpected scrape before the reload:\n%v", before)
	}

	if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	err = b.Reload(file)
	if err == nil {
		t.Fatal("a broken file reloaded without error")
	}
	store.Store(b.Build(r, gpu.SamplerStats{SamplesTotal: 1, LastSuccess: r.Time}))
	after := scrapeLines(t, reg)

	changed := map[string]string{ // what may and must change
		"vgpu_config_last_reload_successful 1": "vgpu_config_last_reload_successful 0",
		"vgpu_config_reloads_total 0":          "vgpu_config_reloads_total 1",
		"vgpu_config_reload_failures_total 0":  "vgpu_config_reload_failures_total 1",
	}
	for old, nu := range changed {
		if !before[old] || !after[nu] {
			t.Errorf("want %q before and %q after the broken reload", old, nu)
		}
	}
	for l := range before {
		if _, ok := changed[l]; !ok && !after[l] {
			t.Errorf("changed by a broken reload: %s", l)
		}
	}
	expected := map[string]bool{}
	for _, nu := range changed {
		expected[nu] = true
	}
	for l := range after {
		if !before[l] && !expected[l] {
			t.Errorf("appeared after a broken reload: %s", l)
		}
	}
	// The builder logs nothing of a failed reload: its caller logs the
	// error once, which names the line and the problem.
	want := file + `:6: unknown key "clas" in a tenant`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("the reload's error does not name the line and the problem (%s): %v", want, err)
	}
	if logs.Len() != 0 {
		t.Errorf("the builder logged a failed reload (its caller logs it once):\n%s", logs.String())
	}
}
