package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/test/scenarios"
)

const tenantsSuffix = ".tenants.yaml"

// builtinNames returns the names of the built-in scenarios, sorted.
func builtinNames() ([]string, error) {
	files, err := fs.Glob(scenarios.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f, tenantsSuffix) {
			names = append(names, strings.TrimSuffix(f, ".yaml"))
		}
	}
	sort.Strings(names)
	return names, nil
}

// loadScenario loads a scenario file, or else the built-in scenario of that
// name. A built-in is copied with the other embedded files into a
// temporary directory first, so that it finds its companion tenants file
// and any trace it names as a file would. It returns the scenario, the
// path it was loaded from and a cleanup function.
func loadScenario(arg string) (*sim.Scenario, string, func(), error) {
	nop := func() {}
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		sc, err := sim.LoadScenario(arg)
		return sc, arg, nop, err
	}
	name := strings.TrimSuffix(arg, ".yaml")
	names, err := builtinNames()
	if err != nil {
		return nil, "", nop, err
	}
	found := false
	for _, n := range names {
		found = found || n == name
	}
	if !found || strings.ContainsAny(name, `/\`) {
		return nil, "", nop, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built-in: %s)", arg, strings.Join(names, ", "))
	}
	dir, err := os.MkdirTemp("", "vgpusim-")
	if err != nil {
		return nil, "", nop, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := os.CopyFS(dir, scenarios.FS); err != nil {
		cleanup()
		return nil, "", nop, fmt.Errorf("built-in scenarios: %w", err)
	}
	path := filepath.Join(dir, name+".yaml")
	sc, err := sim.LoadScenario(path)
	if err != nil {
		cleanup()
		// Name the built-in, not the temporary copy.
		return nil, "", nop, fmt.Errorf("built-in scenario %s: %s", name, strings.ReplaceAll(err.Error(), path, name+".yaml"))
	}
	return sc, path, cleanup, nil
}

// scenarioHead is what `list` shows of a scenario file.
type scenarioHead struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Duration    string      `yaml:"duration"`
	GPUs        []yaml.Node `yaml:"gpus"`
	Tenants     []yaml.Node `yaml:"tenants"`
}

// listScenarios prints the built-in scenarios.
func listScenarios(w io.Writer) error {
	names, err := builtinNames()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPUS\tTENANTS\tDURATION\tTENANTS FILE\tDESCRIPTION")
	for _, n := range names {
		data, err := fs.ReadFile(scenarios.FS, n+".yaml")
		if err != nil {
			return err
		}
		var h scenarioHead
		if err := yaml.Unmarshal(data, &h); err != nil {
			return fmt.Errorf("built-in scenario %s: %w", n, err)
		}
		companion := "-"
		if _, err := fs.Stat(scenarios.FS, n+tenantsSuffix); err == nil {
			companion = n + tenantsSuffix
		}
		if h.Duration == "" {
			h.Duration = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", n, len(h.GPUs), len(h.Tenants), h.Duration, companion, h.Description)
	}
	return tw.Flush()
}
