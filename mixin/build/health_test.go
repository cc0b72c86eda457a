package main

import (
	"slices"
	"strings"
	"testing"
)

// gpuSeriesOffDashboard are the GPU series alerts read that the GPU
// dashboard need not show, with the reason.
var gpuSeriesOffDashboard = map[string]string{
	"vgpu_gpu_info": "its template variables read it",
	"vgpu_gpu_up":   "the fleet overview shows the GPUs down",
}

// TestGPUAlertSeriesOnGPUDashboard: every GPU series (vgpu_gpu_*) an alert
// fires on is on the GPU dashboard, so that the operator it pages finds the
// GPU's figure there (a page retirement pending a reboot, uncorrected ECC
// errors beside the rows remapped).
func TestGPUAlertSeriesOnGPUDashboard(t *testing.T) {
	d := dashboards(t)["dashboards/vgpu-gpu.json"]
	if d == nil {
		t.Fatal("no GPU dashboard")
	}
	shown := map[string]bool{}
	for _, e := range dashboardExprs(d) {
		for _, m := range metricNames(e) {
			shown[m] = true
		}
	}
	checked := 0
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		for _, m := range metricNames(r.Expr) {
			if !strings.HasPrefix(m, "vgpu_gpu_") || gpuSeriesOffDashboard[m] != "" {
				continue
			}
			checked++
			if !shown[m] {
				t.Errorf("alert %s fires on %s, which the GPU dashboard does not show", r.Alert, m)
			}
		}
	}
	if checked == 0 {
		t.Error("no alert reads a GPU series")
	}
	for m := range gpuSeriesOffDashboard {
		if !slices.ContainsFunc(allRules(t), func(r rule) bool { return r.Alert != "" && slices.Contains(metricNames(r.Expr), m) }) {
			t.Errorf("gpuSeriesOffDashboard names %s, which no alert reads", m)
		}
	}
}
