package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

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
	b, err := scenarios.Find(arg)
	if u, ok := errors.AsType[*scenarios.UnknownError](err); ok {
		return nil, "", nop, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built-in: %s)", arg, strings.Join(u.Known, ", "))
	}
	if err != nil {
		return nil, "", nop, err
	}
	c, err := b.Materialize()
	if err != nil {
		return nil, "", nop, err
	}
	sc, err := sim.LoadScenario(c.Scenario)
	if err != nil {
		c.Remove()
		return nil, "", nop, c.Explain(err)
	}
	return sc, c.Scenario, c.Remove, nil
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
	bs, err := scenarios.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPUS\tTENANTS\tDURATION\tTENANTS FILE\tDESCRIPTION")
	for _, b := range bs {
		data, err := fs.ReadFile(b.FS, b.Path)
		if err != nil {
			return err
		}
		var h scenarioHead
		if err := yaml.Unmarshal(data, &h); err != nil {
			return fmt.Errorf("built-in scenario %s: %w", b.Path, err)
		}
		companion := "-"
		if c := b.TenantsPath(); c != "" {
			companion = c
		}
		if h.Duration == "" {
			h.Duration = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", b.Name, len(h.GPUs), len(h.Tenants), h.Duration, companion, h.Description)
	}
	return tw.Flush()
}
