package main

import (
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
