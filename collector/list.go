package collector

import (
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// List is several collectors as one.
type List []prometheus.Collector

// Describe sends every collector's descriptions.
func (cs List) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

// Collect sends every collector's metrics.
func (cs List) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// TunerCollectorName is the collect[] name of the tuner's metrics.
const TunerCollectorName = "tuner"

// WithTuner returns the collector newCollector builds for filters and,
// when status is set (the tuner runs), the tuner's collector beside it.
// With collect[] filters, "tuner" selects the tuner's metrics, and an
// UnknownError names it among those there are.
func WithTuner(newCollector func(filters ...string) (prometheus.Collector, error), status func() *tuner.Status, filters []string) (prometheus.Collector, error) {
	c, err := withTuner(newCollector, status, filters)
	var u *UnknownError
	if status != nil && errors.As(err, &u) {
		known := append(slices.Clone(u.Known), TunerCollectorName)
		slices.Sort(known)
		return nil, &UnknownError{Name: u.Name, Known: known}
	}
	return c, err
}

func withTuner(newCollector func(filters ...string) (prometheus.Collector, error), status func() *tuner.Status, filters []string) (prometheus.Collector, error) {
	wantTuner := status != nil
	rest := filters
	if len(filters) > 0 {
		wantTuner, rest = false, nil
		for _, f := range filters {
			if f == TunerCollectorName && status != nil {
				wantTuner = true
				continue
			}
			rest = append(rest, f)
		}
	}
	if !wantTuner {
		return newCollector(filters...)
	}
	tc := NewTunerCollector(status)
	if len(filters) > 0 && len(rest) == 0 {
		return tc, nil
	}
	c, err := newCollector(rest...)
	if err != nil {
		return nil, err
	}
	return List{c, tc}, nil
}
