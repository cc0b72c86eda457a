package latency

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// tritonPage is a Triton page of n models (one version each): the
// success, failure (by reason, Triton 23.x+) and duration counters, and,
// where full, the first-response histogram; and the start time.
func tritonPage(n int, full bool) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE nv_inference_request_success counter\n")
	for i := range n {
		fmt.Fprintf(&b, "nv_inference_request_success{model=\"m%d\",version=\"1\"} %d\n", i, 100+i)
	}
	b.WriteString("# TYPE nv_inference_request_failure counter\n")
	for i := range n {
		for _, r := range []string{"REJECTED", "CANCELED", "BACKEND", "OTHER"} {
			fmt.Fprintf(&b, "nv_inference_request_failure{model=\"m%d\",reason=%q,version=\"1\"} 0\n", i, r)
		}
	}
	b.WriteString("# TYPE nv_inference_request_duration_us counter\n")
	for i := range n {
		fmt.Fprintf(&b, "nv_inference_request_duration_us{model=\"m%d\",version=\"1\"} %d\n", i, 1000*(100+i))
	}
	if full {
		b.WriteString("# TYPE nv_inference_first_response_histogram_ms histogram\n")
		for i := range n {
			for _, le := range []string{"10", "100", "+Inf"} {
				fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{model=\"m%d\",version=\"1\",le=%q} %d\n", i, le, 100+i)
			}
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_sum{model=\"m%d\",version=\"1\"} 5\n", i)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_count{model=\"m%d\",version=\"1\"} %d\n", i, 100+i)
		}
	}
	b.WriteString("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n")
	return b.Bytes()
}

// decodeFor decodes body as a source reads it: its families, its matchers.
func decodeFor(t *testing.T, body []byte, proto bool, src *Source) (histo, int, error) {
	t.Helper()
	if proto {
		body = protoBody(t, body)
	}
	fams, err := decodeExposition(bytes.NewReader(body), int64(len(body)), contentFormat(proto), families(src), src.Matchers)
	if err != nil {
		return histo{}, 0, err
	}
	n := 0
	for _, mf := range fams {
		n += len(mf.GetMetric())
	}
	h, err := extract(src, fams)
	return h, n, err
}

// TestSeriesCapAfterMatchers: the series cap counts the series a
// source's matchers pick, not the page's: a tenant of one model on a
// Triton server of hundreds reads its own, the others' series neither
// counted nor decoded (a text family keeps its first line, whose series
// extract passes over); over the cap in series that match is refused.
func TestSeriesCapAfterMatchers(t *testing.T) {
	m7 := &Source{Preset: PresetTriton, Matchers: map[string]string{"model": "m7"}}
	for _, tc := range []struct {
		models int
		full   bool
	}{{600, true}, {700, false}} {
		for _, proto := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d models, histogram %v, protobuf %v", tc.models, tc.full, proto), func(t *testing.T) {
				h, n, err := decodeFor(t, tritonPage(tc.models, tc.full), proto, m7)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if h.req.count != 107 && h.count != 107 || h.start != 1.7e9 {
					t.Errorf("read %+v, want m7's 107 requests and the start time", h)
				}
				// m7's series (1+4+1+3+1+1: success, failures, duration,
				// the histogram's buckets, sum and count), the start
				// time, and in text a first line of each name
				if limit := 11 + 1 + 6; n > limit {
					t.Errorf("%d series decoded, want at most %d: the other models' kept", n, limit)
				}
			})
		}
	}
	// 4,097 series of m7 (as many versions) among 5,000 of other models
	over := bytes.NewBufferString("# TYPE nv_inference_request_success counter\n")
	for i := range 5000 {
		fmt.Fprintf(over, "nv_inference_request_success{model=\"x%d\",version=\"1\"} 1\n", i)
	}
	for i := range maxSeries + 1 {
		fmt.Fprintf(over, "nv_inference_request_success{model=\"m7\",version=\"%d\"} 1\n", i)
	}
	for _, proto := range []bool{false, true} {
		_, _, err := decodeFor(t, over.Bytes(), proto, m7)
		if want := "4097 series matching the source in its families; a source may have at most 4096"; !errors.Is(err, errTooManySeries) || !strings.Contains(err.Error(), want) {
			t.Errorf("protobuf %v: err = %v, want %q", proto, err, want)
		}
	}
}

// Matchers that pick no series of a family leave it decoded (empty, or
// with a series of another's), as a whole page would: its absence says
// something else.
func TestSeriesMatchNone(t *testing.T) {
	src := &Source{Preset: PresetTriton, Matchers: map[string]string{"model": "nope"}}
	for _, proto := range []bool{false, true} {
		_, _, err := decodeFor(t, tritonPage(3, true), proto, src)
		if want := "nv_inference_request_success has no series matching map[model:nope]"; err == nil || err.Error() != want {
			t.Errorf("protobuf %v: err = %v, want %q", proto, err, want)
		}
	}
}

// TestLineSeriesMatch: a text line is checked against the matchers as
// labelsMatch checks its decoded series, however it comes in pieces.
func TestLineSeriesMatch(t *testing.T) {
	m := newSeriesMatch(map[string]string{"model": `a"b\c` + "\n", "version": ""})
	tests := []struct {
		line string
		want bool
	}{
		{`m{model="a\"b\\c\n"} 1`, true},
		{`m{ model = "a\"b\\c\n" , le="1"} 1`, true},
		{`m{"model"="a\"b\\c\n"} 1`, true},
		{`{"m.x","model"="a\"b\\c\n"} 1`, true},
		{`m{model="a\"b\\c\n",version=""} 1`, true},
		{`m{model="a\"b\\c\n",version="1"} 1`, false},
		{`m{model="a\"b\\c\n",model="x"} 1`, true}, // the first
		{`m{model="x",model="a\"b\\c\n"} 1`, false},
		{`m{model="a\"b\\c\nd"} 1`, false},
		{`m{model="a\"b\\c"} 1`, false},
		{`m{model="a\"b\\c\n"x} 1`, false},
		{`m{modelx="a\"b\\c\n"} 1`, false},
		{`m{a="model=\"a\\\"b\\\\c\\n\""} 1`, false},
		{`m{} 1`, false},
		{`m 1`, false},
	}
	for _, tc := range tests {
		for i := range len(tc.line) + 1 {
			var l lineSeries
			l.reset("m", m)
			l.feed([]byte(tc.line[:i]))
			l.feed([]byte(tc.line[i:]))
			if got := l.matches(true); got != tc.want {
				t.Fatalf("%s cut at %d: match %v, want %v", tc.line, i, got, tc.want)
			}
		}
	}
	var l lineSeries
	l.reset("m", m)
	l.feed([]byte(`m{model="a\"b`))
	if !l.matches(false) {
		t.Error("a line whose labels are not read whole is not taken as matching")
	}
}
