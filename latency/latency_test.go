package latency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "latency", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func extractFixture(t *testing.T, src *Source, name string) (histo, error) {
	t.Helper()
	fams, err := parseExposition(fixture(t, name), expfmt.FmtText, nil)
	if err != nil {
		return histo{}, err
	}
	return extract(src, fams)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var vllmSrc = &Source{URL: "sim://chat", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "llama"}, Timeout: time.Second, MaxBytes: 1 << 20}

func TestExtractFixtures(t *testing.T) {
	tgi := &Source{URL: "sim://x", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20}
	itl := &Source{URL: "sim://x", Preset: PresetVLLMITL, Timeout: time.Second, MaxBytes: 1 << 20}
	triton := &Source{URL: "sim://x", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20}
	noMatch := &Source{URL: "sim://x", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "mistral"}, Timeout: time.Second, MaxBytes: 1 << 20}
	all := &Source{URL: "sim://x", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	tests := []struct {
		name    string
		src     *Source
		file    string
		bounds  []float64
		cum     []float64
		count   float64
		wantErr string
	}{
		{"vllm matcher picks one model", vllmSrc, "vllm-1.txt", []float64{0.1, 0.25, 0.5, 1}, []float64{100, 300, 380, 395}, 400, ""},
		{"vllm no matcher sums models", all, "vllm-1.txt", []float64{0.1, 0.25, 0.5, 1}, []float64{107, 309, 389, 404}, 409, ""},
		{"reordered buckets", vllmSrc, "vllm-reordered.txt", []float64{0.1, 0.25, 0.5, 1}, []float64{150, 500, 640, 694}, 700, ""},
		{"untyped series", vllmSrc, "vllm-untyped.txt", []float64{0.1, 0.25, 0.5, 1}, []float64{150, 500, 640, 694}, 700, ""},
		{"itl falls back to time_per_output_token", itl, "vllm-tpot.txt", []float64{0.01, 0.025, 0.05}, []float64{10, 30, 40}, 40, ""},
		{"tgi", tgi, "tgi-1.txt", []float64{0.5, 1, 2, 4}, []float64{20, 60, 90, 100}, 100, ""},
		{"triton counters: requests, not inferences", triton, "triton-counters-1.txt", nil, nil, 100, ""},
		{"triton histogram in seconds", triton, "triton-histogram-1.txt", []float64{0.01, 0.05, 0.1, 0.5}, []float64{20, 60, 95, 100}, 100, ""},
		{"decreasing buckets", vllmSrc, "vllm-decreasing.txt", nil, nil, 0, "bucket counts decrease"},
		{"NaN bucket", vllmSrc, "vllm-nan.txt", nil, nil, 0, "bad bucket"},
		{"only +Inf", vllmSrc, "vllm-inf-only.txt", nil, nil, 0, "only a +Inf bucket"},
		{"gauge", vllmSrc, "vllm-gauge-not-histogram.txt", nil, nil, 0, "not a histogram"},
		{"no series for matcher", noMatch, "vllm-1.txt", nil, nil, 0, "no series matching"},
		{"histogram absent", tgi, "vllm-1.txt", nil, nil, 0, "no histogram [tgi_request_duration]"},
		{"triton without success counter", triton, "triton-missing-success.txt", nil, nil, 0, "no nv_inference_request_success"},
		{"not an exposition", vllmSrc, "garbage.txt", nil, nil, 0, "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := extractFixture(t, tc.src, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.count != tc.count || len(h.bounds) != len(tc.bounds) {
				t.Fatalf("got %+v", h)
			}
			for i := range tc.bounds {
				if h.bounds[i] != tc.bounds[i] || h.cum[i] != tc.cum[i] {
					t.Fatalf("got %+v, want bounds %v cum %v", h, tc.bounds, tc.cum)
				}
			}
		})
	}
}

// TestVLLMWindowByHand follows a vLLM e2e histogram over three scrapes and
// checks the window figures against a hand computation.
func TestVLLMWindowByHand(t *testing.T) {
	tr := newSLOTracker(Spec{Name: "chat", Source: vllmSrc, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: 5 * time.Minute})
	t0 := time.Unix(1000, 0)
	observe := func(at time.Time, file string) {
		h, err := extractFixture(t, vllmSrc, file)
		if err != nil {
			t.Fatal(err)
		}
		tr.observe(at, h)
	}

	observe(t0, "vllm-1.txt")
	st := tr.Status()
	if st.RequestsTotal != 0 || len(st.Quantiles) != 0 || st.Attainment != nil || !st.SourceUp {
		t.Fatalf("after the first scrape (the baseline) = %+v", st)
	}

	observe(t0.Add(15*time.Second), "vllm-2.txt")
	// Deltas (model_name="llama" only), cumulative:
	//   le=0.1: 150-100 = 50    le=0.25: 500-300 = 200
	//   le=0.5: 640-380 = 260   le=1:    694-395 = 299    count: 700-400 = 300
	// p50: rank 0.5*300 = 150 falls in (0.1,0.25]: 0.1 + 0.15*(150-50)/(200-50) = 0.2
	// p90: rank 270 falls in (0.5,1]: 0.5 + 0.5*(270-260)/(299-260) = 0.5 + 5/39
	// p99: rank 297 falls in (0.5,1]: 0.5 + 0.5*(297-260)/39 = 0.5 + 18.5/39
	// good at 0.3 s: in (0.25,0.5]: 200 + (260-200)*(0.3-0.25)/0.25 = 212
	st = tr.Status()
	want := map[float64]float64{0.5: 0.2, 0.9: 0.5 + 5.0/39, 0.99: 0.5 + 18.5/39}
	for q, v := range want {
		if got, ok := st.Quantiles[q]; !ok || !near(got, v) {
			t.Errorf("p%v = %v, want %v", q*100, got, v)
		}
	}
	if st.RequestsTotal != 300 || !near(st.GoodRequestsTotal, 212) || !st.GoodKnown {
		t.Errorf("total %v good %v, want 300 212", st.RequestsTotal, st.GoodRequestsTotal)
	}
	if st.Attainment == nil || !near(*st.Attainment, 212.0/300) {
		t.Errorf("attainment %v, want %v", st.Attainment, 212.0/300)
	}
	if st.MeanSeconds == nil || !near(*st.MeanSeconds, 70.0/300) {
		t.Errorf("mean %v, want %v", st.MeanSeconds, 70.0/300)
	}
	if st.Quantile != 0.99 || st.TargetSeconds != 0.3 || st.WindowRequests != 300 {
		t.Errorf("objective %+v", st)
	}

	// vLLM restarted: every counter is lower; the delta is the new values.
	// good at 0.3: 8 + (9-8)*0.2 = 8.2
	observe(t0.Add(30*time.Second), "vllm-3-restarted.txt")
	st = tr.Status()
	if st.RequestsTotal != 310 || !near(st.GoodRequestsTotal, 220.2) {
		t.Errorf("after reset: total %v good %v, want 310 220.2", st.RequestsTotal, st.GoodRequestsTotal)
	}
	if st.Attainment == nil || !near(*st.Attainment, 220.2/310) {
		t.Errorf("after reset: attainment %v", st.Attainment)
	}

	// The source disappears: counters stay, the window empties as time passes.
	tr.fail(t0.Add(2*time.Minute), errors.New("connection refused"))
	st = tr.Status()
	if st.SourceUp || st.ScrapeErrorsTotal != 1 || st.RequestsTotal != 310 || st.Attainment == nil || st.LastError == "" {
		t.Errorf("source down, window still covers the data: %+v", st)
	}
	tr.fail(t0.Add(6*time.Minute), errors.New("connection refused"))
	st = tr.Status()
	if st.ScrapeErrorsTotal != 2 || len(st.Quantiles) != 0 || st.Attainment != nil || st.RequestsTotal != 310 || !near(st.GoodRequestsTotal, 220.2) {
		t.Errorf("window expired: %+v", st)
	}
}

// TestTritonShapes follows a Triton server over two scrapes in each of its
// exposition shapes. bert served 50 requests (40 succeeded, 10 failed) in
// 400 inferences (batches of 8) taking 2 s in all: the mean is 40 ms, not
// 2 s / 400 = 5 ms.
func TestTritonShapes(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20}
	tests := []struct {
		shape     string
		quantiles map[float64]float64
		// good and attainment; good < 0: not countable
		good, attainment float64
	}{
		// --metrics-config defaults: counters only.
		{"counters", map[float64]float64{}, -1, 0},
		// summary_latencies=true: the server's own quantiles of the second
		// scrape.
		{"summary", map[float64]float64{0.5: 0.032, 0.9: 0.056, 0.99: 0.095}, -1, 0},
		// histogram_latencies=true: deltas le=10ms 5, 50ms 30, 100ms 40,
		// 500ms 40, count 40 (the successful requests).
		//   p50: rank 20 in (10,50]:  10 + 40*(20-5)/(30-5) = 34 ms
		//   p90: rank 36 in (50,100]: 50 + 50*(36-30)/(40-30) = 80 ms
		//   p99: rank 39.6:           50 + 50*9.6/10 = 98 ms
		//   good at 80 ms: 30 + 10*(80-50)/50 = 36 of 50 requests (the
		//   failures are not good)
		{"histogram", map[float64]float64{0.5: 0.034, 0.9: 0.08, 0.99: 0.098}, 36, 36.0 / 50},
	}
	for _, tc := range tests {
		t.Run(tc.shape, func(t *testing.T) {
			tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Minute})
			if st := tr.Status(); st.GoodKnown {
				t.Errorf("before the first scrape GoodKnown = true; Triton's buckets depend on its flags")
			}
			t0 := time.Unix(0, 0)
			for i := 1; i <= 2; i++ {
				h, err := extractFixture(t, src, fmt.Sprintf("triton-%s-%d.txt", tc.shape, i))
				if err != nil {
					t.Fatal(err)
				}
				tr.observe(t0.Add(time.Duration(i)*15*time.Second), h)
				if st := tr.Status(); i == 1 && (st.GoodKnown != (tc.good >= 0) || st.GoodRequestsTotal != 0 || st.RequestsTotal != 0) {
					t.Errorf("after the baseline: GoodKnown %v good %v requests %v, want %v 0 0", st.GoodKnown, st.GoodRequestsTotal, st.RequestsTotal, tc.good >= 0)
				}
			}
			st := tr.Status()
			// 2 s of duration over the 40 successes (the 10 failures
			// are not timed), as the histogram's 2000 ms over 40 says
			if st.MeanSeconds == nil || !near(*st.MeanSeconds, 0.05) {
				t.Errorf("mean = %v, want 0.05", ptrString(st.MeanSeconds))
			}
			if st.RequestsTotal != 50 || st.WindowRequests != 50 {
				t.Errorf("requests total %v, in window %v; want 50 (success + failure)", st.RequestsTotal, st.WindowRequests)
			}
			if len(st.Quantiles) != len(tc.quantiles) {
				t.Errorf("quantiles %v, want %v", st.Quantiles, tc.quantiles)
			}
			for q, v := range tc.quantiles {
				if got, ok := st.Quantiles[q]; !ok || !near(got, v) {
					t.Errorf("p%v = %v (present %v), want %v", q*100, got, ok, v)
				}
			}
			if tc.good < 0 {
				if st.GoodKnown || st.GoodRequestsTotal != 0 || st.Attainment != nil {
					t.Errorf("good requests counted without buckets: %+v", st)
				}
				return
			}
			if !st.GoodKnown || !near(st.GoodRequestsTotal, tc.good) || st.Attainment == nil || !near(*st.Attainment, tc.attainment) {
				t.Errorf("good %v (known %v), attainment %v; want %v, %v", st.GoodRequestsTotal, st.GoodKnown, st.Attainment, tc.good, tc.attainment)
			}
		})
	}
}

func TestTGIWindow(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "gen", Source: src, Objective: &Objective{Quantile: 0.95, Target: time.Second}, Window: time.Minute})
	for i, f := range []string{"tgi-1.txt", "tgi-2.txt"} {
		h, err := extractFixture(t, src, f)
		if err != nil {
			t.Fatal(err)
		}
		tr.observe(time.Unix(int64(15*i), 0), h)
	}
	st := tr.Status()
	// delta: le 0.5:10 1:40 2:90 4:98 count 100
	// p50: rank 50 in (1,2]: 1 + (50-40)/(90-40) = 1.2
	// p90: rank 90 reached at le=2: 1 + (90-40)/50 = 2
	// p99: rank 99 beyond le=4 (98): the largest finite bound, 4
	want := map[float64]float64{0.5: 1.2, 0.9: 2, 0.99: 4}
	for q, v := range want {
		if !near(st.Quantiles[q], v) {
			t.Errorf("p%v = %v, want %v", q*100, st.Quantiles[q], v)
		}
	}
	if st.GoodRequestsTotal != 40 || st.RequestsTotal != 100 || st.Attainment == nil || !near(*st.Attainment, 0.4) {
		t.Errorf("status %+v", st)
	}
}

func TestDeltaMissingBucket(t *testing.T) {
	h1, err := extractFixture(t, vllmSrc, "vllm-1.txt")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := extractFixture(t, vllmSrc, "vllm-missing-bucket.txt")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := wholeDelta(h1, h2)
	// le=0.25 is absent in the second scrape: the delta keeps the bounds both have
	if len(d.bounds) != 3 || d.bounds[1] != 0.5 || d.cum[0] != 50 || d.cum[1] != 260 || d.cum[2] != 299 || d.count != 300 {
		t.Fatalf("delta %+v", d)
	}
}

func TestQuantileAndGoodEdges(t *testing.T) {
	h := histo{bounds: []float64{1, 2}, cum: []float64{0, 0}, count: 0}
	if _, ok := h.quantile(0.5); ok {
		t.Error("empty histogram has a quantile")
	}
	h = histo{bounds: []float64{1, 2}, cum: []float64{10, 10}, count: 20}
	if v, _ := h.quantile(0.9); v != 2 {
		t.Errorf("rank in +Inf: %v, want the largest bound 2", v)
	}
	if v, _ := h.quantile(0.25); !near(v, 0.5) {
		t.Errorf("first bucket interpolates from 0: %v", v)
	}
	if g := h.good(5); g != 10 {
		t.Errorf("target above the largest bound: good %v, want 10 (the +Inf bucket counts as slow)", g)
	}
	if g := h.good(0.5); !near(g, 5) {
		t.Errorf("good(0.5) = %v", g)
	}
}

func TestScrapeSim(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}
	sc := &scraper{app: app}
	tr := newSLOTracker(Spec{Name: "chat", Source: vllmSrc, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: 5 * time.Minute})
	if err := sc.scrapeOnce(context.Background(), tr, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	app.Set("chat", fixture(t, "vllm-2.txt"))
	if err := sc.scrapeOnce(context.Background(), tr, time.Unix(15, 0)); err != nil {
		t.Fatal(err)
	}
	if st := tr.Status(); st.RequestsTotal != 300 {
		t.Errorf("sim source: %+v", st)
	}
	small := *vllmSrc
	small.MaxBytes = 100
	tr2 := newSLOTracker(Spec{Name: "x", Source: &small, Window: time.Minute})
	if err := sc.scrapeOnce(context.Background(), tr2, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "max_bytes") {
		t.Errorf("oversized sim exposition: %v", err)
	}
	if err := (&scraper{}).scrapeOnce(context.Background(), tr2, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "no simulator") {
		t.Errorf("sim:// without a simulator: %v", err)
	}
}

// familyApp serves its families decoded, and no text.
type familyApp struct {
	body  map[string][]byte
	calls int
}

func (f *familyApp) AppMetrics(string, io.Writer) error { return errors.New("text read") }

func (f *familyApp) AppMetricFamilies(app string) (map[string]*dto.MetricFamily, error) {
	f.calls++
	b, ok := f.body[app]
	if !ok {
		return nil, fmt.Errorf("no app %q", app)
	}
	return parseExposition(b, expfmt.FmtText, nil)
}

// A sim:// source whose backend hands over decoded families is read
// through them, to the same figures as the text.
func TestScrapeSimFamilies(t *testing.T) {
	app := &familyApp{body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}
	sc := &scraper{app: app}
	tr := newSLOTracker(Spec{Name: "chat", Source: vllmSrc, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: 5 * time.Minute})
	for i, f := range []string{"vllm-1.txt", "vllm-2.txt"} {
		app.body["chat"] = fixture(t, f)
		if err := sc.scrapeOnce(context.Background(), tr, time.Unix(int64(15*i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	if st := tr.Status(); st.RequestsTotal != 300 || app.calls != 2 {
		t.Errorf("families source: %+v after %d reads", st, app.calls)
	}
	other := *vllmSrc
	other.URL = "sim://nobody"
	tr2 := newSLOTracker(Spec{Name: "x", Source: &other, Window: time.Minute})
	if err := sc.scrapeOnce(context.Background(), tr2, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), `no app "nobody"`) {
		t.Errorf("families source error: %v", err)
	}
}

func TestScrapeHTTPProtobufAndText(t *testing.T) {
	reg := prometheus.NewRegistry()
	hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "vllm:e2e_request_latency_seconds", Buckets: []float64{0.1, 0.25, 0.5, 1},
	}, []string{"model_name"})
	reg.MustRegister(hv)
	var gotAccept, servedType string
	var mu sync.Mutex
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAccept = r.Header.Get("Accept")
		mu.Unlock()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		mu.Lock()
		servedType = rec.Header().Get("Content-Type")
		mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()

	src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "llama"}, Timeout: 5 * time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.9, Target: 200 * time.Millisecond}, Window: time.Minute})
	sc := &scraper{httpc: srv.Client()}
	hv.WithLabelValues("llama").Observe(0.05)
	if err := sc.scrapeOnce(context.Background(), tr, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{0.05, 0.05, 0.3, 0.7} {
		hv.WithLabelValues("llama").Observe(v)
	}
	hv.WithLabelValues("other").Observe(5)
	if err := sc.scrapeOnce(context.Background(), tr, time.Unix(15, 0)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !strings.Contains(gotAccept, "application/vnd.google.protobuf") || !strings.Contains(servedType, "application/vnd.google.protobuf") {
		t.Errorf("no protobuf negotiated: accept %q, served %q", gotAccept, servedType)
	}
	mu.Unlock()
	st := tr.Status()
	// 4 requests: two at 0.05 (<= 0.1), 0.3 in (0.25,0.5], 0.7 in (0.5,1].
	// good at 0.2 in (0.1,0.25] which holds none: 2.
	if st.RequestsTotal != 4 || st.GoodRequestsTotal != 2 {
		t.Errorf("status %+v", st)
	}

	// the same through the text format
	text := &bytes.Buffer{}
	enc := expfmt.NewEncoder(text, expfmt.NewFormat(expfmt.TypeTextPlain))
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
	fams, err := parseExposition(text.Bytes(), expfmt.FmtText, nil)
	if err != nil {
		t.Fatal(err)
	}
	hh, err := extract(src, fams)
	if err != nil || hh.count != 5 {
		t.Errorf("text: %+v %v", hh, err)
	}
}

func TestScrapeHTTPFailures(t *testing.T) {
	big := bytes.Repeat([]byte("# padding comment\n"), 200)
	block := make(chan struct{})
	defer close(block)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write(big)
		case "/500":
			http.Error(w, "boom", 500)
		case "/slow":
			select {
			case <-block:
			case <-r.Context().Done():
			}
		case "/garbage":
			_, _ = w.Write([]byte("<html>"))
		}
	}))
	defer srv.Close()
	tests := []struct{ path, want string }{
		{"/big", "larger than max_bytes"},
		{"/500", "HTTP 500"},
		{"/slow", "deadline exceeded"},
		{"/garbage", "no histogram"}, // the parser sees only the families the source reads
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			src := &Source{URL: srv.URL + tc.path, Preset: PresetTGI, Timeout: 100 * time.Millisecond, MaxBytes: 1024}
			tr := newSLOTracker(Spec{Name: "x", Source: src, Window: time.Minute})
			err := (&scraper{httpc: srv.Client()}).scrapeOnce(context.Background(), tr, time.Unix(0, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if st := tr.Status(); st.SourceUp || st.ScrapeErrorsTotal != 1 || !strings.Contains(st.LastError, srv.URL) {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// TestWindowMemoryBounded: a source scraped every second for two hours
// with a one-hour window keeps at most maxWindowEntries+1 deltas, and the
// window still holds the last hour's requests (less at most one merged
// entry's worth at its old end).
func TestWindowMemoryBounded(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Hour})
	t0 := time.Unix(0, 0)
	// one request per scrape, at 0.25 s
	h := func(n float64) histo {
		return histo{bounds: []float64{0.5, 1}, cum: []float64{n, n}, count: n, sum: 0.25 * n}
	}
	const scrapes = 2 * 3600
	maxLen := 0
	for i := 0; i <= scrapes; i++ {
		tr.observe(t0.Add(time.Duration(i)*time.Second), h(float64(i)))
		tr.mu.Lock()
		maxLen = max(maxLen, len(tr.deltas))
		tr.mu.Unlock()
	}
	if maxLen > maxWindowEntries+1 {
		t.Errorf("window kept %d entries, want at most %d", maxLen, maxWindowEntries+1)
	}
	st := tr.Status()
	if st.RequestsTotal != scrapes || st.GoodRequestsTotal != scrapes {
		t.Errorf("totals %v good %v, want %d", st.RequestsTotal, st.GoodRequestsTotal, scrapes)
	}
	slot := float64(time.Hour / maxWindowEntries / time.Second)
	if st.WindowRequests > 3600 || st.WindowRequests < 3600-slot-1 {
		t.Errorf("window requests %v, want 3600 (at most %v fewer)", st.WindowRequests, slot+1)
	}
	if st.Attainment == nil || *st.Attainment != 1 {
		t.Errorf("attainment %v, want 1", st.Attainment)
	}

	// A counter reset that opens a new entry, then a scrape merged into
	// it: the reset counts its 3 requests, the next scrape one more.
	tr.observe(t0.Add((scrapes+100)*time.Second), h(3))
	tr.observe(t0.Add((scrapes+101)*time.Second), h(4))
	if st := tr.Status(); st.RequestsTotal != scrapes+3+1 {
		t.Errorf("after a reset: total %v, want %d", st.RequestsTotal, scrapes+4)
	}
}

// TestExtractTooManyBounds: an exposition whose series together have more
// distinct bucket bounds than maxBounds is refused (merging would cost
// series x bounds), naming the histogram; one just under passes.
func TestExtractTooManyBounds(t *testing.T) {
	expo := func(series int) []byte {
		var b bytes.Buffer
		b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
		for i := 0; i < series; i++ {
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=\"m%d\",le=\"%d.5\"} 1\n", i, i)
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=\"m%d\",le=\"+Inf\"} 1\n", i)
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{model_name=\"m%d\"} 1\n", i)
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{model_name=\"m%d\"} 1\n", i)
		}
		return b.Bytes()
	}
	src := &Source{URL: "sim://x", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	for _, tc := range []struct {
		series  int
		wantErr bool
	}{{maxBounds, false}, {maxBounds + 1, true}} {
		fams, err := parseExposition(expo(tc.series), expfmt.FmtText, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := extract(src, fams)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "vllm:e2e_request_latency_seconds") || !strings.Contains(err.Error(), "distinct bucket bounds") {
				t.Errorf("%d series: err = %v", tc.series, err)
			}
			continue
		}
		if err != nil || len(h.bounds) != tc.series || h.count != float64(tc.series) {
			t.Errorf("%d series: %d bounds, count %v, err %v", tc.series, len(h.bounds), h.count, err)
		}
	}
}

// TestPoolSetWhileRunning: a Set on a started pool replaces its sources;
// the new source is scraped by its own loop and the old one's stops.
func TestPoolSetWhileRunning(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"a": fixture(t, "vllm-1.txt"), "b": fixture(t, "tgi-1.txt")}}
	p := NewPool(Options{Clock: gpu.NewManualClock(time.Unix(0, 0)), AppMetrics: app})
	spec := func(name, preset string) Spec {
		return Spec{Name: name, Key: name, Source: &Source{URL: "sim://" + name, Preset: preset, Timeout: time.Second, MaxBytes: 1 << 20}, Window: time.Minute}
	}
	p.Set([]Spec{spec("a", PresetVLLME2E)}, 15*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); p.Wait() }()
	p.Start(ctx)
	wait := func(name string) {
		deadline := time.Now().Add(20 * time.Second) // hang guard only
		for {
			if st, ok := p.Status(name); ok && st.SourceUp {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("source %s never scraped", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("a")
	p.Set([]Spec{spec("b", PresetTGI)}, 15*time.Second)
	wait("b")
	if _, ok := p.Status("a"); ok {
		t.Error("a still tracked after a Set without it")
	}
	p.mu.Lock()
	n := len(p.cancels)
	_, hasA := p.cancels["a"]
	p.mu.Unlock()
	if n != 1 || hasA {
		t.Errorf("loops after reload: %d (a still running: %v)", n, hasA)
	}
}

// TestSGLangPresets reads an SGLang exposition as SGLang writes it (labels
// model_name and engine_type, SGLang's default buckets, the scheduler's
// families beside the tokenizer's) with each SGLang preset.
func TestSGLangPresets(t *testing.T) {
	llama := map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct"}
	tests := []struct {
		name, preset, file string
		matchers           map[string]string
		nBounds            int
		le, cum, count     float64
		p50, p99           float64 // the bucket bounds each quantile must fall within: (prev bound, p]
		wantErr            string
	}{
		{"e2e", PresetSGLangE2E, "sglang-1.txt", llama, 22, 1, 1100, 2400, 2, 8, ""},
		{"ttft", PresetSGLangTTFT, "sglang-1.txt", llama, 18, 0.2, 2100, 2400, 0.1, 1, ""},
		{"itl", PresetSGLangITL, "sglang-1.txt", llama, 23, 0.01, 520000, 985000, 0.01, 0.025, ""},
		{"itl matching both labels", PresetSGLangITL, "sglang-1.txt", map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine_type": "unified"}, 23, 0.01, 520000, 985000, 0.01, 0.025, ""},
		{"itl falls back to time_per_output_token", PresetSGLangITL, "sglang-tpot.txt", llama, 10, 0.05, 11685, 500000, 0.075, 0.1, ""},
		{"another model", PresetSGLangE2E, "sglang-1.txt", map[string]string{"model_name": "qwen"}, 0, 0, 0, 0, 0, 0, "no series matching"},
		{"vllm preset on sglang", PresetVLLME2E, "sglang-1.txt", nil, 0, 0, 0, 0, 0, 0, "no histogram [vllm:e2e_request_latency_seconds]"},
		{"sglang preset on vllm", PresetSGLangE2E, "vllm-1.txt", nil, 0, 0, 0, 0, 0, 0, "no histogram [sglang:e2e_request_latency_seconds]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "http://sglang:30000/metrics", Preset: tc.preset, Matchers: tc.matchers, Timeout: time.Second, MaxBytes: 1 << 20}
			h, err := extractFixture(t, src, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(h.bounds) != tc.nBounds || h.count != tc.count {
				t.Fatalf("%d bounds, count %v; want %d, %v", len(h.bounds), h.count, tc.nBounds, tc.count)
			}
			if got, ok := h.cumAt(tc.le); !ok || got != tc.cum {
				t.Fatalf("bucket le=%v = %v (%v), want %v", tc.le, got, ok, tc.cum)
			}
			for q, upper := range map[float64]float64{0.5: tc.p50, 0.99: tc.p99} {
				got, ok := h.quantile(q)
				lower := 0.0
				for _, b := range h.bounds {
					if b < upper {
						lower = b
					}
				}
				if !ok || got <= lower || got > upper {
					t.Errorf("p%v = %v (%v), want in (%v, %v]", q*100, got, ok, lower, upper)
				}
			}
		})
	}
}

// TestPoolEpochs: each tracker a Pool starts has its own Status.Epoch; a
// Set that keeps a name's Key keeps its tracker and Epoch, one that
// changes it (or drops the name and adds it back) gives the next.
func TestPoolEpochs(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"a": fixture(t, "vllm-1.txt"), "b": fixture(t, "vllm-1.txt")}}
	p := NewPool(Options{Clock: gpu.NewManualClock(time.Unix(0, 0)), AppMetrics: app})
	spec := func(name, key string) Spec {
		return Spec{Name: name, Key: key, Source: &Source{URL: "sim://" + name, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}, Window: time.Minute}
	}
	for i, step := range []struct {
		specs []Spec
		want  map[string]uint64
	}{
		{[]Spec{spec("a", "1"), spec("b", "1")}, map[string]uint64{"a": 1, "b": 2}},
		{[]Spec{spec("a", "1"), spec("b", "2")}, map[string]uint64{"a": 1, "b": 3}}, // b's target changed
		{[]Spec{spec("b", "2")}, map[string]uint64{"b": 3}},
		{[]Spec{spec("a", "1"), spec("b", "2")}, map[string]uint64{"a": 4, "b": 3}}, // a back, counting anew
	} {
		p.Set(step.specs, 15*time.Second)
		p.Refresh(context.Background())
		for name, want := range step.want {
			if st, ok := p.Status(name); !ok || st.Epoch != want {
				t.Errorf("Set %d: %s's Epoch %d (tracked %v), want %d", i+1, name, st.Epoch, ok, want)
			}
		}
	}
}
