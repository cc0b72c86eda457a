package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
)

// listScenarios prints the built-in scenarios.
func listScenarios(w io.Writer) error {
	bs, err := scenarios.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPUS\tTENANTS\tDURATION\tTENANTS FILE\tDESCRIPTION")
	for _, b := range bs {
		h, err := b.Head()
		if err != nil {
			return err
		}
		companion := "-"
		if c := b.TenantsPath(); c != "" {
			companion = c
		}
		if h.Duration == "" {
			h.Duration = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", b.Name, h.GPUs, h.Tenants, h.Duration, companion, h.Description)
	}
	return tw.Flush()
}
