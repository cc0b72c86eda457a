package main

import (
	"cmp"
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
	if cfg.Out != "" {
		if err := checkSeedsOut(cfg, len(seeds)); err != nil {
			return err
		}
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

// The files a --seeds run writes into --out, estimated before the first
// run and bounded (docs/vgpusim.md, Limits): a typo in --seeds must not
// fill the disk. Measured on 6 h runs of one GPU, alone and with a
// tenant, a row of the series (a tenant's or a GPU's step) takes 59 and
// 83 bytes in CSV, 171 and 232 in JSON, with names of up to rowNameBytes
// (a tenant's of a few bytes, a GPU's UUID of 40); a run's plots and the
// rest under 150 kB. Longer names (a tenant's up to 253 bytes, a UUID up
// to 95) add what a row's names average beyond rowNameBytes. A run at the
// limit on its rows (4,194,304) is so, by the estimate, 420 MB in CSV and
// 1 GB in JSON, with short names; with the longest, about 1 GB more.
const (
	csvRowBytes      = 100
	rowNameBytes     = 40
	jsonRowBytes     = 250
	runFileBytes     = 200 << 10
	maxSeedsOutBytes = 32 << 30
)

// checkSeedsOut returns an error when seeds runs of cfg would write more
// than maxSeedsOutBytes into cfg.Out, by the estimate.
func checkSeedsOut(cfg runConfig, seeds int) error {
	rows, names, err := cfg.SeriesSize()
	if err != nil {
		return err
	}
	perRow := int64(csvRowBytes)
	if cfg.Format == report.FormatJSON {
		perRow = jsonRowBytes
	}
	perRow += max(0, names/max(rows, 1)-rowNameBytes)
	if est := int64(seeds) * (rows*perRow + runFileBytes); est > maxSeedsOutBytes {
		return fmt.Errorf("--seeds (%d runs) with --out %s: an estimated %.1f GiB of files (each run %d rows, about %d bytes a row in %s), more than the %d GiB a --seeds run writes; give fewer seeds or a shorter --duration, or leave --out out",
			seeds, cfg.Out, float64(est)/(1<<30), rows, perRow, cmp.Or(cfg.Format, report.FormatCSV), maxSeedsOutBytes>>30)
	}
	return nil
}
