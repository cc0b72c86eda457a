package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestChargebackTablesHaveIdleRow: every chargeback table that gives the
// tenants' energy or cost gives, in the same query, the row of what no
// tenant is charged for (the idle energy, the idle cost), so that an
// exported table adds up to the GPUs' energy and cost (docs/metering.md,
// "Chargeback").
func TestChargebackTablesHaveIdleRow(t *testing.T) {
	d := dashboards(t)["dashboards/vgpu-chargeback.json"]
	if d == nil {
		t.Fatal("no chargeback dashboard")
	}
	pairs := [][2]string{
		{"vgpu_tenant_energy_joules_total", "vgpu_tenant_idle_energy_joules_total"},
		{"vgpu_tenant_cost_total", "vgpu_tenant_idle_cost_total"},
	}
	checked := 0
	panels, _ := d["panels"].([]any)
	for _, p := range panels {
		panel, _ := p.(map[string]any)
		if panel["type"] != "table" {
			continue
		}
		for _, e := range dashboardExprs(panel) {
			for _, pr := range pairs {
				if !strings.Contains(e, pr[0]+"{") {
					continue
				}
				checked++
				if !strings.Contains(e, pr[1]) || !strings.Contains(e, `"idle (no tenant)"`) {
					t.Errorf("table %q: %s has no idle (no tenant) row from %s", panel["title"], e, pr[1])
				}
			}
		}
	}
	if checked != 8 { // energy, and three cost columns, per day and per 30 days
		t.Errorf("%d chargeback table queries of the tenants' energy or cost, want 8", checked)
	}
}

// TestLongRangePanelsSayRetention: a panel of any dashboard whose query
// reads a range longer than Prometheus keeps by default (15 days) says, in
// its description, the retention it needs: over less, increase() sums
// what is kept with no sign of it.
func TestLongRangePanelsSayRetention(t *testing.T) {
	long := regexp.MustCompile(`\[(\d+)d\]`)
	checked := 0
	for name, d := range dashboards(t) {
		panels, _ := d["panels"].([]any)
		for _, p := range panels {
			panel, _ := p.(map[string]any)
			for _, e := range dashboardExprs(panel) {
				over := false
				for _, m := range long.FindAllStringSubmatch(e, -1) {
					days, _ := strconv.Atoi(m[1])
					over = over || days > 15
				}
				if !over {
					continue
				}
				checked++
				if desc, _ := panel["description"].(string); !strings.Contains(desc, "--storage.tsdb.retention.time") {
					t.Errorf("%s: panel %q reads %s, and its description does not say the retention it needs", name, panel["title"], e)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no panel reads a range over 15 days: the check checks nothing")
	}
}

// TestChargebackUnattributedMemoryPerGPU: the memory panel's "no tenant"
// series takes each GPU's tenants' memory from that GPU's used memory
// before summing, evaluated by promtool. GPU-a has 10 bytes in use, 8 of
// them tenant a's; GPU-m, a MIG GPU read without privilege, serves no
// used memory but its tenant b's 20 bytes; GPU-n, without a tenant's
// process, has 1 byte in use: 3 bytes are no tenant's, not -17.
func TestChargebackUnattributedMemoryPerGPU(t *testing.T) {
	exprs := panelExprs(t, "dashboards/vgpu-chargeback.json", "Device memory held per tenant")
	if len(exprs) != 2 {
		t.Fatalf("the memory panel has %d queries, want 2", len(exprs))
	}
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_memory_used_byte_seconds_total{job="vgpu",instance="h1:9949",cluster="c1",gpu="0",uuid="GPU-a"}'
        values: '0+600x20'
      - series: 'vgpu_tenant_memory_byte_seconds_total{job="vgpu",instance="h1:9949",cluster="c1",tenant="a",gpu="0",uuid="GPU-a"}'
        values: '0+480x20'
      - series: 'vgpu_tenant_memory_byte_seconds_total{job="vgpu",instance="h2:9949",cluster="c1",tenant="b",gpu="0",uuid="GPU-m"}'
        values: '0+1200x20'
      - series: 'vgpu_gpu_memory_used_byte_seconds_total{job="vgpu",instance="h2:9949",cluster="c1",gpu="1",uuid="GPU-n"}'
        values: '0+60x20'
    promql_expr_test:
      - expr: %q
        eval_time: 15m
        exp_samples: [{labels: '{}', value: 3}]
`, exprs[1]))
}
