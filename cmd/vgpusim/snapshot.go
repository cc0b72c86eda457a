package main

import (
	"context"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// snapshotter turns the sampler's latest readings into the snapshot the
// policy sees, with the same tenant attribution and latency sources the
// exporter uses (sim://<app> sources are read from the simulator).
type snapshotter struct {
	b          *tenant.Builder
	clock      gpu.Clock
	interval   time.Duration
	lastScrape time.Time
}

// newSnapshotter loads the tenants file (none: everything is unassigned)
// and builds snapshots on clock. Process facts the readings lack are never
// read from this host: the builder gets no process facts reader.
func newSnapshotter(tenantsFile string, clock gpu.Clock, app gpu.AppMetricsSource) (*snapshotter, error) {
	cfg := tenant.EmptyConfig()
	if tenantsFile != "" {
		c, err := tenant.LoadConfig(tenantsFile)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{
		Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}),
	})
	if err != nil {
		return nil, err
	}
	return &snapshotter{b: b, clock: clock, interval: cfg.Defaults.ScrapeInterval}, nil
}

// build scrapes the latency sources when a scrape interval has passed and
// returns the snapshot of the sampler's latest readings.
func (s *snapshotter) build(ctx context.Context, sm *gpu.Sampler) *tenant.Snapshot {
	now := s.clock.Now()
	if s.lastScrape.IsZero() || now.Sub(s.lastScrape) >= s.interval {
		s.b.Refresh(ctx)
		s.lastScrape = now
	}
	return s.b.Build(sm.Latest(), sm.Stats())
}
