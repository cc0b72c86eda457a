package latency

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// parseExposition decodes a /metrics body in the given format (text when
// unknown) into metric families by name.
func parseExposition(data []byte, format expfmt.Format) (map[string]*dto.MetricFamily, error) {
	if format == expfmt.FmtUnknown || format == "" {
		format = expfmt.FmtText
	}
	dec := expfmt.NewDecoder(bytes.NewReader(data), format)
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		if prev, ok := out[mf.GetName()]; ok {
			prev.Metric = append(prev.Metric, mf.Metric...)
			continue
		}
		out[mf.GetName()] = mf
	}
	return out, nil
}

func labelsMatch(m *dto.Metric, matchers map[string]string) bool {
	for k, want := range matchers {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				got = lp.GetValue()
				break
			}
		}
		if got != want {
			return false
		}
	}
	return true
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, lp := range m.GetLabel() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", lp.GetName(), lp.GetValue())
	}
	b.WriteByte('}')
	return b.String()
}

// extract picks the source's histogram (or Triton's counters) out of an
// exposition.
func extract(src *Source, fams map[string]*dto.MetricFamily) (histo, error) {
	if src.Preset == PresetTriton {
		return extractTriton(fams, src.Matchers)
	}
	names := presetMetrics[src.Preset]
	if src.Metric != "" {
		names = []string{src.Metric}
	}
	h, _, err := extractHistogram(fams, names, src.Matchers)
	return h, err
}
