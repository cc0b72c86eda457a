package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// liveWindowLatencies bounds the simulator's per-tenant latency records:
// the exporter never reads the simulator's windows (latencies reach it
// through the simulated applications' histograms), so a small uniform
// sample keeps memory flat over a long run.
const liveWindowLatencies = 1024

// openSim starts the simulator on the scenario --sim.scenario names.
func openSim(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, tenant.ConfigSource, error) {
	sc, companion, err := resolveScenario(cfg.SimScenario)
	if err != nil {
		return nil, tenant.ConfigSource{}, err
	}
	s, err := sim.New(sc, sim.Options{Seed: cfg.SimSeed, Clock: clock, Start: clock.Now(), WindowLatencies: liveWindowLatencies,
		// a sample (or control call) spends about a sample interval at
		// most simulating: one that cannot keep up skips the rest, rather
		// than making the next sample later and longer still
		MaxCatchUp: cfg.SampleInterval,
		OnSkip: func(skipped, total time.Duration) {
			level.Warn(logger).Log("msg", "the simulator cannot keep up with real time: model time skipped, nothing simulated for it",
				"skipped", skipped, "skipped_total", total, "max_catch_up", cfg.SampleInterval)
		}})
	if err != nil {
		return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.scenario=%s: %w", cfg.SimScenario, err)
	}
	level.Warn(logger).Log("msg", "serving SIMULATED GPU data", "scenario", cfg.SimScenario, "seed", s.Seed())
	if cfg.SimSettingsFile != "" {
		p, err := sim.Persist(s, cfg.SimSettingsFile)
		if err != nil {
			return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.settings-file: %w", err)
		}
		return p, companion, nil
	}
	return s, companion, nil
}

// simulatorOf returns the simulator src is, or keeps its settings for in
// a file (--sim.settings-file: a sim.Persistent); nil when src is no
// simulator.
func simulatorOf(src gpu.Source) *sim.Simulator {
	switch s := src.(type) {
	case *sim.Simulator:
		return s
	case *sim.Persistent:
		return s.Simulator
	}
	return nil
}

// resolveScenario loads a scenario given as a file path or as the name of
// a built-in scenario (of libs, by default the built-in libraries), and
// finds its companion tenants file (<name>.tenants.yaml next to it).
func resolveScenario(arg string, libs ...scenarios.Library) (*sim.Scenario, tenant.ConfigSource, error) {
	if fi, err := os.Stat(arg); err == nil {
		if fi.IsDir() {
			return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.scenario=%s is a directory; give a scenario file or the name of a built-in scenario", arg)
		}
		sc, err := sim.LoadScenario(arg)
		if err != nil {
			return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.scenario=%s: %w", arg, err)
		}
		var ts tenant.ConfigSource
		if p := companionPath(arg); lexists(p) {
			// anything of that name is the companion: one that is no
			// regular file (a directory, a link to nothing) is refused
			// where it is read, not taken as no tenants file, which would
			// leave every process unassigned
			ts.Path = p
		}
		return sc, ts, nil
	}
	b, err := scenarios.Find(arg, libs...)
	if u, ok := errors.AsType[*scenarios.UnknownError](err); ok {
		return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.scenario=%s: no such file, and not a built-in scenario (built-in: %s)",
			arg, strings.Join(u.Known, ", "))
	}
	if err != nil {
		return nil, tenant.ConfigSource{}, fmt.Errorf("--sim.scenario=%s: %w", arg, err)
	}
	sc, err := sim.LoadScenarioFS(b.FS, b.Path)
	if err != nil {
		return nil, tenant.ConfigSource{}, b.Explain(err)
	}
	var ts tenant.ConfigSource
	if name, data, err := b.Tenants(); err != nil {
		return nil, tenant.ConfigSource{}, err
	} else if name != "" {
		ts = tenant.ConfigSource{Name: name, Data: data}
	}
	return sc, ts, nil
}

// companionPath returns the tenants file that goes with a scenario file:
// dir/name.yaml -> dir/name.tenants.yaml.
func companionPath(scenario string) string {
	ext := filepath.Ext(scenario)
	return strings.TrimSuffix(scenario, ext) + scenarios.TenantsSuffix
}

// lexists says whether anything, a link to nothing too, is at p.
func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
