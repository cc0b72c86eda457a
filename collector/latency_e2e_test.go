package collector_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestVLLMSourceServed: a tenant whose latency source is a vLLM server
// (over HTTP) is served with window quantiles and good/total counters equal
// to a hand computation.
func TestVLLMSourceServed(t *testing.T) {
	// Two scrapes of a vLLM server's /metrics (text format, two models),
	// the fixtures of the tenant package's own tests.
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "latency", "testdata", "latency", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var mu sync.Mutex
	body := read("vllm-1.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	b, clock := chatBuilder(t, srv)
	var store tenant.Store
	reg := register(t, &store, "tenant")

	ctx := context.Background()
	b.Refresh(ctx) // the baseline
	mu.Lock()
	body = read("vllm-2.txt")
	mu.Unlock()
	clock.Advance(15 * time.Second)
	b.Refresh(ctx)
	store.Store(b.Build(nil, gpu.SamplerStats{}))

	// By hand, model_name="llama" only, second scrape minus the first
	// (cumulative): le=0.1: 50, le=0.25: 200, le=0.5: 260, le=1: 299,
	// count 300, sum 70.
	//   p50: rank 150 in (0.1,0.25]: 0.1 + 0.15*(150-50)/(200-50) = 0.2
	//   p90: rank 270 in (0.5,1]:    0.5 + 0.5*(270-260)/(299-260) = 0.5 + 5/39
	//   p99: rank 297 in (0.5,1]:    0.5 + 0.5*(297-260)/(299-260) = 0.5 + 18.5/39
	//   good at 0.3 s, in (0.25,0.5]: 200 + (260-200)*(0.3-0.25)/0.25 = 212
	//   attainment 212/300, mean 70/300
	want := map[string]float64{
		`vgpu_tenant_request_latency_seconds{q="0.5",tenant="chat"}`:  0.2,
		`vgpu_tenant_request_latency_seconds{q="0.9",tenant="chat"}`:  0.5 + 5.0/39,
		`vgpu_tenant_request_latency_seconds{q="0.99",tenant="chat"}`: 0.5 + 18.5/39,
		`vgpu_tenant_requests_total{tenant="chat"}`:                   300,
		`vgpu_tenant_slo_good_requests_total{tenant="chat"}`:          212,
		`vgpu_tenant_slo_attainment_ratio{tenant="chat"}`:             212.0 / 300,
		`vgpu_tenant_request_latency_mean_seconds{tenant="chat"}`:     70.0 / 300,
		`vgpu_tenant_slo_window_requests{tenant="chat"}`:              300,
		`vgpu_tenant_slo_target_seconds{q="0.99",tenant="chat"}`:      0.3,
		`vgpu_tenant_latency_source_up{tenant="chat"}`:                1,
	}
	got := gathered(t, reg)
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s not served", k)
			continue
		}
		if math.Abs(g-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
}

// gathered is what reg serves, each gauge and counter by its name and
// labels: `name{label="value",...}`.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					k += ","
				}
				k += l.GetName() + `="` + l.GetValue() + `"`
			}
			k += "}"
			switch {
			case m.GetGauge() != nil:
				got[k] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[k] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}

// TestLatencySourceUpAtFirstRead: vgpu_tenant_latency_source_up is absent
// until the tenant's latency source is first read (a source not read yet is
// not down), as are the figures of its empty window, while its counters
// are served at 0 from the start; from the first read, whether it answered
// or failed, it says how the last read went.
func TestLatencySourceUpAtFirstRead(t *testing.T) {
	const (
		up     = `vgpu_tenant_latency_source_up{tenant="chat"}`
		errs   = `vgpu_tenant_latency_source_scrape_errors_total{tenant="chat"}`
		reqs   = `vgpu_tenant_requests_total{tenant="chat"}`
		good   = `vgpu_tenant_slo_good_requests_total{tenant="chat"}`
		target = `vgpu_tenant_slo_target_seconds{q="0.99",tenant="chat"}`
		att    = `vgpu_tenant_slo_attainment_ratio{tenant="chat"}`
		p99    = `vgpu_tenant_request_latency_seconds{q="0.99",tenant="chat"}`
	)
	tests := []struct {
		name   string
		status int                // the source's answer to the read; 0: not read
		want   map[string]float64 // the series of the tenant's SLO listed, served with these values
		absent []string
	}{
		{"not read yet", 0, map[string]float64{errs: 0, reqs: 0, good: 0, target: 0.3}, []string{up, att, p99}},
		{"the first read failed", http.StatusInternalServerError, map[string]float64{up: 0, errs: 1, reqs: 0, good: 0, target: 0.3}, []string{att, p99}},
		{"the first read answered", http.StatusOK, map[string]float64{up: 1, errs: 0, reqs: 0, good: 0, target: 0.3}, []string{att, p99}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "latency", "testdata", "latency", "vllm-1.txt"))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			b, _ := chatBuilder(t, srv)
			var store tenant.Store
			reg := register(t, &store, "tenant")
			if tc.status != 0 {
				b.Refresh(context.Background())
			}
			store.Store(b.Build(nil, gpu.SamplerStats{}))
			got := gathered(t, reg)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (served %v), want %v", k, g, ok, v)
				}
			}
			for _, k := range tc.absent {
				if g, ok := got[k]; ok {
					t.Errorf("%s = %v, want it absent", k, g)
				}
			}
		})
	}
}

// chatBuilder is the tenant builder of one latency tenant, chat (p99 <=
// 300 ms), whose source is srv's vLLM end-to-end histogram of model
// llama, on a manual clock.
func chatBuilder(t *testing.T, srv *httptest.Server) (*tenant.Builder, *gpu.ManualClock) {
	t.Helper()
	cfg, err := tenant.ParseConfig("t.yaml", []byte(`tenants:
  - name: chat
    class: latency
    selectors: [{executable: vllm}]
    slo: {quantile: 0.99, target: 300ms}
    latency_source: {url: "`+srv.URL+`/metrics", preset: vllm-e2e, matchers: {model_name: llama}}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, HTTPClient: srv.Client()})})
	if err != nil {
		t.Fatal(err)
	}
	return b, clock
}
