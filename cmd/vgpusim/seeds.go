package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
)

// parseSeeds parses --seeds: a count N (the scenario's seed and the N-1
// after it) or a comma-separated list of non-zero seeds.
func parseSeeds(v string) (count int, list []int64, err error) {
	if !strings.Contains(v, ",") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("--seeds %q: want a count (3) or a list of non-zero seeds (1,2,3)", v)
		}
		return n, nil, nil
	}
	for _, f := range strings.Split(v, ",") {
		s, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || s == 0 {
			return 0, nil, fmt.Errorf("--seeds %q: %q is not a non-zero integer", v, f)
		}
		list = append(list, s)
	}
	return len(list), list, nil
}

// parseSeedRange parses the seeds of `vgpusim tables`: a range A-B, a
// single seed or a comma-separated list.
func parseSeedRange(v string) ([]int64, error) {
	if a, b, ok := strings.Cut(v, "-"); ok && a != "" {
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || lo < 1 || hi < lo {
			return nil, fmt.Errorf("--seeds %q: want a range of positive seeds such as 4-6", v)
		}
		var out []int64
		for s := lo; s <= hi; s++ {
			out = append(out, s)
		}
		return out, nil
	}
	if !strings.Contains(v, ",") {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s == 0 {
			return nil, fmt.Errorf("--seeds %q: want a range (4-6), a seed or a list (1,5,9)", v)
		}
		return []int64{s}, nil
	}
	_, list, err := parseSeeds(v)
	return list, err
}

// parseTableFlags parses the flags of `vgpusim tables` into o.
func parseTableFlags(o *table.Options, seeds, policies, duration string) error {
	var err error
	if o.Seeds, err = parseSeedRange(seeds); err != nil {
		return err
	}
	o.Policies = strings.Split(policies, ",")
	if duration != "" {
		if o.Run.Duration, err = time.ParseDuration(duration); err != nil || o.Run.Duration < 0 {
			return fmt.Errorf("--duration %q: want a duration such as 90s, 10m or 1h", duration)
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
