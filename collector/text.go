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
// It renders gauges, counters and untyped metrics whose metric and label
// names are valid in the legacy scheme (which every escaping scheme then
// leaves as they are), as this package's are; for anything else it
// returns an error wrapping errors.ErrUnsupported, having written
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
	typ   prometheus.ValueType
	lines []textLine
}

// textLine is a metric being rendered.
type textLine struct {
	labels []*dto.LabelPair // for the order
	series []byte           // the name and labels, rendered
	v      float64
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
		var typ prometheus.ValueType
		if s, ok := m.(*sample); ok {
			if s.s.text == nil {
				unsupported = fmt.Errorf("metric %s: a label name: %w", meta.name, errors.ErrUnsupported)
				continue
			}
			l, typ = textLine{labels: s.s.labels, series: s.s.text, v: s.v}, s.s.typ
		} else {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				errs = append(errs, fmt.Errorf("error collecting metric %s: %w", meta.name, err))
				continue
			}
			if typ, l.v, ok = valueOf(&out); !ok {
				unsupported = fmt.Errorf("metric %s is neither a counter, a gauge nor untyped: %w", meta.name, errors.ErrUnsupported)
				continue
			}
			l.labels = out.Label
			if l.series, err = appendSeries(nil, meta.name, out.Label); err != nil {
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
				errs = append(errs, fmt.Errorf("collected metric %s was collected before with the same name and label values", l.series))
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
var typeNames = map[prometheus.ValueType]string{
	prometheus.CounterValue: " counter\n",
	prometheus.GaugeValue:   " gauge\n",
	prometheus.UntypedValue: " untyped\n",
}

// valueOf is the type and value of a counter, gauge or untyped metric.
func valueOf(m *dto.Metric) (prometheus.ValueType, float64, bool) {
	switch {
	case m.Summary != nil || m.Histogram != nil || m.TimestampMs != nil:
		return 0, 0, false
	case m.Counter != nil:
		return prometheus.CounterValue, m.Counter.GetValue(), true
	case m.Gauge != nil:
		return prometheus.GaugeValue, m.Gauge.GetValue(), true
	case m.Untyped != nil:
		return prometheus.UntypedValue, m.Untyped.GetValue(), true
	}
	return 0, 0, false
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
// writes them: name{label="value",...}.
func appendSeries(b []byte, name string, labels []*dto.LabelPair) ([]byte, error) {
	b = append(b, name...)
	for i, lp := range labels {
		if !model.LegacyValidation.IsValidLabelName(lp.GetName()) {
			return nil, fmt.Errorf("metric %s: label name %q: %w", name, lp.GetName(), errors.ErrUnsupported)
		}
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, lp.GetName()...)
		b = append(b, `="`...)
		b = append(b, valueEscaper.Replace(lp.GetValue())...)
		b = append(b, '"')
	}
	if len(labels) > 0 {
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
