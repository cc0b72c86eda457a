package collector_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestCountersFromZero: on the first snapshot, before anything happened,
// every counter whose label values are known is served at 0, so that the
// first event is an increase that increase() and rate() see.
func TestCountersFromZero(t *testing.T) {
	cfg, err := tenant.ParseConfig("t.yaml", []byte(`tenants:
  - name: chat
    class: latency
    selectors: [{executable: vllm}]
    slo: {quantile: 0.99, target: 300ms}
    latency_source: {url: "http://127.0.0.1:1/metrics", preset: vllm-e2e}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	// The mapper does no I/O until its first refresh, which this test never runs.
	dir := t.TempDir()
	pods, err := kube.NewMapper(kube.Options{PodResourcesSocket: filepath.Join(dir, "kubelet.sock"), PodMetadata: filepath.Join(dir, "pods.json"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: clock, Pods: pods,
		Latency: latency.NewPool(latency.Options{Clock: clock})})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Time: clock.Now(), Backend: "sim", Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true}}}
	var store tenant.Store
	store.Store(b.Build(r, gpu.SamplerStats{SamplesTotal: 1, LastSuccess: clock.Now()}))
	got := scrapeLines(t, register(t, &store))

	want := []string{
		`vgpu_gpu_events_total{code="13",gpu="0",kind="xid",uuid="GPU-a"} 0`,
		`vgpu_gpu_events_total{code="79",gpu="0",kind="xid",uuid="GPU-a"} 0`,
		`vgpu_gpu_events_total{code="other",gpu="0",kind="xid",uuid="GPU-a"} 0`,
		`vgpu_gpu_events_total{code="0",gpu="0",kind="oom",uuid="GPU-a"} 0`,
		`vgpu_gpu_events_total{code="0",gpu="0",kind="reconfigure",uuid="GPU-a"} 0`,
		`vgpu_config_reloads_total 0`,
		`vgpu_config_reload_failures_total 0`,
		`vgpu_sample_errors_total 0`,
		`vgpu_kubelet_pod_resources_errors_total 0`,
		`vgpu_kubelet_pod_metadata_errors_total 0`,
		`vgpu_tenant_latency_source_scrape_errors_total{tenant="chat"} 0`,
		`vgpu_tenant_requests_total{tenant="chat"} 0`,
		`vgpu_tenant_slo_good_requests_total{tenant="chat"} 0`,
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("not served on the first scrape: %s", w)
		}
	}
	for _, x := range gpu.WellKnownXIDs {
		if !got[`vgpu_gpu_events_total{code="`+strconv.FormatUint(x.Code, 10)+`",gpu="0",kind="xid",uuid="GPU-a"} 0`] {
			t.Errorf("XID %d not served at 0 on the first scrape", x.Code)
		}
	}
}
