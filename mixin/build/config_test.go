package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
)

// TestRemovedSettingsRefused: a configuration that still sets
// _config.sloObjectives (gone: the objective of each tenant is the
// exporter's vgpu_tenant_slo_objective_ratio) fails to build, saying so,
// whether it reads the alerts, the recording rules or the dashboards,
// whether the setting is visible or hidden, through `make mixin`'s -config
// or a user's own jsonnet (without it, the mixin builds:
// TestGeneratedFilesUpToDate).
func TestRemovedSettingsRefused(t *testing.T) {
	const want = "_config.sloObjectives is no longer read"
	for _, cfg := range []string{"{sloObjectives: ['0.99']}", "{sloObjectives:: []}"} {
		_, err := generate(mixinDir, cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-config %s: %v, want an error saying %q", cfg, err, want)
		}
		for _, field := range []string{"prometheusAlerts", "prometheusRules", "grafanaDashboards"} {
			vm := jsonnet.MakeVM()
			vm.Importer(&jsonnet.FileImporter{JPaths: []string{mixinDir}})
			snippet := fmt.Sprintf(`((import "mixin.libsonnet") + { _config+:: %s }).%s`, cfg, field)
			_, err := vm.EvaluateAnonymousSnippet(filepath.Join(mixinDir, "user.jsonnet"), snippet)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s with _config+:: %s: %v, want an error saying %q", field, cfg, err, want)
			}
		}
	}
}
