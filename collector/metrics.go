package collector

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// descSet creates and remembers a collector's descriptors so that Describe
// lists exactly what the collector may emit, and keeps the series sent
// under them from one update to the next.
type descSet struct {
	list   []*prometheus.Desc
	series seriesCache
}

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

// emit starts an update that sends to ch through the set's series cache;
// the caller defers the emitter's close.
func (s *descSet) emit(ch chan<- prometheus.Metric) *emitter {
	s.series.begin()
	return &emitter{ch: ch, cache: &s.series}
}

// emitter builds metrics and sends them: a sample of a series of the
// cache sent in the update before, else a const metric (whose series is
// then cached). A metric that cannot be built (a label value that is not
// valid UTF-8) is skipped and remembered as the collector's error; the
// others are still sent.
type emitter struct {
	ch      chan<- prometheus.Metric
	cache   *seriesCache // nil: const metrics only
	samples []sample     // the chunk the next samples are taken from
	errs    []error
}

// close ends an update begun by descSet.emit.
func (e *emitter) close() {
	if e.cache != nil {
		e.cache.end()
		e.cache = nil
	}
}

func (e *emitter) send(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	var h uint64
	if e.cache != nil {
		var s *series
		if s, h = e.cache.get(d, t, lv); s != nil {
			if len(e.samples) == cap(e.samples) {
				e.samples = make([]sample, 0, sampleChunk)
			}
			e.samples = append(e.samples, sample{s: s, v: v})
			e.ch <- &e.samples[len(e.samples)-1]
			return
		}
	}
	m, err := prometheus.NewConstMetric(d, t, v, lv...)
	if err != nil {
		e.fail(err)
		return
	}
	if e.cache != nil {
		e.cache.put(h, d, t, lv, m)
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
