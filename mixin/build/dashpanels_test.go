package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDashboardVariablesReadTheSelector: every query variable of every
// dashboard reads only the series of vgpuExporterSelector, as the
// recording rules the overview reads do: a tenant, host or GPU of another
// job (another exporter serving a series of the same name) is not offered.
func TestDashboardVariablesReadTheSelector(t *testing.T) {
	const sel = `job="gpu-nodes"`
	files, err := generate(mixinDir, fmt.Sprintf("{vgpuExporterSelector: '%s'}", sel))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range sortedNames(files) {
		if !strings.HasPrefix(name, "dashboards/") {
			continue
		}
		var d struct {
			Templating struct {
				List []struct {
					Name, Type, Definition string
				}
			}
		}
		if err := json.Unmarshal(files[name], &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			n++
			if !strings.Contains(v.Definition, sel) {
				t.Errorf("%s: variable $%s reads %s, without the selector %s", name, v.Name, v.Definition, sel)
			}
		}
	}
	if n == 0 {
		t.Fatal("no query variables")
	}
}
