package collector

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// WithTuner adds the tuner's collector when the tuner runs; collect[]=tuner
// selects it alone, and the other filters go to the GPU/tenant collector.
func TestWithTuner(t *testing.T) {
	gpuC := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpu_metric"})
	var got []string
	newC := func(filters ...string) (prometheus.Collector, error) {
		got = filters
		if len(filters) == 1 && filters[0] == "bad" {
			return nil, errors.New("bad filter")
		}
		return gpuC, nil
	}
	status := func() *tuner.Status { return nil }
	for _, tc := range []struct {
		name    string
		status  func() *tuner.Status
		filters []string
		want    string // "gpu", "tuner" or "list"
		passed  []string
	}{
		{"tuner off", nil, nil, "gpu", nil},
		{"tuner off, tuner asked", nil, []string{"tuner"}, "gpu", []string{"tuner"}},
		{"tuner on", status, nil, "list", nil},
		{"tuner only", status, []string{"tuner"}, "tuner", nil},
		{"both", status, []string{"tuner", "gpu"}, "list", []string{"gpu"}},
		{"gpu only", status, []string{"gpu"}, "gpu", []string{"gpu"}},
	} {
		got = nil
		c, err := WithTuner(newC, tc.status, tc.filters)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var kind string
		switch c.(type) {
		case List:
			kind = "list"
		case *TunerCollector:
			kind = "tuner"
		default:
			kind = "gpu"
		}
		if kind != tc.want || len(got) != len(tc.passed) {
			t.Errorf("%s: %s with filters %q, want %s with %q", tc.name, kind, got, tc.want, tc.passed)
		}
	}
	if _, err := WithTuner(newC, status, []string{"tuner", "bad"}); err == nil {
		t.Error("a bad filter beside tuner should fail")
	}
}

// A collect[] name no collector has is answered with the names there are,
// the tuner's among them while it runs (it is not one of the registered
// collectors, so the list left it out), and only then.
func TestWithTunerUnknownNamesTuner(t *testing.T) {
	newC := func(filters ...string) (prometheus.Collector, error) {
		return NewExporter(func() *tenant.Snapshot { return nil }, nil, filters...)
	}
	for _, tc := range []struct {
		name   string
		status func() *tuner.Status
		want   string
	}{
		{"tuner on", func() *tuner.Status { return nil }, `unknown collector "nope" (known: [exporter gpu mig tenant tuner vgpu])`},
		{"tuner off", nil, `unknown collector "nope" (known: [exporter gpu mig tenant vgpu])`},
	} {
		_, err := WithTuner(newC, tc.status, []string{"gpu", "nope"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}
