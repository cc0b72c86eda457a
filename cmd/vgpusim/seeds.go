package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
)

// parseTableFlags parses the flags of `vgpusim tables` into o.
func parseTableFlags(o *table.Options, seeds, policies, duration string) error {
	var err error
	if o.Seeds, err = simrun.ParseSeedRange(seeds); err != nil {
		return err
	}
	if o.Policies, err = table.ParsePolicies(policies); err != nil {
		return err
	}
	if duration != "" {
		if o.Run.Duration, err = time.ParseDuration(duration); err != nil || o.Run.Duration < 0 {
			return fmt.Errorf("--duration %q: want a duration such as 90s, 10m or 1h", duration)
		}
		if o.Run.Duration == 0 {
			return errZeroDuration(duration)
		}
	}
	return nil
}

// runSeeds runs the scenario once per seed and prints each run's headline
// and the mean ± standard deviation of every figure over the runs. With
// --out each run's files go into <out>/seed-<N>.
func runSeeds(ctx context.Context, cfg runConfig, count int, list []int64, stdout io.Writer) error {
	seeds, err := simrun.Seeds(cfg.Config, count, list)
	if err != nil {
		return err
	}
	var sums []report.Summary
	var rates []simrun.ChangeRate
	for _, seed := range seeds {
		res, s, rate, err := simrun.RunSeed(ctx, cfg.Config, seed)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		if cfg.Out != "" {
			dir := filepath.Join(cfg.Out, "seed-"+strconv.FormatInt(seed, 10))
			if _, err := res.WriteFiles(dir, cfg.Format); err != nil {
				return err
			}
		}
		sums = append(sums, s)
		rates = append(rates, rate)
		fmt.Fprintf(stdout, "seed %d: SLOs met %d of %d, energy %s\n", seed, s.SLOsMet, s.SLOsHeld, report.FormatEnergy(s.EnergyJ))
		if res.Plan != nil {
			res.Plan.Write(stdout)
		}
	}
	return table.WriteSeedStats(stdout, cfg.Policy, sums, rates)
}
