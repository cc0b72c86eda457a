package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestChartDashboardsEventStep: the dashboards the chart ships read each
// event counter at a step (eventDeltaStep) no longer than the chart's own
// ServiceMonitor scrapes the exporter at, as docs/mixin.md asks: a longer
// step loses the events before an exporter's restart within one step.
func TestChartDashboardsEventStep(t *testing.T) {
	chart := filepath.Join(root, "deploy", "helm", "vgpu-exporter")
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		ServiceMonitor struct {
			Interval string `yaml:"interval"`
		} `yaml:"serviceMonitor"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	scrape, err := time.ParseDuration(values.ServiceMonitor.Interval)
	if err != nil {
		t.Fatalf("values.yaml serviceMonitor.interval: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(chart, "files", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the chart's dashboards: %v", err)
	}
	step := regexp.MustCompile(`\[\$__interval:([0-9a-z]+)\]`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range step.FindAllStringSubmatch(string(b), -1) {
			n++
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Fatalf("%s: step %q: %v", f, m[1], err)
			}
			if d > scrape {
				t.Errorf("%s: an event panel reads every %s, longer than the chart's serviceMonitor.interval %s", filepath.Base(f), d, scrape)
			}
		}
	}
	if n == 0 {
		t.Error("no event panel's step found in the chart's dashboards: the check checks nothing")
	}
}
