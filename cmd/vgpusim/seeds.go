package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
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

// stat is a figure's mean and sample standard deviation over seeds.
type stat struct{ vals []float64 }

func (s *stat) add(v float64) { s.vals = append(s.vals, v) }

func (s stat) String() string {
	if len(s.vals) == 0 {
		return "-"
	}
	var sum float64
	for _, v := range s.vals {
		sum += v
	}
	mean := sum / float64(len(s.vals))
	var ss float64
	for _, v := range s.vals {
		ss += (v - mean) * (v - mean)
	}
	sd := 0.0
	if len(s.vals) > 1 {
		sd = math.Sqrt(ss / float64(len(s.vals)-1))
	}
	return fmt.Sprintf("%s ± %s", strconv.FormatFloat(mean, 'g', 3, 64), strconv.FormatFloat(sd, 'g', 3, 64))
}

// runSeeds runs the scenario once per seed and prints each run's headline
// and the mean ± standard deviation of every figure over the runs. With
// --out each run's files go into <out>/seed-<N>.
func runSeeds(ctx context.Context, cfg runConfig, count int, list []int64, stdout io.Writer) error {
	var sums []report.Summary
	var rates []changeRate
	if list != nil && cfg.SeedSet {
		return fmt.Errorf("--seed %d and a --seeds list: give the seeds in one of them", cfg.Seed)
	}
	if list == nil {
		base := cfg.Seed
		if !cfg.SeedSet {
			var err error
			if base, err = scenarioSeed(cfg); err != nil {
				return err
			}
		}
		for i := range count {
			list = append(list, base+int64(i))
		}
	}
	for _, seed := range list {
		res, s, rate, err := runSeed(ctx, cfg, seed)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		if cfg.Out != "" {
			dir := filepath.Join(cfg.Out, "seed-"+strconv.FormatInt(seed, 10))
			if _, err := writeRun(dir, res, cfg.Format); err != nil {
				return err
			}
		}
		sums = append(sums, s)
		rates = append(rates, rate)
		fmt.Fprintf(stdout, "seed %d: SLOs met %d of %d, energy %s J\n", seed, s.SLOsMet, s.SLOsHeld, strconv.FormatFloat(s.EnergyJ, 'g', 3, 64))
		if res.plan != nil {
			writePlan(stdout, res.sc, res.plan)
		}
	}
	return writeSeedStats(stdout, cfg, sums, rates)
}

// scenarioSeed is the seed the scenario names.
// runSeed runs cfg on seed: the run, its summary and how often its policy
// changed a setting.
func runSeed(ctx context.Context, cfg runConfig, seed int64) (*result, report.Summary, changeRate, error) {
	cfg.SeedSet, cfg.Seed = true, seed
	res, err := simulate(ctx, cfg)
	if err != nil {
		return nil, report.Summary{}, changeRate{}, err
	}
	s := res.rec.Summary()
	return res, s, changesPerMinute(res.decisions, s), nil
}

func scenarioSeed(cfg runConfig) (int64, error) {
	sc, _, cleanup, err := loadScenario(cfg.Scenario)
	if err != nil {
		return 0, err
	}
	cleanup()
	return sc.Seed, nil
}

// changeRate is how often a run's policy changed a setting: applied
// changes per minute per GPU, over the host and on its busiest GPU.
type changeRate struct{ mean, max float64 }

func changesPerMinute(decs []tuner.Decision, s report.Summary) changeRate {
	minutes := s.Seconds / 60
	if minutes <= 0 || len(s.GPUs) == 0 {
		return changeRate{}
	}
	by := map[string]int{}
	n := 0
	for _, d := range decs {
		if d.Applied {
			by[d.GPU]++
			n++
		}
	}
	r := changeRate{mean: float64(n) / minutes / float64(len(s.GPUs))}
	for _, c := range by {
		r.max = max(r.max, float64(c)/minutes)
	}
	return r
}

func writeSeedStats(w io.Writer, cfg runConfig, sums []report.Summary, rates []changeRate) error {
	type acc struct {
		att, slack, p99, rps, work, good stat
		met, held                        int
	}
	var order []string
	by := map[string]*acc{}
	var met, energy, held stat
	for _, s := range sums {
		met.add(float64(s.SLOsMet))
		energy.add(s.EnergyJ)
		held.add(s.HeldFraction * 100)
		for _, t := range s.Tenants {
			a := by[t.Tenant]
			if a == nil {
				a = &acc{}
				by[t.Tenant] = a
				order = append(order, t.Tenant)
			}
			if t.Attainment != nil {
				a.att.add(*t.Attainment * 100)
			}
			if t.Slack != nil {
				a.slack.add(*t.Slack)
			}
			if t.P99 != nil {
				a.p99.add(*t.P99)
			}
			a.rps.add(t.Throughput)
			a.work.add(t.WorkRate)
			a.good.add(t.Goodput)
			if t.SLOMet != nil {
				a.held++
				if *t.SLOMet {
					a.met++
				}
			}
		}
	}
	fmt.Fprintf(w, "\nscenario %s, policy %s, %d seeds: mean ± standard deviation\n\n", sums[0].Meta.Scenario, cfg.Policy, len(sums))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tATTAINMENT %\tSLO MET\tSLACK\tP99 (s)\tREQ/S\tWORK/S\tGOODPUT/S")
	for _, name := range order {
		a := by[name]
		metCol := "-"
		if a.held > 0 {
			metCol = fmt.Sprintf("%d of %d", a.met, a.held)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, a.att, metCol, a.slack, a.p99, a.rps, a.work, a.good)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var mean, most stat
	for _, r := range rates {
		mean.add(r.mean)
		most.add(r.max)
	}
	_, err := fmt.Fprintf(w, "\nSLOs met: %s; SLOs held in %s %% of the GPU-minutes; energy: %s J\nchanges applied per minute per GPU: %s (busiest GPU: %s)\n", met, held, energy, mean, most)
	return err
}
