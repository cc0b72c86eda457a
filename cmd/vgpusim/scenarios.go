package main

import (
	"fmt"
	"io"
	"io/fs"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
)

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
