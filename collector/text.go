package collector

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
)

// Text renders a collector's metrics straight in the text exposition
// format (version 0.0.4): the bytes are those that encoding the families
// a prometheus.Registry gathers from the collector alone gives (families
// by name, the metrics of each by label values, a HELP and a TYPE line
// each), without the registry's metric families. The series of the
// collectors of this package come with their name and labels rendered
// once, when first sent (seriesCache), so a rendering writes only values
// besides them.
//
// It renders counters, gauges, untyped metrics, summaries and classic
// histograms without timestamps whose metric and label names are valid in
// the legacy scheme (which every escaping scheme then leaves as they are),
// as this package's and the Go and process collectors' are; for anything
// else it returns an error wrapping errors.ErrUnsupported, having written
// nothing, and the caller encodes gathered families instead. As a
// registry does, it renders the first of two metrics with the same name
// and labels and reports the second in its error.
type Text struct {
	c prometheus.Collector

	mu    sync.Mutex
	metas map[*prometheus.Desc]descMeta
	// spare is the families of a rendering done, whose lines' memory the
	// next rendering reuses.
	spare sync.Pool
}

// NewText returns a Text over c.
func NewText(c prometheus.Collector) *Text {
	return &Text{c: c, metas: map[*prometheus.Desc]descMeta{}}
}

// textFamily is a family being rendered.
type textFamily struct {
	descMeta
	typ   dto.MetricType
	lines []textLine
}

// textLine is a metric being rendered: a kept series and its value, or
// the lines of any other metric, rendered.
type textLine struct {
	labels []*dto.LabelPair // for the order
	series []byte           // the name and labels of a kept series
	v      float64
	lines  []byte
}

// Render writes the collector's metrics to buf, calling yield (when not
// nil) after each family.
func (t *Text) Render(buf *bytes.Buffer, yield func()) error {
	ch := make(chan prometheus.Metric, 1024)
	go func() {
		defer close(ch)
		t.c.Collect(ch)
	}()
	fams, _ := t.spare.Get().(map[string]*textFamily)
	if fams == nil {
		fams = map[string]*textFamily{}
	}
	defer t.recycle(fams)
	var unsupported error
	var errs []error
	for m := range ch {
		if unsupported != nil {
			continue // drain
		}
		meta, err := t.meta(m.Desc())
		if err != nil {
			unsupported = err
			continue
		}
		var l textLine
		var typ dto.MetricType
		if s, ok := m.(*sample); ok {
			if s.s.text == nil {
				unsupported = fmt.Errorf("metric %s: a label name: %w", meta.name, errors.ErrUnsupported)
				continue
			}
			l, typ = textLine{labels: s.s.labels, series: s.s.text, v: s.v}, dtoTypes[s.s.typ]
		} else {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				errs = append(errs, fmt.Errorf("error collecting metric %s: %w", meta.name, err))
				continue
			}
			l.labels = out.Label
			if l.lines, typ, err = appendMetric(nil, meta.name, &out); err != nil {
				unsupported = err
				continue
			}
		}
		f := fams[meta.name]
		if f == nil {
			f = &textFamily{descMeta: meta}
			fams[meta.name] = f
		}
		if len(f.lines) == 0 {
			f.typ = typ
		} else if typ != f.typ {
			errs = append(errs, fmt.Errorf("collected metric %s has two types", meta.name))
			continue
		}
		f.lines = append(f.lines, l)
	}
	if unsupported != nil {
		return unsupported
	}
	names := make([]string, 0, len(fams))
	for n, f := range fams {
		if len(f.lines) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	num := make([]byte, 0, 32)
	for _, n := range names {
		f := fams[n]
		slices.SortStableFunc(f.lines, func(a, b textLine) int { return compareLabels(a.labels, b.labels) })
		buf.WriteString("# HELP ")
		buf.WriteString(f.name)
		buf.WriteByte(' ')
		helpEscaper.WriteString(buf, f.help)
		buf.WriteString("\n# TYPE ")
		buf.WriteString(f.name)
		buf.WriteString(typeNames[f.typ])
		for i, l := range f.lines {
			if i > 0 && compareLabels(f.lines[i-1].labels, l.labels) == 0 {
				errs = append(errs, fmt.Errorf("collected metric %s %v was collected before with the same name and label values", f.name, l.labels))
				continue
			}
			if l.lines != nil {
				buf.Write(l.lines)
				continue
			}
			buf.Write(l.series)
			buf.WriteByte(' ')
			num = appendFloat(num[:0], l.v)
			buf.Write(num)
			buf.WriteByte('\n')
		}
		if yield != nil {
			yield()
		}
	}
	return errors.Join(errs...)
}

// recycle keeps the memory of fams' lines for the next rendering.
func (t *Text) recycle(fams map[string]*textFamily) {
	for n, f := range fams {
		if len(f.lines) == 0 {
			delete(fams, n) // not sent in this rendering
			continue
		}
		clear(f.lines)
		f.lines = f.lines[:0]
	}
	t.spare.Put(fams)
}

// typeNames end a family's TYPE line.
var typeNames = map[dto.MetricType]string{
	dto.MetricType_COUNTER:   " counter\n",
	dto.MetricType_GAUGE:     " gauge\n",
	dto.MetricType_UNTYPED:   " untyped\n",
	dto.MetricType_SUMMARY:   " summary\n",
	dto.MetricType_HISTOGRAM: " histogram\n",
}

// dtoTypes are the types of the kept series.
var dtoTypes = map[prometheus.ValueType]dto.MetricType{
	prometheus.CounterValue: dto.MetricType_COUNTER,
	prometheus.GaugeValue:   dto.MetricType_GAUGE,
	prometheus.UntypedValue: dto.MetricType_UNTYPED,
}

// appendMetric appends the lines of metric m of family name as the text
// format writes them, and returns its type.
func appendMetric(b []byte, name string, m *dto.Metric) ([]byte, dto.MetricType, error) {
	var err error
	line := func(suffix, extra string, extraValue, v float64) {
		if err == nil {
			b, err = appendLine(b, name+suffix, m.Label, extra, extraValue, v)
		}
	}
	var typ dto.MetricType
	switch {
	case m.TimestampMs != nil:
		return nil, 0, fmt.Errorf("metric %s has a timestamp: %w", name, errors.ErrUnsupported)
	case m.Gauge != nil:
		typ = dto.MetricType_GAUGE
		line("", "", 0, m.Gauge.GetValue())
	case m.Counter != nil:
		typ = dto.MetricType_COUNTER
		line("", "", 0, m.Counter.GetValue())
	case m.Summary != nil:
		typ = dto.MetricType_SUMMARY
		for _, q := range m.Summary.Quantile {
			line("", model.QuantileLabel, q.GetQuantile(), q.GetValue())
		}
		line("_sum", "", 0, m.Summary.GetSampleSum())
		line("_count", "", 0, float64(m.Summary.GetSampleCount()))
	case m.Untyped != nil:
		typ = dto.MetricType_UNTYPED
		line("", "", 0, m.Untyped.GetValue())
	case m.Histogram != nil:
		typ = dto.MetricType_HISTOGRAM
		h := m.Histogram
		count := func(f float64, u uint64) float64 {
			if f == 0 {
				return float64(u)
			}
			return f
		}
		inf := false
		for _, bk := range h.Bucket {
			line("_bucket", model.BucketLabel, bk.GetUpperBound(), count(bk.GetCumulativeCountFloat(), bk.GetCumulativeCount()))
			inf = inf || math.IsInf(bk.GetUpperBound(), +1)
		}
		if !inf {
			line("_bucket", model.BucketLabel, math.Inf(+1), count(h.GetSampleCountFloat(), h.GetSampleCount()))
		}
		line("_sum", "", 0, h.GetSampleSum())
		line("_count", "", 0, count(h.GetSampleCountFloat(), h.GetSampleCount()))
	default:
		return nil, 0, fmt.Errorf("metric %s has no value: %w", name, errors.ErrUnsupported)
	}
	return b, typ, err
}

// appendLine appends one line of a metric: its name and labels, the extra
// label (quantile or le) where named, and the value.
func appendLine(b []byte, name string, labels []*dto.LabelPair, extra string, extraValue, v float64) ([]byte, error) {
	b, err := appendSeries(b, name, labels, extra, extraValue)
	if err != nil {
		return nil, err
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n'), nil
}

// compareLabels orders metrics as a registry does: by label values in
// the order of the label pairs (sorted by name).
func compareLabels(a, b []*dto.LabelPair) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	for i, lp := range a {
		if c := strings.Compare(lp.GetValue(), b[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendSeries appends a metric's name and labels as the text format
// writes them: name{label="value",...}, the extra label (when named)
// last.
func appendSeries(b []byte, name string, labels []*dto.LabelPair, extra string, extraValue float64) ([]byte, error) {
	b = append(b, name...)
	sep := byte('{')
	for _, lp := range labels {
		if !model.LegacyValidation.IsValidLabelName(lp.GetName()) {
			return nil, fmt.Errorf("metric %s: label name %q: %w", name, lp.GetName(), errors.ErrUnsupported)
		}
		b = append(b, sep)
		b = append(b, lp.GetName()...)
		b = append(b, `="`...)
		b = append(b, valueEscaper.Replace(lp.GetValue())...)
		b = append(b, '"')
		sep = ','
	}
	if extra != "" {
		b = append(b, sep)
		b = append(b, extra...)
		b = append(b, `="`...)
		b = appendFloat(b, extraValue)
		b = append(b, '"')
		sep = ','
	}
	if sep == ',' {
		b = append(b, '}')
	}
	return b, nil
}

// appendFloat appends a value as the text format writes it.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// descMeta is what a family takes from its descriptor.
type descMeta struct{ name, help string }

// meta returns d's name and help.
func (t *Text) meta(d *prometheus.Desc) (descMeta, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.metas[d]; ok {
		return m, nil
	}
	m, err := metaOf(d)
	if err != nil {
		return m, err
	}
	t.metas[d] = m
	return m, nil
}

// metaOf reads a descriptor's name and help from its String (the only
// way to them outside client_golang), and checks that the name is valid
// in the legacy scheme.
func metaOf(d *prometheus.Desc) (descMeta, error) {
	s := d.String()
	var m descMeta
	var err error
	rest, ok := strings.CutPrefix(s, "Desc{fqName: ")
	if ok {
		m.name, rest, err = unquotePrefix(rest)
	}
	if ok && err == nil {
		rest, ok = strings.CutPrefix(rest, ", help: ")
	}
	if ok && err == nil {
		m.help, _, err = unquotePrefix(rest)
	}
	if !ok || err != nil {
		return m, fmt.Errorf("descriptor %s not understood: %w", s, errors.ErrUnsupported)
	}
	if !model.LegacyValidation.IsValidMetricName(m.name) {
		return m, fmt.Errorf("metric name %q: %w", m.name, errors.ErrUnsupported)
	}
	return m, nil
}

// unquotePrefix unquotes the Go string literal s starts with.
func unquotePrefix(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", s, err
	}
	u, err := strconv.Unquote(q)
	return u, s[len(q):], err
}
