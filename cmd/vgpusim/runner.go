package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// simStart is the virtual time every run starts at, so that runs with the
// same seed give the same bytes.
var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FileDecisions is the policy decision log written into --out.
const FileDecisions = "decisions.csv"

// result is a finished run.
type result struct {
	rec       *report.Recorder
	decisions []tuner.Decision
	// plan is what the oracle found; nil for other policies
	plan *plan
	sc   *sim.Scenario
}

// simulate runs the scenario in virtual time: every step it advances the
// simulator, samples it, builds a snapshot, lets the policy act and
// records the window's ground truth.
func simulate(ctx context.Context, cfg runConfig) (*result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var pol tuner.Policy
	if cfg.Policy == oracleName && len(cfg.DisabledKnobs) > 0 {
		return nil, fmt.Errorf("--disable-knob: only a tuner policy (%s) has knobs to disable, not %q", tuner.AutotuneName, cfg.Policy)
	}
	if cfg.Policy != oracleName {
		p, err := tuner.NewPolicy(cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		if tp, ok := p.(*tuner.TunerPolicy); ok {
			for _, k := range cfg.DisabledKnobs {
				tp.Disabled = append(tp.Disabled, gpu.Knob(k))
			}
		} else if len(cfg.DisabledKnobs) > 0 {
			return nil, fmt.Errorf("--disable-knob: only a tuner policy (%s) has knobs to disable, not %q", tuner.AutotuneName, cfg.Policy)
		}
		pol = p
	}
	sc, scPath, cleanup, err := loadScenario(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	seed := sc.Seed
	if cfg.SeedSet {
		seed = cfg.Seed
	}
	dur := cfg.Duration
	if dur == 0 {
		dur = sc.Duration
	}
	if dur < cfg.Step {
		return nil, fmt.Errorf("--duration %v is shorter than one step (%v)", dur, cfg.Step)
	}
	tenantsFile := cfg.Tenants
	if tenantsFile == "" && scPath != "" && fileExists(companion(scPath)) {
		tenantsFile = companion(scPath)
	}

	var found *plan
	orig := sc
	if pol == nil {
		if found, _, err = findPlan(ctx, sc, seed, dur); err != nil {
			return nil, fmt.Errorf("oracle on %s: %w", cfg.Scenario, err)
		}
		sc = placed(sc, found)
	}
	s, err := sim.New(sc, sim.Options{Seed: seed, Start: simStart})
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", cfg.Scenario, err)
	}
	defer s.Close()
	if found != nil {
		pol = &oraclePolicy{plan: found, ap: newApplier(s, found.maxMHz)}
	}

	clock := gpu.NewManualClock(s.Now())
	snaps, err := newSnapshotter(tenantsFile, clock, s)
	if err != nil {
		return nil, err
	}
	sampler := gpu.NewSampler(s, clock, cfg.Step, nil)

	rec := report.NewRecorder(report.Meta{
		Scenario: sc.Name, Description: sc.Description, Policy: pol.Name(), Seed: seed,
		Start: s.Now(), Step: cfg.Step, Duration: dur,
	})
	res := &result{rec: rec, plan: found, sc: orig}

	steps := int64((dur + cfg.Step - 1) / cfg.Step)
	start := s.Now()
	// The first sample gives the policy its starting point.
	if err := sampler.SampleOnce(ctx); err != nil {
		return nil, fmt.Errorf("sample at start: %w", err)
	}
	act := guardedActuators(s)
	if err := pol.Init(ctx, act, snaps.build(ctx, sampler)); err != nil {
		return nil, fmt.Errorf("policy %s: init: %w", pol.Name(), err)
	}
	s.Window() // discard anything before the first step
	for i := int64(1); i <= steps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		at := start.Add(time.Duration(i) * cfg.Step)
		if at.Sub(start) > dur {
			at = start.Add(dur)
		}
		s.AdvanceTo(at)
		clock.Set(at)
		if err := sampler.SampleOnce(ctx); err != nil {
			return nil, fmt.Errorf("sample at %v: %w", at.Sub(start), err)
		}
		decs, err := pol.Observe(ctx, act, snaps.build(ctx, sampler))
		if err != nil {
			return nil, fmt.Errorf("policy %s at %v: %w", pol.Name(), at.Sub(start), err)
		}
		res.decisions = append(res.decisions, decs...)
		rec.Add(s.Window())
		if cfg.Progress != nil {
			cfg.Progress(i, steps)
		}
	}
	return res, nil
}

// writeRun writes a run's report files and its decisions into dir and
// returns their paths.
func writeRun(dir string, res *result, format string) ([]string, error) {
	paths, err := report.WriteFiles(dir, res.rec, format)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, FileDecisions)
	if err := writeDecisions(p, res.rec.Meta().Start, res.decisions); err != nil {
		return nil, err
	}
	return append(paths, p), nil
}

// runScenario runs the scenario, prints the summary on stdout and writes
// the files into cfg.Out.
func runScenario(ctx context.Context, cfg runConfig, stdout io.Writer) error {
	res, err := simulate(ctx, cfg)
	if err != nil {
		return err
	}
	// Files first, so that they are complete even when stdout goes away
	// (vgpusim run ... | head).
	var paths []string
	if cfg.Out != "" {
		if paths, err = writeRun(cfg.Out, res, cfg.Format); err != nil {
			return err
		}
	}
	if err := report.WriteSummaryText(stdout, res.rec.Summary()); err != nil {
		return err
	}
	applied := 0
	for _, d := range res.decisions {
		if d.Applied {
			applied++
		}
	}
	fmt.Fprintf(stdout, "policy %s: %d decisions, %d applied\n", res.rec.Meta().Policy, len(res.decisions), applied)
	if res.plan != nil {
		writePlan(stdout, res.sc, res.plan)
	}
	if cfg.Out != "" {
		fmt.Fprintf(stdout, "wrote %d files into %s\n", len(paths), cfg.Out)
	}
	return nil
}

// writeDecisions writes the policy's decisions as CSV.
func writeDecisions(path string, start time.Time, decs []tuner.Decision) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"t_seconds", "gpu", "tenant", "knob", "from", "to", "applied", "reason"})
	for _, d := range decs {
		_ = w.Write([]string{strconv.FormatFloat(d.Time.Sub(start).Seconds(), 'g', -1, 64), d.GPU, d.Tenant,
			string(d.Knob), d.From, d.To, strconv.FormatBool(d.Applied), d.Reason})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
