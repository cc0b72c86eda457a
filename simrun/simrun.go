// Package simrun drives the simulator in virtual time: it loads a
// scenario, starts the simulator and a tenant.Builder over it on one
// manual clock (Host), and runs a policy step by step, sampling,
// attributing and recording each window of ground truth (Run). vgpusim,
// the oracle's replays, the scenario tables and the tests that drive a
// simulated host all start their simulators here.
package simrun

import (
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Start is the virtual time every run starts at, so that runs with the
// same seed give the same bytes.
var Start = sim.DefaultStart

// NewSimulator starts a simulator of sc at Start; seed 0 keeps the
// scenario's seed.
func NewSimulator(sc *sim.Scenario, seed int64) (*sim.Simulator, error) {
	return sim.New(sc, sim.Options{Seed: seed, Start: Start})
}

// Host is a simulator and a tenant.Builder over it on one manual clock.
// The builder's sim:// latency sources read the simulator; process facts
// the readings lack are never read from this host (the builder has no
// process facts reader).
type Host struct {
	Scenario *sim.Scenario
	Config   *tenant.Config
	Sim      *sim.Simulator
	Clock    *gpu.ManualClock
	Builder  *tenant.Builder
}

// NewHost starts a simulator of sc (seed 0: the scenario's) at Start and a
// builder of cfg (nil: every process unassigned) on one manual clock.
func NewHost(sc *sim.Scenario, cfg *tenant.Config, seed int64) (*Host, error) {
	return newHost(sc, cfg, seed, 0)
}

// newHost is NewHost whose simulator's windows keep at most maxLat
// latencies a tenant (0: the simulator's default).
func newHost(sc *sim.Scenario, cfg *tenant.Config, seed int64, maxLat int) (*Host, error) {
	if cfg == nil {
		cfg = tenant.EmptyConfig()
	}
	s, err := sim.New(sc, sim.Options{Seed: seed, Start: Start, WindowLatencies: maxLat})
	if err != nil {
		return nil, err
	}
	clock := gpu.NewManualClock(s.Now())
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{
		Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: s}),
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return &Host{Scenario: sc, Config: cfg, Sim: s, Clock: clock, Builder: b}, nil
}

// AdvanceTo advances the simulator and the clock to at.
func (h *Host) AdvanceTo(at time.Time) {
	h.Sim.AdvanceTo(at)
	h.Clock.Set(at)
}

// Close stops the simulator.
func (h *Host) Close() { h.Sim.Close() }
