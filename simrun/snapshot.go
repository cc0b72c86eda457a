package simrun

import (
	"context"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Snapshots samples a host's simulator and turns the readings into the
// snapshot a policy sees, with the same tenant attribution and latency
// sources the exporter uses (sim://<app> sources are read from the
// simulator), scraping the latency sources once per scrape interval of
// the tenants file. Run and the oracle's replays take their policies'
// snapshots here.
type Snapshots struct {
	b          *tenant.Builder
	sampler    *gpu.Sampler
	clock      gpu.Clock
	interval   time.Duration
	lastScrape time.Time
}

// NewSnapshots returns the snapshots of h, sampled every step.
func NewSnapshots(h *Host, step time.Duration) *Snapshots {
	return &Snapshots{b: h.Builder, sampler: gpu.NewSampler(h.Sim, h.Clock, step, nil),
		clock: h.Clock, interval: h.Config.Defaults.ScrapeInterval}
}

// Take samples the simulator now, scrapes the latency sources when a
// scrape interval has passed and returns the snapshot.
func (s *Snapshots) Take(ctx context.Context) (*tenant.Snapshot, error) {
	if err := s.sampler.SampleOnce(ctx); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	if s.lastScrape.IsZero() || now.Sub(s.lastScrape) >= s.interval {
		s.b.Refresh(ctx)
		s.lastScrape = now
	}
	return s.b.Build(s.sampler.Latest(), s.sampler.Stats()), nil
}
