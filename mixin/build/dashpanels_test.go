package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDashboardVariablesReadTheSelector: every query variable of every
// dashboard reads only the series of vgpuExporterSelector, as the
// recording rules the overview reads do: a tenant, host or GPU of another
// job (another exporter serving a series of the same name) is not offered.
func TestDashboardVariablesReadTheSelector(t *testing.T) {
	const sel = `job="gpu-nodes"`
	files, err := generate(mixinDir, fmt.Sprintf("{vgpuExporterSelector: '%s'}", sel))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range sortedNames(files) {
		if !strings.HasPrefix(name, "dashboards/") {
			continue
		}
		var d struct {
			Templating struct {
				List []struct {
					Name, Type, Definition string
				}
			}
		}
		if err := json.Unmarshal(files[name], &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			n++
			if !strings.Contains(v.Definition, sel) {
				t.Errorf("%s: variable $%s reads %s, without the selector %s", name, v.Name, v.Definition, sel)
			}
		}
	}
	if n == 0 {
		t.Fatal("no query variables")
	}
}

// eventCounters are the counters of events the dashboards count per
// interval.
var eventCounters = []string{
	"vgpu_gpu_events_total", "vgpu_gpu_nvlink_errors_total", "vgpu_gpu_pcie_replays_total",
	"vgpu_tuner_actions_total", "vgpu_tuner_reverts_total", "vgpu_tuner_guard_refusals_total",
	"vgpu_tuner_pause_freeze_failures_total", "vgpu_tuner_restores_total",
	"vgpu_tuner_restore_failures_total", "vgpu_tuner_journal_errors_total",
}

// panelExprs returns the target expressions of the panel titled title of
// the dashboard file, its variables substituted as dashboardVars does.
func panelExprs(t *testing.T, file, title string) []string {
	t.Helper()
	return panelExprsEvery(t, file, title, "1m")
}

// panelExprsEvery is panelExprs with $__interval (the query's step) at
// interval.
func panelExprsEvery(t *testing.T, file, title, interval string) []string {
	t.Helper()
	panels, _ := dashboards(t)[file]["panels"].([]any)
	for _, p := range panels {
		if p, _ := p.(map[string]any); p["title"] == title {
			var out []string
			for _, e := range dashboardExprs(p) {
				out = append(out, dashboardVars.Replace(strings.ReplaceAll(e, "$__interval", interval)))
			}
			return out
		}
	}
	t.Fatalf("%s: no panel %q", file, title)
	return nil
}

// TestEventPanelsCountWholeEvents: a graph of events counts each interval's
// events whole, once, without increase()'s extrapolation (one event over
// four scrapes read 1.33) or its overlapping windows (over
// $__rate_interval, one event counted in four intervals), and says so.
// The XID panel, evaluated by promtool with $__interval at 1m on a counter
// scraped every minute, reads 1 and 2 in the intervals with 1 and 2 events,
// nothing elsewhere; an exporter's restart (the counter back at 0) reads
// nothing.
func TestEventPanelsCountWholeEvents(t *testing.T) {
	all := dashboards(t)
	n := 0
	for _, name := range sortedNames(all) {
		panels, _ := all[name]["panels"].([]any)
		for _, p := range panels {
			panel, _ := p.(map[string]any)
			exprs := dashboardExprs(panel)
			if panel["type"] != "timeseries" || !slices.ContainsFunc(exprs, func(e string) bool {
				return slices.ContainsFunc(eventCounters, func(c string) bool { return strings.Contains(e, c) })
			}) {
				continue
			}
			n++
			for _, e := range exprs {
				if strings.Contains(e, "increase(") || strings.Contains(e, "rate(") || !strings.Contains(e, "[$__interval:") {
					t.Errorf("%s: panel %q: %q does not sum the rises over each interval ([$__interval:...])", name, panel["title"], e)
				}
			}
			if d, _ := panel["description"].(string); !strings.Contains(d, "Whole counts") || !strings.Contains(d, "restart") {
				t.Errorf("%s: panel %q: the description does not say how it counts, restarts included: %q", name, panel["title"], d)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d panels count events, want 8 or more", n)
	}
	xid := panelExprs(t, "dashboards/vgpu-gpu.json", "XID errors")
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_events_total{instance="h", gpu="0", kind="xid", code="79"}'
        values: '0 0 1 1 3 3 0 1'
    promql_expr_test:
      - {expr: %[1]q, eval_time: 1m, exp_samples: []}
      - expr: %[1]q
        eval_time: 2m
        exp_samples: [{labels: '{instance="h", gpu="0", kind="xid", code="79"}', value: 1}]
      - {expr: %[1]q, eval_time: 3m, exp_samples: []}
      - expr: %[1]q
        eval_time: 4m
        exp_samples: [{labels: '{instance="h", gpu="0", kind="xid", code="79"}', value: 2}]
      - {expr: %[1]q, eval_time: 6m, exp_samples: []}
      - expr: %[1]q
        eval_time: 7m
        exp_samples: [{labels: '{instance="h", gpu="0", kind="xid", code="79"}', value: 1}]
`, xid[0]))
}

// TestEventPanelsCountAcrossRestarts: the events of an interval in which
// the exporter restarted (its counters start again from 0) are counted,
// those before the restart and those after it, up to 5m without a reading;
// a counter's first value (a hardware counter found at 500) counts none. Evaluated by promtool on
// counters scraped every minute:
//   - a 7-day graph (1h step): 2 XIDs, a restart, 4 XIDs in one hour read 6;
//   - restores at 3, a restart, 2 after it (the restore at the start): 2,
//     also where the restart made a scrape fail (the series marked stale;
//     the minute of the stale mark reads 0: the step's points before it,
//     eventDeltaStep being shorter than this scrape, read the value before);
//     after 6m without a reading the first value counts none;
//   - NVLink errors 1 -> 5, a restart, 0 -> 3 in one 5m step: 7;
//   - an NVLink counter appearing at 500, then 501: nothing, then 1, and 1
//     over a 5m step that holds its first value.
func TestEventPanelsCountAcrossRestarts(t *testing.T) {
	const xidLabels = `{instance="h", gpu="0", kind="xid", code="79"}`
	const linkLabels = `{instance="h", gpu="0", link="0", type="crc"}`
	gpu := "dashboards/vgpu-gpu.json"
	xidHour := panelExprsEvery(t, gpu, "XID errors", "1h")[0]
	restores := panelExprs(t, "dashboards/vgpu-tuner.json", "Restores and journal errors")[0]
	restoresHour := panelExprsEvery(t, "dashboards/vgpu-tuner.json", "Restores and journal errors", "1h")[0]
	nvlink := panelExprs(t, gpu, "NVLink errors and PCIe replays")[0]
	nvlink5m := panelExprsEvery(t, gpu, "NVLink errors and PCIe replays", "5m")[0]
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_events_total%[1]s'
        values: '10x60 11 12 12 0 1 2 3 4 4x52'
    promql_expr_test:
      - {expr: %[2]q, eval_time: 1h, exp_samples: []}
      - {expr: %[2]q, eval_time: 2h, exp_samples: [{labels: '%[1]s', value: 6}]}
  - interval: 1m
    input_series:
      - series: 'vgpu_tuner_restores_total{instance="h"}'
        values: '3 3 2 2'
    promql_expr_test:
      - {expr: %[3]q, eval_time: 1m, exp_samples: [{labels: '{instance="h"}', value: 0}]}
      - {expr: %[3]q, eval_time: 2m, exp_samples: [{labels: '{instance="h"}', value: 2}]}
      - {expr: %[3]q, eval_time: 3m, exp_samples: [{labels: '{instance="h"}', value: 0}]}
  - interval: 1m
    input_series:
      - series: 'vgpu_tuner_restores_total{instance="h"}'
        values: '3x30 2x30'
    promql_expr_test:
      - {expr: %[4]q, eval_time: 1h, exp_samples: [{labels: '{instance="h"}', value: 2}]}
  - interval: 1m
    input_series:
      - series: 'vgpu_tuner_restores_total{instance="h"}'
        values: '3 3 stale 2 2 3 stale stale stale stale stale stale 1'
    promql_expr_test:
      - {expr: %[3]q, eval_time: 2m, exp_samples: [{labels: '{instance="h"}', value: 0}]}
      - {expr: %[3]q, eval_time: 3m, exp_samples: [{labels: '{instance="h"}', value: 2}]}
      - {expr: %[3]q, eval_time: 5m, exp_samples: [{labels: '{instance="h"}', value: 1}]}
      - {expr: %[3]q, eval_time: 12m, exp_samples: []}
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_nvlink_errors_total%[5]s'
        values: '1 3 5 0 2 3'
    promql_expr_test:
      - {expr: %[6]q, eval_time: 5m, exp_samples: [{labels: '%[5]s', value: 7}]}
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_nvlink_errors_total%[5]s'
        values: '_ _ 500 500 501'
    promql_expr_test:
      - {expr: %[7]q, eval_time: 2m, exp_samples: []}
      - {expr: %[7]q, eval_time: 3m, exp_samples: []}
      - {expr: %[7]q, eval_time: 4m, exp_samples: [{labels: '%[5]s', value: 1}]}
      - {expr: %[6]q, eval_time: 5m, exp_samples: [{labels: '%[5]s', value: 1}]}
`, xidLabels, xidHour, restores, restoresHour, linkLabels, nvlink5m, nvlink))
}

// TestLatencyLegendNamesPercentiles: the tenant dashboard's latency panel
// names each quantile as a percentile (p99), not as the fraction of its q
// label (p0.99), keeping the series and their values as the exporter
// serves them; promtool evaluates its queries on the quantiles the
// exporter serves (0.5, 0.9, 0.99, an SLO's own 0.95 or 0.999).
func TestLatencyLegendNamesPercentiles(t *testing.T) {
	const title = "Latency quantiles and target"
	panels, _ := dashboards(t)["dashboards/vgpu-tenant.json"]["panels"].([]any)
	for _, p := range panels {
		if p, _ := p.(map[string]any); p["title"] == title {
			for _, tg := range p["targets"].([]any) {
				if l, _ := tg.(map[string]any)["legendFormat"].(string); strings.Contains(l, "{{q}}") {
					t.Errorf("legend %q writes the q label, a fraction (p0.99)", l)
				}
			}
		}
	}
	exprs := panelExprs(t, "dashboards/vgpu-tenant.json", title)
	var series, samples strings.Builder
	for _, q := range [][2]string{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}, {"0.95", "p95"}, {"0.999", "p99.9"}, {"1", "q=1"}} {
		labels := fmt.Sprintf(`__name__="vgpu_tenant_request_latency_seconds", tenant="chat", q="%s"`, q[0])
		fmt.Fprintf(&series, "      - {series: '{%s}', values: '0.25'}\n", labels)
		fmt.Fprintf(&samples, "          - {labels: '{%s, percentile=\"%s\"}', value: 0.25}\n", labels, q[1])
	}
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
%s      - {series: 'vgpu_tenant_slo_target_seconds{tenant="chat", q="0.99"}', values: '0.5'}
    promql_expr_test:
      - expr: %q
        eval_time: 0m
        exp_samples:
%s      - expr: %q
        eval_time: 0m
        exp_samples: [{labels: '{__name__="vgpu_tenant_slo_target_seconds", tenant="chat", q="0.99", percentile="p99"}', value: 0.5}]
`, series.String(), exprs[0], samples.String(), exprs[1]))
}

// runExprTest runs promtool test rules on the unit test file body (no rule
// files: promql_expr_test only).
func runExprTest(t *testing.T, body string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte("rule_files: []\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "test", "rules", "test.yaml")
}

// TestRequestsPanelCountsOneSource: the tenant dashboard's Requests panel
// reads a tenant's requests once where several exporters serve the counts
// of its one latency source (the hosts it ran on during its SLO window
// after a move, or every host under --tenants.latency-sources=all): chat
// serves 10 requests a second, served by h1 and h2 alike, reads 10, not
// 20; a tenant served by one host reads its own rate.
func TestRequestsPanelCountsOneSource(t *testing.T) {
	exprs := panelExprs(t, "dashboards/vgpu-tenant.json", "Requests")
	if len(exprs) != 1 {
		t.Fatalf("Requests panel: %d queries, want 1", len(exprs))
	}
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - {series: 'vgpu_tenant_requests_total{job="vgpu",instance="h1:9949",cluster="c1",tenant="chat"}', values: '0+600x30'}
      - {series: 'vgpu_tenant_requests_total{job="vgpu",instance="h2:9949",cluster="c1",tenant="chat"}', values: '0+600x30'}
      - {series: 'vgpu_tenant_requests_total{job="vgpu",instance="h2:9949",cluster="c1",tenant="search"}', values: '0+120x30'}
    promql_expr_test:
      - expr: %q
        eval_time: 20m
        exp_samples:
          - {labels: '{tenant="chat"}', value: 10}
          - {labels: '{tenant="search"}', value: 2}
`, exprs[0]))
}
