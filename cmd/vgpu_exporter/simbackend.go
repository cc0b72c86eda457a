package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/test/scenarios"
)

// openSim starts the simulator on the scenario --sim.scenario names.
func openSim(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, tenantsSource, error) {
	sc, companion, err := resolveScenario(cfg.SimScenario, builtinLibraries()...)
	if err != nil {
		return nil, tenantsSource{}, err
	}
	s, err := sim.New(sc, sim.Options{Seed: cfg.SimSeed, Clock: clock, Start: clock.Now()})
	if err != nil {
		return nil, tenantsSource{}, fmt.Errorf("--sim.scenario=%s: %w", cfg.SimScenario, err)
	}
	level.Warn(logger).Log("msg", "serving SIMULATED GPU data", "scenario", cfg.SimScenario, "seed", cfg.SimSeed)
	return s, companion, nil
}

// builtinLibraries returns the file systems whose top-level <name>.yaml
// files are the built-in scenarios: the scenario library and its
// trace-replay scenarios (which carry their trace, about 0.7 MB).
func builtinLibraries() []fs.FS {
	libs := []fs.FS{scenarios.FS}
	if replay, err := fs.Sub(scenarios.Replay, "replay"); err == nil {
		libs = append(libs, replay)
	}
	return libs
}

// resolveScenario loads a scenario given as a file path or as the name of
// a built-in scenario (<name>.yaml at the top of one of libs), and finds
// its companion tenants file (<name>.tenants.yaml next to it).
func resolveScenario(arg string, libs ...fs.FS) (*sim.Scenario, tenantsSource, error) {
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		sc, err := sim.LoadScenario(arg)
		if err != nil {
			return nil, tenantsSource{}, err
		}
		var ts tenantsSource
		if p := companionPath(arg); fileExists(p) {
			ts.Path = p
		}
		return sc, ts, nil
	}
	name := strings.TrimSuffix(arg, ".yaml")
	var lib fs.FS
	for _, l := range libs {
		if slices.Contains(builtinScenarios(l), name) {
			lib = l
			break
		}
	}
	if lib == nil {
		var all []string
		for _, l := range libs {
			all = append(all, builtinScenarios(l)...)
		}
		sort.Strings(all)
		all = slices.Compact(all)
		return nil, tenantsSource{}, fmt.Errorf("--sim.scenario=%s: no such file, and not a built-in scenario (built-in: %s)",
			arg, strings.Join(all, ", "))
	}
	sc, err := loadBuiltin(lib, name)
	if err != nil {
		return nil, tenantsSource{}, err
	}
	var ts tenantsSource
	if td, err := fs.ReadFile(lib, name+".tenants.yaml"); err == nil {
		ts = tenantsSource{Name: name + ".tenants.yaml", Data: td}
	}
	return sc, ts, nil
}

// loadBuiltin loads a built-in scenario. The built-in files are copied
// into a temporary directory first so that the scenario finds the files it
// names (traces) as a scenario file would; they are read while loading,
// and the copy is removed when it returns.
func loadBuiltin(builtin fs.FS, name string) (*sim.Scenario, error) {
	dir, err := os.MkdirTemp("", "vgpu_exporter-scenario-")
	if err != nil {
		return nil, fmt.Errorf("built-in scenario %s: %w", name, err)
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, builtin); err != nil {
		return nil, fmt.Errorf("built-in scenario %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".yaml")
	sc, err := sim.LoadScenario(path)
	if err != nil {
		// Name the built-in file, not the temporary copy.
		return nil, fmt.Errorf("built-in scenario %s: %s", name,
			strings.ReplaceAll(strings.ReplaceAll(err.Error(), path, name+".yaml"), dir+string(filepath.Separator), ""))
	}
	return sc, nil
}

// companionPath returns the tenants file that goes with a scenario file:
// dir/name.yaml -> dir/name.tenants.yaml.
func companionPath(scenario string) string {
	ext := filepath.Ext(scenario)
	return strings.TrimSuffix(scenario, ext) + ".tenants.yaml"
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// builtinScenarios lists the built-in scenario names.
func builtinScenarios(builtin fs.FS) []string {
	matches, _ := fs.Glob(builtin, "*.yaml")
	var names []string
	for _, m := range matches {
		if strings.HasSuffix(m, ".tenants.yaml") {
			continue
		}
		names = append(names, strings.TrimSuffix(m, ".yaml"))
	}
	sort.Strings(names)
	return names
}
