package simrun

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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
		sc, _, err := LoadScenario(cfg.Scenario)
		if err != nil {
			return nil, err
		}
		base = sc.Seed
	}
	for s := base; len(list) < count; s++ {
		// 0 is no seed to run (sim.Options.Seed 0 keeps the scenario's):
		// a count from below it passes over it, unless the scenario's own
		// seed is 0.
		if s != 0 || base == 0 {
			list = append(list, s)
		}
		if s == math.MaxInt64 && len(list) < count {
			return nil, fmt.Errorf("--seeds %d from seed %d: past the largest seed", count, base)
		}
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

// ParseSeeds parses --seeds: a count N (the scenario's seed and the N-1
// after it) or a comma-separated list of non-zero seeds.
func ParseSeeds(v string) (count int, list []int64, err error) {
	if !strings.Contains(v, ",") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("--seeds %q: want a count (3) or a list of non-zero seeds (1,2,3)", v)
		}
		if n > maxSeeds {
			return 0, nil, fmt.Errorf("--seeds %q: %d seeds, more than the %d a run takes", v, n, maxSeeds)
		}
		return n, nil, nil
	}
	for _, f := range strings.Split(v, ",") {
		s, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || s == 0 {
			return 0, nil, fmt.Errorf("--seeds %q: %q is not a non-zero integer", v, f)
		}
		if slices.Contains(list, s) {
			return 0, nil, fmt.Errorf("--seeds %q: seed %d twice (its run would count twice in the mean and deviation)", v, s)
		}
		if len(list) == maxSeeds {
			return 0, nil, fmt.Errorf("--seeds %q: more than the %d seeds a run takes", v, maxSeeds)
		}
		list = append(list, s)
	}
	return len(list), list, nil
}

// maxSeeds bounds the seeds of a run or a table: a typo must not start
// runs that would never end.
const maxSeeds = 1000

// ParseSeedRange parses the seeds of `vgpusim tables`: a range A-B, a
// single seed or a comma-separated list.
func ParseSeedRange(v string) ([]int64, error) {
	if a, b, ok := strings.Cut(v, "-"); ok && a != "" {
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || lo < 1 || hi < lo {
			return nil, fmt.Errorf("--seeds %q: want a range of positive seeds such as 4-6", v)
		}
		if hi-lo >= maxSeeds {
			return nil, fmt.Errorf("--seeds %q: %d seeds, more than the %d a table runs", v, uint64(hi-lo)+1, maxSeeds)
		}
		var out []int64
		for i := range hi - lo + 1 { // not s <= hi: it wraps at the largest int64
			out = append(out, lo+i)
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
	_, list, err := ParseSeeds(v)
	return list, err
}
