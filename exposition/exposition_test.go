package exposition

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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

var fakeDesc = prometheus.NewDesc("vgpu_fake_ratio", "A test gauge.", []string{"collector"}, nil)

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
			"v"+strings.Repeat("x", i)+strconv.Itoa(int(c.version.Load())))
	}
}

// gate is a Gatherer that counts its calls and, while held, reports each
// on entered and blocks it until release: a rendering that the test lets
// finish.
type gate struct {
	g       prometheus.Gatherer
	calls   atomic.Int64
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gate) Gather() ([]*dto.MetricFamily, error) {
	g.calls.Add(1)
	if g.held.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.g.Gather()
}

type fixture struct {
	c       *Cache
	gate    *gate
	version atomic.Int64
	calls   atomic.Int64
}

// newFixture returns a Cache over a countingCollector, with the exporter's
// own metrics (Go and process) when self.
func newFixture(t *testing.T, self bool) *fixture {
	t.Helper()
	f := &fixture{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(countingCollector{&f.version, &f.calls})
	// entered has room for renderings the test does not expect, so that
	// they count and finish rather than block for ever.
	f.gate = &gate{g: reg, entered: make(chan struct{}, 4), release: make(chan struct{})}
	o := Options{Collectors: f.gate, Version: func() any { return f.version.Load() }}
	if self {
		sr := prometheus.NewRegistry()
		sr.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		o.Self = sr
	}
	f.c = New(o)
	return f
}

func (f *fixture) get(t *testing.T, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.c.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}
	return resp, body
}

// text is get's body, gunzipped when gzip was served.
func (f *fixture) text(t *testing.T, hdr map[string]string) string {
	t.Helper()
	resp, body := f.get(t, hdr)
	return string(gunzip(t, resp, body))
}

func gunzip(t *testing.T, resp *http.Response, body []byte) []byte {
	t.Helper()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body, err = io.ReadAll(zr); err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	return body
}

// served returns the version of the collectors' part that a request with
// headers hdr is served, in any format.
func (f *fixture) served(t *testing.T, hdr map[string]string) int {
	t.Helper()
	resp, body := f.get(t, hdr)
	dec := expfmt.NewDecoder(bytes.NewReader(gunzip(t, resp, body)), expfmt.ResponseFormat(resp.Header))
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); err != nil {
			t.Fatalf("no vgpu_fake_ratio served: %v", err)
		}
		if mf.GetName() != "vgpu_fake_ratio" {
			continue
		}
		// The label value is "v", some x and the version.
		val := mf.GetMetric()[0].GetLabel()[0].GetValue()
		v, err := strconv.Atoi(strings.TrimLeft(val[1:], "x"))
		if err != nil {
			t.Fatalf("label value %q: %v", val, err)
		}
		return v
	}
}

func TestRendersOncePerVersion(t *testing.T) {
	f := newFixture(t, true)
	for range 5 {
		if v := f.served(t, nil); v != 0 {
			t.Fatalf("served version %d, want 0", v)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("5 scrapes of one version collected %d times, want 1", n)
	}
	// A new version is rendered once at publication, for the encodings
	// asked for so far, and served from then on.
	f.version.Store(1)
	f.c.Publish()
	if n := f.calls.Load(); n != 2 {
		t.Errorf("publication rendered %d times in all, want 2", n)
	}
	if body := f.text(t, nil); !strings.Contains(body, `collector="v1"`) || strings.Contains(body, `collector="v0"`) {
		t.Errorf("new version not served: %q", body)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("a scrape after publication collected again (%d calls)", n)
	}
	// Publishing an unchanged version renders nothing.
	f.c.Publish()
	if n := f.calls.Load(); n != 2 {
		t.Errorf("publishing the same version rendered (%d calls)", n)
	}
}

// Without a version, every request renders.
func TestNoVersionRendersEachRequest(t *testing.T) {
	var v, calls atomic.Int64
	reg := prometheus.NewRegistry()
	reg.MustRegister(countingCollector{&v, &calls})
	c := New(Options{Collectors: reg})
	for range 3 {
		c.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	}
	c.Publish()
	if n := calls.Load(); n != 3 {
		t.Errorf("3 requests without a version collected %d times, want 3", n)
	}
}

// waitFor returns what ch yields, and fails the test if that takes a
// minute: a request or publication that blocks for ever is a failure,
// not a hung test. Nothing waits for time to pass.
func waitFor[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case x := <-ch:
		return x
	case <-time.After(time.Minute):
		t.Fatalf("%s: still blocked after a minute", what)
		panic("unreachable")
	}
}

// A scrape never waits on a render: while a new version is being encoded
// (held inside Gather, so the test decides when it ends), requests get
// the previous rendering at once; once it is encoded they get the new
// one, and each version was rendered once.
func TestScrapeNeverWaitsOnRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		// publish: the sampler publishes the new version. Without, the
		// version moves without a publication (the sampler's figures
		// after a failed sample) and the first request to see it starts
		// the rendering in the background.
		publish bool
	}{
		{"publication under way", nil, true},
		{"publication under way, gzip", map[string]string{"Accept-Encoding": "gzip"}, true},
		{"publication under way, protobuf", map[string]string{"Accept": string(expfmt.NewFormat(expfmt.TypeProtoDelim))}, true},
		{"version moved without publication", nil, false},
		{"version moved without publication, gzip", map[string]string{"Accept-Encoding": "gzip"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, true)
			if v := f.served(t, tc.hdr); v != 0 {
				t.Fatalf("first scrape served version %d", v)
			}
			f.version.Store(1)
			f.gate.held.Store(true)
			published := make(chan struct{})
			if tc.publish {
				go func() { f.c.Publish(); close(published) }()
				waitFor(t, "the publication's rendering to start", f.gate.entered)
			}
			for i := range 3 {
				got := make(chan int, 1)
				go func() { got <- f.served(t, tc.hdr) }()
				if v := waitFor(t, "a request during the rendering", got); v != 0 {
					t.Errorf("request %d during the rendering served version %d, want the previous, 0", i, v)
				}
				if !tc.publish && i == 0 {
					waitFor(t, "the background rendering to start", f.gate.entered)
				}
			}
			select {
			case <-published:
				t.Fatal("the publication returned before its rendering")
			default:
			}
			close(f.gate.release)
			if tc.publish {
				waitFor(t, "the publication", published)
			} else {
				f.c.Publish() // waits for the rendering under way, renders nothing more
			}
			if v := f.served(t, tc.hdr); v != 1 {
				t.Errorf("after the rendering: version %d served, want 1", v)
			}
			if n := f.gate.calls.Load(); n != 2 {
				t.Errorf("%d renderings, want 2 (one per version)", n)
			}
		})
	}
}

// The first request in an encoding has nothing older to be served: it
// waits for the rendering, and so does a request that comes during it,
// for the same rendering.
func TestFirstRequestWaitsForOneRendering(t *testing.T) {
	f := newFixture(t, false)
	f.gate.held.Store(true)
	got := make(chan int, 2)
	go func() { got <- f.served(t, nil) }()
	waitFor(t, "the rendering to start", f.gate.entered)
	go func() { got <- f.served(t, nil) }()
	select {
	case v := <-got:
		t.Fatalf("a request returned (version %d) before the first rendering", v)
	default:
	}
	close(f.gate.release)
	for range 2 {
		if v := waitFor(t, "a request", got); v != 0 {
			t.Errorf("served version %d", v)
		}
	}
	if n := f.gate.calls.Load(); n != 1 {
		t.Errorf("%d renderings, want 1", n)
	}
}

// Scrapes concurrent with publications of new versions: no client is
// served an older version after a newer one, and the last publication is
// what is served once it has returned.
func TestServedVersionNeverGoesBack(t *testing.T) {
	f := newFixture(t, false)
	gz := map[string]string{"Accept-Encoding": "gzip"}
	f.served(t, nil)
	f.served(t, gz)
	const versions = 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		hdr := map[string]string{}
		if i%2 == 0 {
			hdr = gz
		}
		wg.Go(func() {
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := f.served(t, hdr)
				if v < last {
					t.Errorf("served version %d after %d", v, last)
					return
				}
				last = v
			}
		})
	}
	for v := 1; v <= versions; v++ {
		f.version.Store(int64(v))
		f.c.Publish()
	}
	close(stop)
	wg.Wait()
	for _, hdr := range []map[string]string{nil, gz} {
		if v := f.served(t, hdr); v != versions {
			t.Errorf("%v: served version %d after the last publication, want %d", hdr, v, versions)
		}
	}
}

func TestConcurrentScrapesRenderOnce(t *testing.T) {
	f := newFixture(t, false)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { f.get(t, nil) })
	}
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Errorf("20 concurrent scrapes collected %d times, want 1", n)
	}
}

// Concurrent scrapes, gzip and plain, with the exporter's own metrics
// encoded live into reused buffers: every response is whole, of its
// Content-Length, and holds both parts.
func TestConcurrentScrapesOwnBuffers(t *testing.T) {
	f := newFixture(t, true)
	var wg sync.WaitGroup
	for i := range 40 {
		hdr := map[string]string{}
		if i%2 == 0 {
			hdr["Accept-Encoding"] = "gzip"
		}
		wg.Go(func() {
			for range 5 {
				resp, body := f.get(t, hdr)
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
func TestEncodings(t *testing.T) {
	f := newFixture(t, true)
	_, plain := f.get(t, nil)
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
				resp, body := f.get(t, tc.hdr)
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

func TestOpenMetricsEndsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	var v, calls atomic.Int64
	reg.MustRegister(countingCollector{&v, &calls})
	self := prometheus.NewRegistry()
	self.MustRegister(collectors.NewGoCollector())
	c := New(Options{Collectors: reg, Self: self, Version: func() any { return v.Load() }, OpenMetrics: true})
	for _, enc := range []string{"", "gzip"} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		req.Header.Set("Accept-Encoding", enc)
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
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
