package latency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// summarySeries is a text summary m of n series, each with the three
// quantiles a Triton summary has.
func summarySeries(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE m summary\n")
	for i := range n {
		for _, q := range []string{"0.5", "0.9", "0.99"} {
			fmt.Fprintf(&b, "m{a=\"%x\",quantile=%q} 0.1\n", i, q)
		}
		fmt.Fprintf(&b, "m_sum{a=\"%x\"} 1\nm_count{a=\"%x\"} 10\n", i, i)
	}
	return b.Bytes()
}

// TestSeriesCap: a source's families may hold at most maxSeries series,
// counted as the text and protobuf decoders meet them: a histogram's
// buckets, _count and _sum lines of one label set are one series, a
// summary's quantiles too; one series more fails the scrape, its error
// saying how many there are (all of them counted) and the cap.
func TestSeriesCap(t *testing.T) {
	untyped := func(n int) []byte { // no TYPE line: m_bucket, m_count, m_sum apart
		return bytes.TrimPrefix(manySeries(n, 3, 10), []byte("# TYPE m histogram\n"))
	}
	withStart := func(b []byte) []byte { // one series more: the start time
		return append(b, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n"...)
	}
	// reordered writes each series' lines apart from the others'.
	reordered := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString("# TYPE m histogram\n")
		for _, suffix := range []string{`_bucket{a="%x",le="1"} 10`, `_bucket{a="%x",le="+Inf"} 10`, `_count{a="%x"} 10`} {
			for i := range n {
				fmt.Fprintf(&b, "m"+suffix+"\n", i)
			}
		}
		return b.Bytes()
	}
	tests := []struct {
		name    string
		body    []byte
		summary bool
		want    string // "" accepted; else in the error
	}{
		{"histogram at the cap", manySeries(maxSeries, 3, 10), false, ""},
		{"histogram one over", manySeries(maxSeries+1, 1, 10), false, "4097 series matching the source in its families; a source may have at most 4096"},
		{"histogram far over", manySeries(49_990, 1, 10), false, "49990 series matching the source in its families; a source may have at most 4096"},
		{"series' lines apart, at the cap", reordered(maxSeries), false, ""},
		{"untyped at the cap", untyped(maxSeries), false, ""},
		{"untyped one over", untyped(maxSeries + 1), false, "4097 series"},
		{"the start time counts", withStart(manySeries(maxSeries, 1, 10)), false, "4097 series"},
		{"summary at the cap", summarySeries(maxSeries), true, ""},
		{"summary one over", summarySeries(maxSeries + 1), true, "4097 series"},
	}
	for _, tc := range tests {
		for _, proto := range []bool{false, true} {
			name := tc.name + " (text)"
			body := tc.body
			if proto {
				name = tc.name + " (protobuf)"
				body = protoBody(t, body)
			}
			t.Run(name, func(t *testing.T) {
				if tc.summary && proto {
					// quantiles are no labels in protobuf: nothing more to see
					t.Skip()
				}
				fams, err := decodeExposition(bytes.NewReader(body), int64(len(body)), contentFormat(proto), families(&Source{Metric: "m"}), nil)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if m := fams["m"]; !tc.summary && !strings.HasPrefix(tc.name, "untyped") && len(m.GetMetric()) != maxSeries {
						t.Errorf("%d series decoded, want %d", len(m.GetMetric()), maxSeries)
					}
					return
				}
				if !errors.Is(err, errTooManySeries) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
			})
		}
	}
}

var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// contentFormat is the format a text or a protobuf body is decoded in.
func contentFormat(proto bool) expfmt.Format {
	if proto {
		return protoFormat
	}
	return textFormat
}

// A page over the cap past the lines the source's families may hold is
// refused saying how many series were counted before the count stopped.
func TestSeriesCapCountStops(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("# TYPE m histogram\n")
	for i := range maxTextLines + 10 {
		fmt.Fprintf(&b, "m_count{a=\"%x\"} 1\n", i)
	}
	_, err := parseExposition(b.Bytes(), textFormat, families(&Source{Metric: "m"}))
	if want := fmt.Sprintf("more than %d series", maxTextLines-1); !errors.Is(err, errTooManySeries) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestSeriesCapChangesNothing: an answer over the cap fails the scrape,
// logged with the tenant's name, the count and the cap, and changes
// nothing: the next answer is counted from the last one accepted.
func TestSeriesCapChangesNothing(t *testing.T) {
	for _, proto := range []bool{false, true} {
		t.Run(fmt.Sprint("protobuf ", proto), func(t *testing.T) {
			var mu sync.Mutex
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if proto {
					w.Header().Set("Content-Type", string(protoFormat))
				}
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			serve := func(b []byte) {
				if proto {
					b = protoBody(t, b)
				}
				mu.Lock()
				body = b
				mu.Unlock()
			}
			var logs testutil.SyncBuffer
			p := NewPool(Options{HTTPClient: srv.Client(), Logger: log.NewLogfmtLogger(&logs)})
			p.Set([]Spec{{Name: "chat", Key: "k", Window: time.Hour,
				Source:    &Source{URL: srv.URL, Metric: "m", Timeout: 10 * time.Second, MaxBytes: 4 << 20},
				Objective: &Objective{Quantile: 0.99, Target: 2 * time.Second}}}, time.Minute)
			ctx := context.Background()
			serve(manySeries(10, 1, 5))
			p.Refresh(ctx) // the baseline
			serve(manySeries(maxSeries+1, 1, 7))
			p.Refresh(ctx)
			st, _ := p.Status("chat")
			if st.SourceUp || st.Measured || st.RequestsTotal != 0 || !strings.Contains(st.LastError, "4097 series matching the source in its families; a source may have at most 4096") {
				t.Fatalf("over the cap: %+v", st)
			}
			if l := logs.String(); !strings.Contains(l, "tenant=chat") || !strings.Contains(l, "4097 series") {
				t.Errorf("log %q names not the tenant and the count", l)
			}
			serve(manySeries(10, 1, 8))
			p.Refresh(ctx)
			if st, _ := p.Status("chat"); !st.SourceUp || st.RequestsTotal != 10*3 {
				t.Errorf("after the refused answer: %+v, want 30 requests counted from the baseline", st)
			}
		})
	}
}

// TestLineSeries: a text line's series is its family and its labels but
// le and quantile, however the line comes in pieces.
func TestLineSeries(t *testing.T) {
	hash := func(base string, pieces ...string) uint64 {
		var l lineSeries
		l.reset(base, nil)
		for _, p := range pieces {
			l.feed([]byte(p))
		}
		return l.sum()
	}
	whole := func(base, line string) uint64 { return hash(base, line) }
	same := [][2]string{
		{`m_bucket{a="x",le="1"} 5`, `m_count{a="x"} 5`},
		{`m_bucket{a="x",le="1"} 5`, `m_bucket{ a="x" , le="+Inf" } 5`},
		{`m_bucket{le="1",a="x"} 5`, `m_bucket{a="x",} 5`},
		{`m{a="x",quantile="0.5"} 1`, `m_sum{a="x"} 1`},
		{`m_count 5`, `m_sum{} 2`},
		{`m{"le"="1",x="1"} 1`, `m{x="1"} 1`},
	}
	for _, p := range same {
		if whole("m", p[0]) != whole("m", p[1]) {
			t.Errorf("%s and %s: two series, want one", p[0], p[1])
		}
	}
	apart := [][2]string{
		{`m{a="x"} 1`, `m{a="y"} 1`},
		{`m{a="x"} 1`, `m{a="x",b="y"} 1`},
		{`m{a="x,le=\"1\""} 1`, `m{a="x"} 1`},      // le inside a value is no label
		{`m{a="x",b="y"} 1`, `m{a="x,b=\"y\""} 1`}, // nor a pair
		{`m{lee="1"} 1`, `m{} 1`},
	}
	for _, p := range apart {
		if whole("m", p[0]) == whole("m", p[1]) {
			t.Errorf("%s and %s: one series, want two", p[0], p[1])
		}
	}
	if whole("m", `m{a="x"} 1`) == whole("n", `n{a="x"} 1`) {
		t.Error("two families' series are one")
	}
	if whole("", `{"m.x",a="x",le="1"} 1`) != whole("", `{"m.x", a="x", "le"="2"} 1`) {
		t.Error("a quoted name's buckets are several series")
	}
	// Cut anywhere, a line is the same series.
	for _, line := range []string{`m_bucket{a="x\"y,z",b="\\",le="1"} 5`, `{"m.x",a="x",le="1"} 1`} {
		want := whole("m", line)
		for i := range len(line) + 1 {
			for j := i; j <= len(line); j++ {
				if got := hash("m", line[:i], line[i:j], line[j:]); got != want {
					t.Fatalf("%q cut at %d and %d: another series", line, i, j)
				}
			}
		}
	}
}
