package exposition

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Options.Text renders the text format, plain and gzipped, in place of
// gathering and encoding Collectors, unless it answers unsupported; the
// other formats are always gathered and encoded.
func TestTextRenderer(t *testing.T) {
	const fromText = "# from Text\n"
	for _, tc := range []struct {
		name     string
		err      error
		accept   string
		gzip     bool
		wantText bool
	}{
		{name: "text", accept: "text/plain", wantText: true},
		{name: "text, gzip", accept: "text/plain", gzip: true, wantText: true},
		{name: "text, error", accept: "text/plain", err: errors.New("duplicate"), wantText: true},
		{name: "text, unsupported", accept: "text/plain", err: errors.ErrUnsupported},
		{name: "protobuf", accept: "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v, calls, texts atomic.Int64
			reg := prometheus.NewRegistry()
			reg.MustRegister(countingCollector{&v, &calls})
			c := New(Options{Collectors: reg, Version: func() any { return v.Load() }, Text: func(buf *bytes.Buffer, yield func()) error {
				texts.Add(1)
				if !errors.Is(tc.err, errors.ErrUnsupported) {
					buf.WriteString(fromText)
				}
				return tc.err
			}})
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept", tc.accept)
			if tc.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if tc.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			gotText := string(body) == fromText
			if gotText != tc.wantText {
				t.Errorf("served %.80q; from Text: %v, want %v", body, gotText, tc.wantText)
			}
			wantTexts, wantCalls := int64(1), int64(0)
			if !strings.HasPrefix(tc.accept, "text/plain") {
				wantTexts = 0
			}
			if !tc.wantText {
				wantCalls = 1
			}
			if texts.Load() != wantTexts || calls.Load() != wantCalls {
				t.Errorf("Text called %d times, Collectors gathered %d times; want %d and %d", texts.Load(), calls.Load(), wantTexts, wantCalls)
			}
		})
	}
}

// Options.SelfText renders the exporter's own metrics in the text format,
// after the collectors' part; the other formats gather Self.
func TestSelfTextRenderer(t *testing.T) {
	for _, tc := range []struct {
		accept   string
		wantText bool
	}{
		{"text/plain", true},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", false},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			var v, calls atomic.Int64
			reg := prometheus.NewRegistry()
			reg.MustRegister(countingCollector{&v, &calls})
			self := NewSelf(prometheus.NewGauge(prometheus.GaugeOpts{Name: "vgpu_self_test", Help: "A test gauge."}))
			c := New(Options{Collectors: reg, Self: self, OpenMetrics: true, SelfText: func(buf *bytes.Buffer, yield func()) error {
				buf.WriteString("# from SelfText\n")
				return nil
			}})
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept", tc.accept)
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			body := rec.Body.String()
			if got := strings.HasSuffix(body, "# from SelfText\n"); got != tc.wantText {
				t.Errorf("served ...%q; from SelfText: %v, want %v", body[max(0, len(body)-120):], got, tc.wantText)
			}
			if got := strings.Contains(body, "vgpu_self_test"); got == tc.wantText {
				t.Errorf("Self gathered: %v, want %v", got, !tc.wantText)
			}
		})
	}
}
