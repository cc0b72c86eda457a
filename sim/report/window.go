package report

import "github.com/vgpu-exporter/vgpu_exporter/sim"

// The simulator's ground truth, as this package consumes it.
type (
	// WindowStats is the ground truth of one window (sim.WindowStats).
	WindowStats = sim.WindowStats
	// TenantWindow is one tenant's ground truth over a window.
	TenantWindow = sim.TenantWindow
	// GPUWindow is one GPU's ground truth over a window.
	GPUWindow = sim.GPUWindow
)
