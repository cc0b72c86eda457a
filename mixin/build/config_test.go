package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
)

// TestRemovedSettingsRefused: a configuration that still sets a setting
// that is gone fails to build, saying so, whether it reads the alerts,
// the recording rules or the dashboards, whether the setting is visible
// or hidden, through `make mixin`'s -config or a user's own jsonnet
// (without it, the mixin builds: TestGeneratedFilesUpToDate):
// _config.sloObjectives (the objective of each tenant is the exporter's
// vgpu_tenant_slo_objective_ratio) and _config.tunerPauseFailuresThreshold
// (a count of failed pause periods, right at one --pause.period only:
// tunerPauseFailedFraction replaces it).
func TestRemovedSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		want string
		cfgs []string
	}{
		{"_config.sloObjectives is no longer read", []string{"{sloObjectives: ['0.99']}", "{sloObjectives:: []}"}},
		{"_config.tunerPauseFailuresThreshold is no longer read", []string{"{tunerPauseFailuresThreshold: 30}", "{tunerPauseFailuresThreshold:: 10}"}},
	} {
		for _, cfg := range c.cfgs {
			_, err := generate(mixinDir, cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("-config %s: %v, want an error saying %q", cfg, err, c.want)
			}
			for _, field := range []string{"prometheusAlerts", "prometheusRules", "grafanaDashboards"} {
				vm := jsonnet.MakeVM()
				vm.Importer(&jsonnet.FileImporter{JPaths: []string{mixinDir}})
				snippet := fmt.Sprintf(`((import "mixin.libsonnet") + { _config+:: %s }).%s`, cfg, field)
				_, err := vm.EvaluateAnonymousSnippet(filepath.Join(mixinDir, "user.jsonnet"), snippet)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s with _config+:: %s: %v, want an error saying %q", field, cfg, err, c.want)
				}
			}
		}
	}
}
