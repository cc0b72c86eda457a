package collector

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// descSet creates and remembers a collector's descriptors so that Describe
// lists exactly what the collector may emit.
type descSet struct{ list []*prometheus.Desc }

// add returns the descriptor of vgpu_<name>.
func (s *descSet) add(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	s.list = append(s.list, d)
	return d
}

// Describe sends every descriptor of the set.
func (s *descSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.list {
		ch <- d
	}
}

// emitter builds const metrics and sends them. A metric that cannot be
// built (a label value that is not valid UTF-8) is skipped and remembered
// as the collector's error; the others are still sent.
type emitter struct {
	ch   chan<- prometheus.Metric
	errs []error
}

func (e *emitter) send(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, lv...)
	if err != nil {
		e.fail(err)
		return
	}
	e.ch <- m
}

func (e *emitter) gauge(d *prometheus.Desc, v float64, lv ...string) {
	e.send(d, prometheus.GaugeValue, v, lv...)
}

func (e *emitter) counter(d *prometheus.Desc, v float64, lv ...string) {
	e.send(d, prometheus.CounterValue, v, lv...)
}

// optGauge sends a gauge for a reading that may be absent (nil).
func (e *emitter) optGauge(d *prometheus.Desc, v *float64, lv ...string) {
	if v != nil {
		e.gauge(d, *v, lv...)
	}
}

// optBool sends 1 or 0 for a boolean reading that may be absent.
func (e *emitter) optBool(d *prometheus.Desc, v *bool, lv ...string) {
	if v != nil {
		e.gauge(d, boolValue(*v), lv...)
	}
}

// fail records an error; at most a few are kept so that a snapshot with
// thousands of bad entries stays cheap.
func (e *emitter) fail(err error) {
	if len(e.errs) < 5 {
		e.errs = append(e.errs, err)
	}
}

// err is the collector's result.
func (e *emitter) err() error { return errors.Join(e.errs...) }

// firstSet remembers keys: add reports whether k is new. Collectors serve
// the first copy of anything a snapshot lists twice and fail on the others,
// since duplicate series would fail the whole scrape.
type firstSet[K comparable] map[K]struct{}

func (s firstSet[K]) add(k K) bool {
	if _, dup := s[k]; dup {
		return false
	}
	s[k] = struct{}{}
	return true
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unixSeconds is the exposition value of a timestamp.
func unixSeconds(t interface{ UnixNano() int64 }) float64 {
	return float64(t.UnixNano()) / 1e9
}

func itoa(i int) string { return strconv.Itoa(i) }

// formatQuantile writes a quantile as Prometheus does ("0.99").
func formatQuantile(q float64) string { return strconv.FormatFloat(q, 'g', -1, 64) }
