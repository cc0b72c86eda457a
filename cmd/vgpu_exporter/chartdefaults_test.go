package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Helm chart passes some of the exporter's defaults on as values of
// its own; each must be the flag's default, or a release would differ
// from the binary it runs without saying so.
func TestChartDefaultsMatchFlags(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/helm/vgpu-exporter/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		SampleInterval string `yaml:"sampleInterval"`
		Log            struct {
			Level  string `yaml:"level"`
			Format string `yaml:"format"`
		} `yaml:"log"`
		Kubernetes struct {
			PodInfo struct {
				MaxSeries int64 `yaml:"maxSeries"`
			} `yaml:"podInfo"`
		} `yaml:"kubernetes"`
		Tuner struct {
			Interval string `yaml:"interval"`
			Pause    struct {
				Period string `yaml:"period"`
				Max    string `yaml:"max"`
			} `yaml:"pause"`
		} `yaml:"tuner"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	c, err := parseArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	dur := func(s string) string {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Sprintf("%q (%v)", s, err)
		}
		return d.String()
	}
	for _, tc := range []struct{ value, chart, flag string }{
		{"sampleInterval", dur(v.SampleInterval), c.SampleInterval.String()},
		{"log.level", v.Log.Level, c.LogLevel},
		{"log.format", v.Log.Format, c.LogFormat},
		{"kubernetes.podInfo.maxSeries", fmt.Sprint(v.Kubernetes.PodInfo.MaxSeries), fmt.Sprint(c.PodInfoMaxSeries)},
		{"tuner.interval", dur(v.Tuner.Interval), c.Tuner.Interval.String()},
		{"tuner.pause.period", dur(v.Tuner.Pause.Period), c.Actuators.PausePeriod.String()},
		{"tuner.pause.max", dur(v.Tuner.Pause.Max), c.Actuators.PauseMax.String()},
	} {
		if tc.chart != tc.flag {
			t.Errorf("values.yaml %s is %s, the flag's default %s", tc.value, tc.chart, tc.flag)
		}
	}
}
