package simrun

import (
	"context"
	"fmt"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Seeds are the seeds of a multi-seed run: list as it is, or else count
// seeds from cfg's seed (the scenario's when cfg sets none).
func Seeds(cfg Config, count int, list []int64) ([]int64, error) {
	if list != nil && cfg.SeedSet {
		return nil, fmt.Errorf("--seed %d and a --seeds list: give the seeds in one of them", cfg.Seed)
	}
	if list != nil {
		return list, nil
	}
	base := cfg.Seed
	if !cfg.SeedSet {
		sc, _, cleanup, err := LoadScenario(cfg.Scenario)
		if err != nil {
			return nil, err
		}
		cleanup()
		base = sc.Seed
	}
	for i := range count {
		list = append(list, base+int64(i))
	}
	return list, nil
}

// RunSeed runs cfg on seed: the run, its summary and how often its policy
// changed a setting.
func RunSeed(ctx context.Context, cfg Config, seed int64) (*Result, report.Summary, ChangeRate, error) {
	cfg.SeedSet, cfg.Seed = true, seed
	res, err := Run(ctx, cfg)
	if err != nil {
		return nil, report.Summary{}, ChangeRate{}, err
	}
	s := res.Recorder.Summary()
	return res, s, ChangesPerMinute(res.Decisions, s), nil
}

// ChangeRate is how often a run's policy changed a setting: applied
// changes per minute per GPU, over the host and on its busiest GPU.
type ChangeRate struct{ Mean, Max float64 }

// ChangesPerMinute is the change rate of decs over the run s summarizes.
func ChangesPerMinute(decs []tuner.Decision, s report.Summary) ChangeRate {
	minutes := s.Seconds / 60
	if minutes <= 0 || len(s.GPUs) == 0 {
		return ChangeRate{}
	}
	by := map[string]int{}
	n := 0
	for _, d := range decs {
		if d.Applied {
			by[d.GPU]++
			n++
		}
	}
	r := ChangeRate{Mean: float64(n) / minutes / float64(len(s.GPUs))}
	for _, c := range by {
		r.Max = max(r.Max, float64(c)/minutes)
	}
	return r
}
