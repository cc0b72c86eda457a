// Package simtest runs a simulated host through tenant.Builder for tests:
// a scenario and its tenants file, the simulator, a manual clock and a
// builder whose sim:// latency sources read the simulator. Only test files
// import it.
package simtest

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Host is a simulator and a tenant.Builder over it on one manual clock.
type Host struct {
	t        testing.TB
	Scenario *sim.Scenario
	Config   *tenant.Config
	Sim      *sim.Simulator
	Clock    *gpu.ManualClock
	Builder  *tenant.Builder
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
	s, err := sim.New(sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(s.Now())
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: s})})
	if err != nil {
		t.Fatal(err)
	}
	return &Host{t: t, Scenario: sc, Config: cfg, Sim: s, Clock: clock, Builder: b}
}

// Sample advances the simulator and the clock by d and returns the
// readings at the new time; a sample error fails the test.
func (h *Host) Sample(ctx context.Context, d time.Duration) *gpu.Readings {
	h.t.Helper()
	at := h.Sim.Now().Add(d)
	h.Sim.AdvanceTo(at)
	h.Clock.Set(at)
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
