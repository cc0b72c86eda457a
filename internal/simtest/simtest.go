// Package simtest runs a simulated host through tenant.Builder for tests:
// a simrun.Host (a scenario and its tenants file, the simulator, a manual
// clock and a builder whose sim:// latency sources read the simulator)
// whose problems fail the test. Only test files import it.
package simtest

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Host is a simrun.Host that fails its test on a problem.
type Host struct {
	*simrun.Host
	t testing.TB
}

// New loads the scenario and tenants files and starts the simulator and
// the builder at the scenario's start; a problem fails t.
func New(t testing.TB, scenario, tenants string) *Host {
	t.Helper()
	sc, err := sim.LoadScenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.LoadConfig(tenants)
	if err != nil {
		t.Fatal(err)
	}
	return Start(t, sc, cfg)
}

// Start starts a simulator of sc and a builder of cfg reading its latency
// sources from the simulator, both at the scenario's start on one manual
// clock; a problem fails t.
func Start(t testing.TB, sc *sim.Scenario, cfg *tenant.Config) *Host {
	t.Helper()
	h, err := simrun.NewHost(sc, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &Host{Host: h, t: t}
}

// Sample advances the simulator and the clock by d and returns the
// readings at the new time; a sample error fails the test.
func (h *Host) Sample(ctx context.Context, d time.Duration) *gpu.Readings {
	h.t.Helper()
	h.AdvanceTo(h.Sim.Now().Add(d))
	r, err := h.Sim.Sample(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// Build refreshes the builder's sources (the sim:// scrapes) in the
// caller's goroutine and attributes r.
func (h *Host) Build(ctx context.Context, r *gpu.Readings) *tenant.Snapshot {
	h.Builder.Refresh(ctx)
	return h.Builder.Build(r, gpu.SamplerStats{})
}
