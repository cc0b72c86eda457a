package report

import "time"

// The ground truth the simulator reports per window (the contract of
// sim.WindowStats), as this package consumes it.

// WindowStats is the ground truth of one window.
type WindowStats struct {
	Start, End time.Time
	Tenants    []TenantWindow
	GPUs       []GPUWindow
}

// TenantWindow is one tenant's ground truth over a window.
type TenantWindow struct {
	Tenant      string
	GPU         string
	Completed   int
	Latencies   []time.Duration // ascending
	SLOQuantile float64
	SLOTarget   time.Duration
	Good        int
	SMShare     float64
	BWShare     float64
	Work        float64
	OOMs        int
}

// GPUWindow is one GPU's ground truth over a window.
type GPUWindow struct {
	UUID       string
	Index      int
	SMActive   float64
	DRAMActive float64
	PowerW     float64
	SMClockMHz float64
}
