package latency

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// TestLineSeriesCanonical: a text line's series is its label set however
// it is written: its pairs in any order, a label name quoted or bare, the
// metric named bare or quoted inside the braces.
func TestLineSeriesCanonical(t *testing.T) {
	hash := func(base, line string) uint64 {
		var l lineSeries
		l.reset(base, nil)
		l.feed([]byte(line))
		return l.sum()
	}
	same := [][2]string{
		{`m_bucket{a="x",b="y",le="1"} 5`, `m_bucket{b="y",le="1",a="x"} 5`},
		{`m_count{a="x",b="y"} 5`, `m_sum{b="y",a="x"} 5`},
		{`m{a="x"} 1`, `m{"a"="x"} 1`},
		{`m{a="x",b="y"} 1`, `{"m",b="y",a="x"} 1`},
		{`m{a="x"} 1`, `{a="x","m"} 1`},
		{`m 1`, `{"m"} 1`},
	}
	for _, p := range same {
		if hash("m", p[0]) != hash("m", p[1]) {
			t.Errorf("%s and %s: two series, want one", p[0], p[1])
		}
	}
	apart := [][2]string{
		{`m{a="x",b="y"} 1`, `m{a="y",b="x"} 1`},
		{`m{a="x"} 1`, `m{"a=\"x\""="x"} 1`},
		{`m{"a"="x"} 1`, `m{"a\"b"="x"} 1`},
	}
	for _, p := range apart {
		if hash("m", p[0]) == hash("m", p[1]) {
			t.Errorf("%s and %s: one series, want two", p[0], p[1])
		}
	}
}

// reorderedSeries is a histogram m of n series whose _sum lines write
// their labels in the reverse order of the others'.
func reorderedSeries(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE m histogram\n")
	for i := range n {
		fmt.Fprintf(&b, "m_bucket{a=\"%d\",b=\"x\",le=\"1\"} 1\nm_bucket{a=\"%[1]d\",b=\"x\",le=\"+Inf\"} 1\n", i)
		fmt.Fprintf(&b, "m_sum{b=\"x\",a=\"%d\"} 1\nm_count{a=\"%[1]d\",b=\"x\"} 1\n", i)
	}
	return b.Bytes()
}

// TestSeriesCapLabelOrder: a series is counted once against the cap
// however its lines or messages order its labels: 2,100 series of one
// label set each, written in two orders, are 2,100, not 4,200 over the
// cap of 4,096.
func TestSeriesCapLabelOrder(t *testing.T) {
	const n = 2100
	t.Run("text", func(t *testing.T) {
		if _, err := parseExposition(reorderedSeries(n), textFormat, families(&Source{Metric: "m"})); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
	t.Run("protobuf", func(t *testing.T) {
		// each model's success counter given twice, its labels in two
		// orders (a page's repeat of a series is its own)
		mf := &dto.MetricFamily{Name: proto.String(tritonSuccessMetric), Type: dto.MetricType_COUNTER.Enum()}
		pair := func(n, v string) *dto.LabelPair { return &dto.LabelPair{Name: proto.String(n), Value: proto.String(v)} }
		for i := range n {
			m := fmt.Sprint("m", i)
			c := &dto.Counter{Value: proto.Float64(1)}
			mf.Metric = append(mf.Metric,
				&dto.Metric{Label: []*dto.LabelPair{pair("model", m), pair("version", "1")}, Counter: c},
				&dto.Metric{Label: []*dto.LabelPair{pair("version", "1"), pair("model", m)}, Counter: c})
		}
		var b bytes.Buffer
		if err := expfmt.NewEncoder(&b, protoFormat).Encode(mf); err != nil {
			t.Fatal(err)
		}
		if _, err := parseExposition(b.Bytes(), protoFormat, families(&Source{Preset: PresetTriton})); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
}

// quoteNames writes each sample line of body with its metric name
// quoted inside its braces: m{a="x"} 1 as {"m",a="x"} 1.
func quoteNames(body []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(body), "\n") {
		if line == "" || line[0] == '#' {
			b.WriteString(line)
			continue
		}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			fmt.Fprintf(&b, "{%q,%s", line[:i], line[i+1:])
			continue
		}
		i := strings.IndexByte(line, ' ')
		fmt.Fprintf(&b, "{%q}%s", line[:i], line[i:])
	}
	return b.Bytes()
}

// TestQuotedNamesFiltered: lines that quote their metric name are read as
// those of the bare name: a family the source does not read passed over
// (its quoted names, beyond what the parser takes, refused no scrape), the
// series the matchers do not pick neither counted nor decoded.
func TestQuotedNamesFiltered(t *testing.T) {
	t.Run("another family", func(t *testing.T) {
		var other bytes.Buffer
		for i := range 5000 {
			fmt.Fprintf(&other, "{\"gpu.temperature\",gpu=\"%d\"} 40\n", i)
		}
		body := append(other.Bytes(), vllmText("5")...)
		fams, err := parseExposition(body, textFormat, families(&Source{Preset: PresetVLLME2E}))
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if len(fams) != 1 {
			t.Errorf("families %v, want the histogram alone", fams)
		}
	})
	t.Run("matchers", func(t *testing.T) {
		m7 := &Source{Preset: PresetTriton, Matchers: map[string]string{"model": "m7"}}
		h, n, err := decodeFor(t, quoteNames(tritonPage(700, false)), false, m7)
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if h.req.count != 107 && h.count != 107 || h.start != 1.7e9 {
			t.Errorf("read %+v, want m7's 107 requests and the start time", h)
		}
		if n > 20 {
			t.Errorf("%d series decoded, want m7's and a line of each family", n)
		}
	})
	t.Run("counted", func(t *testing.T) {
		// the bare and the quoted lines of one series are one
		body := append(reorderedSeries(2100), quoteNames(reorderedSeries(2100))[len("# TYPE m histogram\n"):]...)
		_, err := parseExposition(body, textFormat, families(&Source{Metric: "m"}))
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		body := []byte(`{a="` + strings.Repeat("x", 100<<10) + `","m_count"} 1` + "\n")
		_, err := parseExposition(body, textFormat, families(&Source{Metric: "m"}))
		if !errors.Is(err, errQuotedNameCut) || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("err = %v, want %v at line 1", err, errQuotedNameCut)
		}
	})
}
