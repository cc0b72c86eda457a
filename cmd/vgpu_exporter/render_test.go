package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// countingCollector serves vgpu_fake_ratio{collector="v<version>"} and counts
// its Collect calls.
type countingCollector struct {
	version *atomic.Int64
	calls   *atomic.Int64
}

func (c countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.calls.Add(1)
	for i := range 50 { // enough text for deflate to use more than one block type
		ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, float64(i),
			"v"+strings.Repeat("x", i)+string(rune('0'+c.version.Load())))
	}
}

type renderFixture struct {
	h       http.Handler
	version atomic.Int64
	calls   atomic.Int64
	publish func()
}

func newRenderFixture(t *testing.T, self bool) *renderFixture {
	t.Helper()
	f := &renderFixture{}
	o := handlerOptions{
		TelemetryPath: "/metrics",
		NewCollector: func(...string) (prometheus.Collector, error) {
			return countingCollector{&f.version, &f.calls}, nil
		},
		Version:   func() any { return f.version.Load() },
		Subscribe: func(p func()) { f.publish = p },
	}
	if self {
		o.Self = selfRegistry()
	}
	h, err := newHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *renderFixture) get(t *testing.T, target string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %q", target, resp.StatusCode, body)
	}
	return resp, body
}

func TestExpositionRendersOncePerVersion(t *testing.T) {
	f := newRenderFixture(t, true)
	for range 5 {
		_, body := f.get(t, "/metrics", nil)
		if !strings.Contains(string(body), `vgpu_fake_ratio{collector="v0"} 0`) {
			t.Fatalf("body lacks the collector's metrics: %q", body)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("5 scrapes of one version collected %d times, want 1", n)
	}
	// The exporter's own metrics stay live: the request counter moves on
	// while the collectors' part is reused.
	_, body := f.get(t, "/metrics", nil)
	if !strings.Contains(string(body), `promhttp_metric_handler_requests_total{code="200"} 5`) {
		t.Errorf("request counter not live:\n%s", grepLines(string(body), "promhttp_metric_handler_requests_total"))
	}

	// A new version is rendered once at publication, for the encodings
	// asked for so far, and served from then on.
	f.version.Store(1)
	f.publish()
	if n := f.calls.Load(); n != 2 {
		t.Errorf("publication rendered %d times in all, want 2", n)
	}
	_, body = f.get(t, "/metrics", nil)
	if !strings.Contains(string(body), `collector="v1"`) || strings.Contains(string(body), `collector="v0"`) {
		t.Errorf("new version not served: %q", grepLines(string(body), "vgpu_fake"))
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("a scrape after publication collected again (%d calls)", n)
	}
	// Filtered requests render on demand.
	f.get(t, "/metrics?collect[]=gpu", nil)
	if n := f.calls.Load(); n != 3 {
		t.Errorf("a collect[] request did not render (%d calls)", n)
	}
}

func TestExpositionConcurrentScrapesRenderOnce(t *testing.T) {
	f := newRenderFixture(t, false)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { f.get(t, "/metrics", nil) })
	}
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Errorf("20 concurrent scrapes collected %d times, want 1", n)
	}
}

// Concurrent scrapes, gzip and plain, with the exporter's own metrics
// encoded live into reused buffers: every response is whole, of its
// Content-Length, and holds both parts.
func TestExpositionConcurrentScrapesOwnBuffers(t *testing.T) {
	f := newRenderFixture(t, true)
	var wg sync.WaitGroup
	for i := range 40 {
		hdr := map[string]string{}
		if i%2 == 0 {
			hdr["Accept-Encoding"] = "gzip"
		}
		wg.Go(func() {
			for range 5 {
				resp, body := f.get(t, "/metrics", hdr)
				if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
					t.Errorf("Content-Length %s, body of %d bytes", cl, len(body))
					return
				}
				if resp.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					if body, err = io.ReadAll(zr); err != nil {
						t.Errorf("gzip body: %v", err)
						return
					}
				}
				for _, want := range []string{`vgpu_fake_ratio{collector="v0"} 0`, "\ngo_goroutines ", "\nprocess_open_fds "} {
					if !strings.Contains(string(body), want) {
						t.Errorf("body lacks %q", want)
					}
				}
			}
		})
	}
	wg.Wait()
}

// Every encoding decodes to the same families as the plain text.
func TestExpositionEncodings(t *testing.T) {
	f := newRenderFixture(t, true)
	_, plain := f.get(t, "/metrics", nil)
	want := familyNames(t, bytes.NewReader(plain), expfmt.NewFormat(expfmt.TypeTextPlain))
	if len(want) < 10 || !want["vgpu_fake_ratio"] || !want["go_goroutines"] {
		t.Fatalf("plain text families: %v", want)
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		typ  expfmt.FormatType
	}{
		{"gzip text", map[string]string{"Accept-Encoding": "gzip"}, expfmt.TypeTextPlain},
		{"protobuf", map[string]string{"Accept": string(expfmt.NewFormat(expfmt.TypeProtoDelim))}, expfmt.TypeProtoDelim},
		{"gzip protobuf", map[string]string{"Accept": string(expfmt.NewFormat(expfmt.TypeProtoDelim)), "Accept-Encoding": "deflate, gzip;q=0.5"}, expfmt.TypeProtoDelim},
		{"gzip refused", map[string]string{"Accept-Encoding": "gzip;q=0"}, expfmt.TypeTextPlain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // rendered, then cached
				resp, body := f.get(t, "/metrics", tc.hdr)
				if got := expfmt.ResponseFormat(resp.Header).FormatType(); got != tc.typ {
					t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
				}
				var r io.Reader = bytes.NewReader(body)
				if resp.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(r)
					if err != nil {
						t.Fatal(err)
					}
					zr.Multistream(false) // one member, so that every client reads it all
					unz, err := io.ReadAll(zr)
					if err != nil {
						t.Fatalf("gzip body: %v", err)
					}
					r = bytes.NewReader(unz)
				} else if strings.Contains(tc.hdr["Accept-Encoding"], "gzip") && !strings.Contains(tc.hdr["Accept-Encoding"], "q=0") {
					t.Fatal("gzip asked for, not served")
				}
				got := familyNames(t, r, expfmt.ResponseFormat(resp.Header))
				for n := range want {
					if !got[n] {
						t.Errorf("family %s missing", n)
					}
				}
			}
		})
	}
}

func TestExpositionOpenMetricsEndsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	var v, calls atomic.Int64
	reg.MustRegister(countingCollector{&v, &calls})
	e := newExposition(reg, selfRegistry(), func() any { return v.Load() }, true, nil)
	for _, enc := range []string{"", "gzip"} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		req.Header.Set("Accept-Encoding", enc)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if enc == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		s := string(body)
		if strings.Count(s, "# EOF") != 1 || !strings.HasSuffix(s, "# EOF\n") || !strings.Contains(s, "go_goroutines") || !strings.Contains(s, "vgpu_fake_ratio") {
			t.Errorf("%q: OpenMetrics body ends %q", enc, s[max(0, len(s)-40):])
		}
	}
}

func familyNames(t *testing.T, r io.Reader, format expfmt.Format) map[string]bool {
	t.Helper()
	dec := expfmt.NewDecoder(r, format)
	names := map[string]bool{}
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); err == io.EOF {
			return names
		} else if err != nil {
			t.Fatalf("decoding %s: %v", format, err)
		}
		if names[mf.GetName()] {
			t.Errorf("family %s twice", mf.GetName())
		}
		names[mf.GetName()] = true
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "br, gzip": true, "gzip;q=0": false, "gzip; q=0.0": false,
		"gzip;q=0.1": true, "deflate": false, "x-gzip": false,
	} {
		hdr := http.Header{}
		if h != "" {
			hdr.Set("Accept-Encoding", h)
		}
		if got := acceptsGzip(hdr); got != want {
			t.Errorf("%q: %v, want %v", h, got, want)
		}
	}
}
