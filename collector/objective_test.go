package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestSLOObjectiveRatio: the objective q of a tenant's SLO is served as a
// value beside the target's q label, whatever q is (the mixin's burn rates
// read it); a tenant without a target has neither.
func TestSLOObjectiveRatio(t *testing.T) {
	slo := func(name string, q, target float64) tenant.SLOStatus {
		return tenant.SLOStatus{Tenant: name, Status: latency.Status{Quantile: q, TargetSeconds: target}}
	}
	snap := &tenant.Snapshot{SLOs: []tenant.SLOStatus{
		slo("chat", 0.99, 0.5),
		slo("odd", 0.97, 2),
		slo("strict", 0.9995, 0.25),
		slo("plain", 0, 0),  // quantiles only: no objective
		slo("chat", 0.5, 1), // reported twice: skipped
	}}
	want := `
# HELP vgpu_tenant_slo_objective_ratio The tenant's latency objective q as a value: the fraction of requests that must complete within vgpu_tenant_slo_target_seconds; 1 - q is the error budget.
# TYPE vgpu_tenant_slo_objective_ratio gauge
vgpu_tenant_slo_objective_ratio{tenant="chat"} 0.99
vgpu_tenant_slo_objective_ratio{tenant="odd"} 0.97
vgpu_tenant_slo_objective_ratio{tenant="strict"} 0.9995
# HELP vgpu_tenant_slo_target_seconds The tenant's latency objective: a fraction q of requests completes within this time.
# TYPE vgpu_tenant_slo_target_seconds gauge
vgpu_tenant_slo_target_seconds{q="0.99",tenant="chat"} 0.5
vgpu_tenant_slo_target_seconds{q="0.97",tenant="odd"} 2
vgpu_tenant_slo_target_seconds{q="0.9995",tenant="strict"} 0.25
`
	if err := testutil.CollectAndCompare(newExporter(t, snap, "tenant"), strings.NewReader(want),
		"vgpu_tenant_slo_objective_ratio", "vgpu_tenant_slo_target_seconds"); err != nil {
		t.Error(err)
	}
}
