package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// fakeCollector serves one gauge per filter (or "all" without filters).
type fakeCollector struct{ names []string }

var fakeDesc = prometheus.NewDesc("vgpu_fake_ratio", "A test gauge.", []string{"collector"}, nil)

func (c fakeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c fakeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.names {
		ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 0.5, n)
	}
}

func newFakeCollector(filters ...string) (prometheus.Collector, error) {
	for _, f := range filters {
		if f == "bogus" {
			return nil, errors.New(`unknown collector "bogus"`)
		}
	}
	if len(filters) == 0 {
		filters = []string{"all"}
	}
	return fakeCollector{names: filters}, nil
}

type handlerFixture struct {
	h        http.Handler
	ready    atomic.Bool
	reloads  atomic.Int32
	reloadOK atomic.Bool
}

func newFixture(t *testing.T, self bool) *handlerFixture {
	t.Helper()
	f := &handlerFixture{}
	f.reloadOK.Store(true)
	o := handlerOptions{
		TelemetryPath: "/metrics",
		NewCollector:  newFakeCollector,
		MaxRequests:   2,
		Ready:         f.ready.Load,
		Reload: func() error {
			f.reloads.Add(1)
			if !f.reloadOK.Load() {
				return errors.New("tenants.yaml:3: unknown field \"nmae\"")
			}
			return nil
		},
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

func (f *handlerFixture) do(method, target string) (int, string, http.Header) {
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b), rec.Result().Header
}

func TestHandlerRoutes(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		method, target string
		ready          bool
		reloadOK       bool
		code           int
		body           string
	}{
		{"GET", "/", false, true, 200, `<a href="/metrics">`},
		{"GET", "/nope", false, true, 404, ""},
		{"GET", "/-/healthy", false, true, 200, "Healthy"},
		{"GET", "/-/ready", false, true, 503, "Not ready"},
		{"GET", "/-/ready", true, true, 200, "Ready"},
		{"GET", "/-/reload", true, true, 405, "Only POST"},
		{"PUT", "/-/reload", true, true, 405, "Only POST"},
		{"POST", "/-/reload", true, true, 200, "Reloaded"},
		{"POST", "/-/reload", true, false, 500, "tenants.yaml:3"},
		{"GET", "/metrics", true, true, 200, `vgpu_fake_ratio{collector="all"} 0.5`},
		{"GET", "/metrics?collect[]=gpu&collect[]=tenant", true, true, 200, `vgpu_fake_ratio{collector="tenant"} 0.5`},
		{"GET", "/metrics?collect[]=bogus", true, true, 400, `unknown collector "bogus"`},
	} {
		f.ready.Store(tc.ready)
		f.reloadOK.Store(tc.reloadOK)
		code, body, hdr := f.do(tc.method, tc.target)
		if code != tc.code {
			t.Errorf("%s %s: code %d, want %d (body %q)", tc.method, tc.target, code, tc.code, body)
		}
		if !strings.Contains(body, tc.body) {
			t.Errorf("%s %s: body %q lacks %q", tc.method, tc.target, body, tc.body)
		}
		if code == 405 && hdr.Get("Allow") != "POST" {
			t.Errorf("%s %s: Allow header %q", tc.method, tc.target, hdr.Get("Allow"))
		}
	}
	if n := f.reloads.Load(); n != 2 {
		t.Errorf("reload called %d times, want 2 (POSTs only)", n)
	}
}

func TestMetricsSelfMetrics(t *testing.T) {
	for _, self := range []bool{true, false} {
		f := newFixture(t, self)
		code, body, _ := f.do("GET", "/metrics")
		if code != 200 {
			t.Fatalf("code %d", code)
		}
		for _, name := range []string{"vgpu_exporter_build_info", "go_goroutines", "process_start_time_seconds", "promhttp_metric_handler_requests_total"} {
			if got := strings.Contains(body, name); got != self {
				t.Errorf("self metrics %v: %s present = %v", self, name, got)
			}
		}
		if !strings.Contains(body, "vgpu_fake_ratio") {
			t.Errorf("collector metrics missing: %q", body)
		}
		problems, err := promlint.New(strings.NewReader(body)).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestHandlerCustomTelemetryPath(t *testing.T) {
	h, err := newHandler(handlerOptions{TelemetryPath: "/gpu-metrics", NewCollector: newFakeCollector})
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{"/gpu-metrics": 200, "/metrics": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", target, rec.Code, want)
		}
	}
}

// A --web.telemetry-path that validates is served as the URL path it is:
// metrics there (at what a client asks for a link to it), the landing page
// at /, nothing at a path beside it or below it (a path ending in '/', a
// subtree's pattern, served metrics at every path below). The path is a ServeMux pattern: a
// space in it made the handler panic at start, wildcards in braces served
// metrics at every path ("/{x}") or in place of the landing page ("/{$}"),
// and a '?' or '#' left them where no request reaches.
func TestTelemetryPathServedAsGiven(t *testing.T) {
	for _, p := range []string{"/gpu-metrics", "/a/b", "/m%20x", "/metrics/", "/a b", "/a\tb", "/{x}", "/{$}", "/metrics?x", "/m#x", "/a//b", "/a/./b", "/a/../b", "/metrics/."} {
		c, err := parseArgs(t, "--web.telemetry-path="+p)
		if err != nil {
			continue // refused with a message
		}
		var h http.Handler
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q: validated, and the handler panicked: %v", p, r)
				}
			}()
			h, err = newHandler(handlerOptions{TelemetryPath: c.TelemetryPath, NewCollector: newFakeCollector})
		}()
		if h == nil || err != nil {
			continue
		}
		u, err := url.Parse(p)
		if err != nil {
			t.Errorf("%q: validated, and is no URL path: %v", p, err)
			continue
		}
		for _, tc := range []struct {
			u       *url.URL
			code    int
			content string
		}{{u, 200, "text/plain; version=0.0.4"}, {&url.URL{Path: "/"}, 200, "text/html"}, {&url.URL{Path: "/elsewhere"}, 404, "text/plain"},
			{&url.URL{Path: strings.TrimSuffix(u.Path, "/") + "/below"}, 404, "text/plain"}} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL, req.RequestURI = tc.u, tc.u.RequestURI()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if ct := rec.Header().Get("Content-Type"); rec.Code != tc.code || !strings.HasPrefix(ct, tc.content) {
				t.Errorf("path %q, GET %s: %d %s, want %d %s", p, tc.u.RequestURI(), rec.Code, ct, tc.code, tc.content)
			}
		}
	}
}

func newFakeCollectorFor(_ func() *tenant.Snapshot, _ log.Logger, filters ...string) (prometheus.Collector, error) {
	return newFakeCollector(filters...)
}

func TestLandingPageHasNoDeadLinks(t *testing.T) {
	f := newFixture(t, false)
	_, body, _ := f.do("GET", "/")
	if strings.Contains(body, "/debug/pprof") {
		t.Error("landing page links to pprof, which is not served")
	}
}

// blockingCollector holds every Collect until release is closed.
type blockingCollector struct {
	entered chan struct{}
	release chan struct{}
}

func (c blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c blockingCollector) Collect(ch chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, "blocked")
}

// slotHeld serves o with room for one request at a time and sends it a
// first request for target that stays in its collector; release lets that
// request finish and returns its status code.
func slotHeld(t *testing.T, o handlerOptions, target string) (h http.Handler, release func() int) {
	t.Helper()
	bc := blockingCollector{entered: make(chan struct{}, 4), release: make(chan struct{})}
	o.TelemetryPath = "/metrics"
	o.MaxRequests = 1
	o.NewCollector = func(...string) (prometheus.Collector, error) { return bc, nil }
	h, err := newHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		first <- rec.Code
	}()
	<-bc.entered // the first request holds the only slot
	return h, func() int {
		close(bc.release)
		return <-first
	}
}

func TestMaxRequestsCoversFilteredRequests(t *testing.T) {
	h, release := slotHeld(t, handlerOptions{}, "/metrics?collect[]=gpu")
	for _, target := range []string{"/metrics", "/metrics?collect[]=tenant"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s while the limit is reached: %d, want 503", target, rec.Code)
		}
	}
	if code := release(); code != 200 {
		t.Errorf("first request: %d", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Errorf("after the slot is free: %d", rec.Code)
	}
}

// The tuner page, which renders the whole state on each request, has a
// limit of its own, --web.max-requests where that is lower: a request
// beyond it is answered 503, and neither limit takes the other's slots.
func TestMaxRequestsCoversTunerPage(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var pages atomic.Int32
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if pages.Add(1) == 1 {
			close(entered)
			<-release
		}
	})
	h, releaseMetrics := slotHeld(t, handlerOptions{TunerPage: page}, "/metrics")
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
		first <- rec.Code
	}()
	<-entered // the page's only slot is held, and the metrics' one
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a second tuner page while the first renders: %d, want 503 (%d renders at once)", rec.Code, pages.Load())
	}
	close(release)
	if code := <-first; code != 200 {
		t.Errorf("first page: %d", code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
	if rec.Code != 200 {
		t.Errorf("tuner page with a metrics request in flight: %d, want 200", rec.Code)
	}
	if code := releaseMetrics(); code != 200 {
		t.Errorf("metrics request: %d", code)
	}
}

// The tuner page's limit is its own small one whatever --web.max-requests
// allows (40 by default; 0, no limit), and --web.max-requests where that
// is lower, for the HTML and the JSON apart: a request beyond it is
// answered 503 with a Retry-After of webui.TunerPageWriteTimeout, the
// longest a client that stops reading holds a slot (1 s, a scrape's,
// understated it), in a page that reloads itself (a plain text before,
// where a browser left on the page stopped), and only that many render at
// once; the HTML is served while the JSON's slots are held.
func TestTunerPageLimit(t *testing.T) {
	for _, tc := range []struct {
		maxRequests int64
		pages       int
	}{
		{40, webui.TunerPageMaxInFlight},
		{0, webui.TunerPageMaxInFlight},
		{1, 1},
	} {
		entered, release := make(chan struct{}), make(chan struct{})
		var pages atomic.Int32
		page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// the JSON's first slots, then the HTML's
			if n := pages.Add(1); n <= int32(tc.pages) || n > int32(tc.pages)+1 && n <= int32(2*tc.pages)+1 {
				entered <- struct{}{}
				<-release
			}
		})
		h, err := newHandler(handlerOptions{TelemetryPath: "/metrics", NewCollector: newFakeCollector, MaxRequests: tc.maxRequests, TunerPage: page})
		if err != nil {
			t.Fatal(err)
		}
		codes := make(chan int, 2*tc.pages)
		for range tc.pages {
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath+"?format=json", nil))
				codes <- rec.Code
			}()
			<-entered
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath+"?format=json", nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "10" {
			t.Errorf("--web.max-requests=%d: JSON %d while %d render: %d, Retry-After %q; want 503 with 10 (%d rendered)",
				tc.maxRequests, tc.pages+1, tc.pages, rec.Code, rec.Header().Get("Retry-After"), pages.Load())
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("--web.max-requests=%d: the HTML while the JSON's %d slots are held: %d, want 200", tc.maxRequests, tc.pages, rec.Code)
		}
		for range tc.pages {
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
				codes <- rec.Code
			}()
			select {
			case <-entered:
			case code := <-codes:
				t.Fatalf("--web.max-requests=%d: the HTML while the JSON's %d slots are held: %d, want it served", tc.maxRequests, tc.pages, code)
			}
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", webui.TunerPagePath, nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "10" {
			t.Errorf("--web.max-requests=%d: page %d while %d render: %d, Retry-After %q; want 503 with 10 (%d rendered)",
				tc.maxRequests, tc.pages+1, tc.pages, rec.Code, rec.Header().Get("Retry-After"), pages.Load())
		}
		if body := rec.Body.String(); !strings.Contains(body, `<meta http-equiv="refresh" content="10">`) {
			t.Errorf("--web.max-requests=%d: the page refused: %q, want a page that reloads itself (webui.NewTunerPageBusy)", tc.maxRequests, body)
		}
		close(release)
		for range 2 * tc.pages {
			if code := <-codes; code != http.StatusOK {
				t.Errorf("--web.max-requests=%d: a page within the limit: %d", tc.maxRequests, code)
			}
		}
	}
}

// Requests rejected beyond the limit are counted with the others and logged,
// once for a burst.
func TestRejectedRequestsCountedAndLogged(t *testing.T) {
	var logBuf testutil.SyncBuffer
	h, release := slotHeld(t, handlerOptions{Self: selfRegistry(), Logger: log.NewLogfmtLogger(&logBuf)}, "/metrics")
	const rejected = 5
	for range rejected {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("over the limit: %d", rec.Code)
		}
	}
	release()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `promhttp_metric_handler_requests_total{code="503"} 5`) {
		t.Errorf("503s not counted:\n%s", grepLines(body, "promhttp_metric_handler_requests_total"))
	}
	if n := strings.Count(logBuf.String(), "metrics requests rejected"); n != 1 {
		t.Errorf("%d log lines for a burst of %d rejections, want 1:\n%s", n, rejected, logBuf.String())
	}
}

// countingCollector serves vgpu_fake_ratio{collector="v<version>"} and counts
// its Collect calls.
type countingCollector struct{ version, calls *atomic.Int64 }

func (c countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.calls.Add(1)
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, fmt.Sprintf("v%d", c.version.Load()))
}

// The metrics endpoint serves the collector rendered once per version
// (re-rendered by the function it subscribes), the exporter's own
// metrics live, and filtered requests rendered on demand.
func TestMetricsRenderedOncePerVersion(t *testing.T) {
	var version, calls atomic.Int64
	var publish func()
	h, err := newHandler(handlerOptions{
		TelemetryPath: "/metrics",
		Self:          selfRegistry(),
		NewCollector: func(...string) (prometheus.Collector, error) {
			return countingCollector{&version, &calls}, nil
		},
		Version:   func() any { return version.Load() },
		Subscribe: func(p func()) { publish = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(target string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", target, rec.Code)
		}
		return rec.Body.String()
	}
	for range 5 {
		if body := get("/metrics"); !strings.Contains(body, `vgpu_fake_ratio{collector="v0"} 1`) {
			t.Fatalf("body lacks the collector's metrics: %q", body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("5 scrapes of one version collected %d times, want 1", n)
	}
	// The exporter's own metrics stay live: the request counter moves on
	// while the collector's part is reused.
	if body := get("/metrics"); !strings.Contains(body, `promhttp_metric_handler_requests_total{code="200"} 5`) {
		t.Errorf("request counter not live:\n%s", grepLines(body, "promhttp_metric_handler_requests_total"))
	}
	if publish == nil {
		t.Fatal("the handler subscribed nothing to publications")
	}
	version.Store(1)
	publish()
	if body := get("/metrics"); !strings.Contains(body, `collector="v1"`) || calls.Load() != 2 {
		t.Errorf("after publication, %d renderings, served %q", calls.Load(), grepLines(body, "vgpu_fake"))
	}
	get("/metrics?collect[]=gpu")
	if n := calls.Load(); n != 3 {
		t.Errorf("a collect[] request did not render (%d calls)", n)
	}
}

// A collector's persistent error is logged at error level once, then at
// debug level while it repeats: also for collect[] scrapes, each of which
// builds a collector of its own.
func TestFilteredScrapesLogPersistentErrorOnce(t *testing.T) {
	r := &gpu.Readings{Backend: "test", Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Up: true,
		VGPUs: []gpu.VGPUInstance{{ID: 1}, {ID: 1}}}}} // listed twice: the vgpu collector fails
	bl, err := tenant.NewBuilder(nil, tenant.BuilderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(&fixedSource{r: r}, bl, "", gpu.RealClock{}, time.Second, log.NewNopLogger())
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	var logged testutil.SyncBuffer
	logger := log.NewLogfmtLogger(&logged)
	h, err := newHandler(handlerOptions{TelemetryPath: "/metrics", NewCollector: func(filters ...string) (prometheus.Collector, error) {
		return svc.withTuner(newCollector, logger, filters)
	}})
	if err != nil {
		t.Fatal(err)
	}
	const scrapes = 5
	for range scrapes {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics?collect[]=vgpu", nil))
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
	}
	errs, debugs := 0, 0
	for l := range strings.SplitSeq(logged.String(), "\n") {
		if strings.Contains(l, "collector failed") {
			if strings.Contains(l, "level=error") {
				errs++
			} else if strings.Contains(l, "level=debug") {
				debugs++
			}
		}
	}
	if errs != 1 || debugs != scrapes-1 {
		t.Errorf("%d scrapes of a failing collector logged %d lines at error level and %d at debug level, want 1 and %d:\n%s", scrapes, errs, debugs, scrapes-1, logged.String())
	}
}
