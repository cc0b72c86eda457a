package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsSLOComparisonManyHosts: the query docs/metrics.md gives to
// compare a tenant's latency with its objective runs, evaluated by
// promtool, where several hosts serve the tenant (its pods on two hosts,
// or every host under --tenants.latency-sources=all): each host's
// latency is compared with that host's target, not refused for the
// duplicate series of the tenant's target. chat's 0.99-quantile is over
// its 200 ms on h1 only.
func TestDocsSLOComparisonManyHosts(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var query string
	for _, q := range docQueries(string(text)) {
		if strings.Contains(q, "vgpu_tenant_request_latency_seconds") && strings.Contains(q, "vgpu_tenant_slo_target_seconds") {
			query = q
		}
	}
	if query == "" {
		t.Fatal("docs/metrics.md quotes no query comparing vgpu_tenant_request_latency_seconds with vgpu_tenant_slo_target_seconds")
	}
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_tenant_request_latency_seconds{job="vgpu",instance="h1:9949",tenant="chat",q="0.99"}'
        values: '0.3x5'
      - series: 'vgpu_tenant_slo_target_seconds{job="vgpu",instance="h1:9949",tenant="chat",q="0.99"}'
        values: '0.2x5'
      - series: 'vgpu_tenant_request_latency_seconds{job="vgpu",instance="h2:9949",tenant="chat",q="0.99"}'
        values: '0.1x5'
      - series: 'vgpu_tenant_slo_target_seconds{job="vgpu",instance="h2:9949",tenant="chat",q="0.99"}'
        values: '0.2x5'
      - series: 'vgpu_tenant_request_latency_seconds{job="vgpu",instance="h1:9949",tenant="chat",q="0.5"}'
        values: '0.3x5'
    promql_expr_test:
      - expr: %q
        eval_time: 4m
        exp_samples:
          - labels: 'vgpu_tenant_request_latency_seconds{job="vgpu",instance="h1:9949",tenant="chat",q="0.99"}'
            value: 0.3
`, query))
}
