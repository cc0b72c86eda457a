package simrun

import (
	"context"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// snapshotter turns the sampler's latest readings into the snapshot the
// policy sees, with the same tenant attribution and latency sources the
// exporter uses (sim://<app> sources are read from the simulator),
// scraping the latency sources once per scrape interval of the tenants
// file.
type snapshotter struct {
	b          *tenant.Builder
	clock      gpu.Clock
	interval   time.Duration
	lastScrape time.Time
}

func newSnapshotter(h *Host) *snapshotter {
	return &snapshotter{b: h.Builder, clock: h.Clock, interval: h.Config.Defaults.ScrapeInterval}
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
