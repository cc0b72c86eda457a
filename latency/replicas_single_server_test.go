package latency

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// runOneServer scrapes, n times 15 s apart, one server that serves at each
// scrape the histogram count and the process_start_time_seconds (0: not
// served) that script gives for it, and returns the tracker.
func runOneServer(t *testing.T, preset, name string, n int, script func(i int) (count int, start float64)) *sloTracker {
	t.Helper()
	var mu sync.Mutex
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		c, start := script(i)
		fmt.Fprintf(w, "# TYPE %[1]s histogram\n"+
			"%[1]s_bucket{model_name=\"m\",le=\"0.5\"} %[2]d\n"+
			"%[1]s_bucket{model_name=\"m\",le=\"+Inf\"} %[2]d\n"+
			"%[1]s_sum{model_name=\"m\"} %[3]g\n"+
			"%[1]s_count{model_name=\"m\"} %[2]d\n", name, c, 0.1*float64(c))
		if start > 0 {
			fmt.Fprintf(w, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %v\n", start)
		}
	}))
	t.Cleanup(srv.Close)
	src := &Source{URL: srv.URL + "/metrics", Preset: preset, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.99, Target: time.Second}, Window: 5 * time.Minute})
	tr.setInterval(15 * time.Second)
	sc := &scraper{httpc: srv.Client()}
	now := time.Unix(1_000_000, 0)
	for ; i < n; i++ {
		if err := sc.scrapeOnce(context.Background(), tr, now); err != nil {
			t.Logf("scrape %d: %v", i, err)
		}
		now = now.Add(15 * time.Second)
	}
	return tr
}

// vLLM's AsyncLLM.scale_elastic_ep (scaling data parallel up) recreates its
// StatLoggerManager, whose PrometheusStatLogger unregisters and re-creates
// every vllm: metric: counts restart from 0 inside the same API server
// process, whose process_start_time_seconds (prometheus_client's
// ProcessCollector) stays the same. One server: a counter reset, nothing
// refused.
func TestCountersResetWithinOneProcess(t *testing.T) {
	start := 1_000_000 - 86400 + 0.37 // Python: ticks/100 + btime
	counts := []int{5000, 5010, 5020, 5030, 10, 20, 30, 40, 50, 60}
	tr := runOneServer(t, PresetVLLME2E, "vllm:e2e_request_latency_seconds", len(counts), func(i int) (int, float64) {
		return counts[i], start
	})
	st := tr.Status()
	if st.ScrapeErrorsTotal != 0 || st.RequestsTotal != 90 {
		t.Errorf("scrape errors %d, requests_total %v, last error %q; want 0 errors and 90 requests (30 + reset to 10 + 50)", st.ScrapeErrorsTotal, st.RequestsTotal, st.LastError)
	}
}

// A Go server (client_golang re-reads btime from /proc/stat at every
// scrape) on a host whose clock is stepped (an NTP step of a second;
// chrony makestep, a VM resumed or live-migrated, 10 s either way): its
// process_start_time_seconds moves with it, nothing restarted, nothing
// fell. A new start time is counted as a reset would be: all 90 requests,
// nothing refused.
func TestStartTimeClockStep(t *testing.T) {
	for _, step := range []float64{1, 10, -10} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			start := float64(1_000_000 - 86400)
			tr := runOneServer(t, PresetVLLME2E, "vllm:e2e_request_latency_seconds", 10, func(i int) (int, float64) {
				s := start
				if i >= 5 {
					s += step
				}
				return 5000 + 10*i, s
			})
			st := tr.Status()
			if st.ScrapeErrorsTotal != 0 || st.RequestsTotal != 90 {
				t.Errorf("scrape errors %d, requests_total %v, last error %q; want 0 errors and all 90 requests", st.ScrapeErrorsTotal, st.RequestsTotal, st.LastError)
			}
		})
	}
}

// An exposition of two registries concatenated (a sidecar merging its own
// /metrics with the server's), each with its process collector, or a
// start time otherwise ambiguous or not a time: no start time, never a
// parse error; the histogram is read as it would be without it.
func TestStartTimeAmbiguousOrAbsent(t *testing.T) {
	const hist = "# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"0.5\"} 5\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 5\n" +
		"vllm:e2e_request_latency_seconds_sum 0.5\n" +
		"vllm:e2e_request_latency_seconds_count 5\n"
	const a, b = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 913600.25\n",
		"# HELP process_start_time_seconds Start time.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 913000\n"
	tests := []struct {
		name, body string
		want       float64
	}{
		{"one block", a + hist, 913600.25},
		{"one block after the histogram", hist + b, 913000},
		{"two blocks, the histogram between", a + hist + b, 0},
		{"two blocks, other lines between", a + "other 1\n" + b + hist, 0},
		{"two blocks in a row", hist + b + a, 0},
		{"two TYPE lines", hist + "# TYPE process_start_time_seconds gauge\n" + a, 0},
		{"two series", hist + a + "process_start_time_seconds{pid=\"2\"} 913000\n", 0},
		{"zero", hist + "process_start_time_seconds 0\n", 0},
		{"NaN", hist + "process_start_time_seconds NaN\n", 0},
		{"none", hist, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "chat", Source: src, Window: 5 * time.Minute})
			sc := &scraper{httpc: srv.Client()}
			if err := sc.scrapeOnce(context.Background(), tr, time.Unix(1_000_000, 0)); err != nil {
				t.Fatalf("scrape: %v", err)
			}
			if tr.prev == nil || tr.prev.start != tc.want || tr.prev.count != 5 {
				t.Errorf("answer read %+v; want start time %v, count 5", tr.prev, tc.want)
			}
		})
	}
}

// SGLang serves no process_start_time_seconds (prometheus multiprocess
// mode). A server with a short life (330 requests) is restarted, sits
// idle, and then a benchmark sends 400 requests a scrape. One server,
// nothing behind a Service: every request should be counted.
func TestBurstAfterRestartAndQuiet(t *testing.T) {
	counts := []int{300, 310, 320, 330, 0, 0, 0, 0, 0, 0, 0, 400, 800, 1200, 1600, 2000}
	tr := runOneServer(t, PresetSGLangE2E, "sglang:e2e_request_latency_seconds", len(counts), func(i int) (int, float64) {
		return counts[i], 0
	})
	st := tr.Status()
	want := 30.0 + 2000
	if st.ScrapeErrorsTotal != 0 || st.RequestsTotal != want {
		t.Errorf("scrape errors %d, requests_total %v (want %v), last error %q", st.ScrapeErrorsTotal, st.RequestsTotal, want, st.LastError)
	}
}

// A server without start times (TGI) with a short life (330 requests) is
// restarted, and its traffic comes straight back as a burst of 400
// requests a scrape, past the count it had before within one scrape. One
// server, nothing behind a Service: every request should be counted, the
// fall as a counter reset.
func TestBurstStraightAfterRestart(t *testing.T) {
	counts := []int{300, 310, 320, 330, 100, 500, 900, 1300}
	tr := runOneServer(t, PresetTGI, "tgi_request_duration", len(counts), func(i int) (int, float64) {
		return counts[i], 0
	})
	st := tr.Status()
	want := 30.0 + 100 + 1200
	if st.ScrapeErrorsTotal != 0 || st.RequestsTotal != want {
		t.Errorf("scrape errors %d, requests_total %v (want %v), last error %q", st.ScrapeErrorsTotal, st.RequestsTotal, want, st.LastError)
	}
}

// A server without start times restarts twice in a row (a crash loop of a
// small model: its second life lasted one scrape). One server.
func TestCrashLoopTwoRestarts(t *testing.T) {
	counts := []int{5000, 5010, 5020, 8, 3, 13, 23, 33, 43}
	tr := runOneServer(t, PresetTGI, "tgi_request_duration", len(counts), func(i int) (int, float64) {
		return counts[i], 0
	})
	st := tr.Status()
	want := 20.0 + 8 + 3 + 40
	if st.ScrapeErrorsTotal != 0 || st.RequestsTotal != want {
		t.Errorf("scrape errors %d, requests_total %v (want %v), last error %q", st.ScrapeErrorsTotal, st.RequestsTotal, want, st.LastError)
	}
}

// runTriton scrapes, every 15 s, n answers of one Triton server with its
// default metrics (counters only, no process_start_time_seconds) for
// models "a" and "b": models(i) gives each one's success count at answer
// i, -1 for a model not loaded then. It returns the tracker and the
// answers refused.
func runTriton(t *testing.T, n int, models func(i int) (a, b int)) (*sloTracker, []int) {
	t.Helper()
	var mu sync.Mutex
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		a, b := models(i)
		for _, m := range []struct {
			name  string
			count int
		}{{"a", a}, {"b", b}} {
			if m.count >= 0 {
				fmt.Fprintf(w, "nv_inference_request_success{model=%q,version=\"1\"} %d\n"+
					"nv_inference_request_duration_us{model=%q,version=\"1\"} %d\n", m.name, m.count, m.name, m.count*1000)
			}
		}
	}))
	t.Cleanup(srv.Close)
	src := &Source{URL: srv.URL + "/metrics", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "img", Source: src, Window: 5 * time.Minute})
	tr.setInterval(15 * time.Second)
	sc := &scraper{httpc: srv.Client()}
	now := time.Unix(1_000_000, 0)
	var refused []int
	for ; i < n; i++ {
		if err := sc.scrapeOnce(context.Background(), tr, now); err != nil {
			t.Logf("scrape %d: %v", i, err)
			refused = append(refused, i)
		}
		now = now.Add(15 * time.Second)
	}
	return tr, refused
}

// Triton (no process_start_time_seconds) serves two models. Model "b"
// is reloaded, sits idle, then serves a burst; model "a" is reloaded (its
// counters restart) 5 minutes after the burst. One server: the reload is a
// per-model counter reset, which the exporter has always counted, and the
// burst is traffic: nothing is refused.
func TestModelReloadAfterBurst(t *testing.T) {
	b := []int{300, 300, 300, 300, 0, 0, 0, 0, 0, 0, 0, 400, 800, 1200, 1600, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000}
	_, refused := runTriton(t, len(b), func(i int) (int, int) {
		if i >= 20 {
			return 10 * (i - 20), b[i] // model a reloaded at scrape 20
		}
		return 100000 + 10*i, b[i]
	})
	for _, e := range refused {
		if e >= 20 {
			t.Errorf("scrape %d refused: a model reload of one Triton server, 5 minutes after a burst", e)
		}
	}
}

// Triton with its default metrics (counters only: no latency histogram
// without --metrics-config). Model "a" serves 100 requests a scrape; model
// "b", used 150 times, is unloaded at scrape 4 (model control API), or
// reloaded (its counters restart). One server throughout.
func TestTritonModelUnloadOrReload(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(fmt.Sprintf("reload=%v", reload), func(t *testing.T) {
			const n = 12
			tr, _ := runTriton(t, n, func(i int) (int, int) {
				switch {
				case i < 4:
					return 100000 + 100*i, 150
				case reload:
					return 100000 + 100*i, 0
				}
				return 100000 + 100*i, -1 // unloaded
			})
			st := tr.Status()
			if want := float64(100 * (n - 1)); st.ScrapeErrorsTotal != 0 || st.RequestsTotal != want {
				t.Errorf("scrape errors %d, requests_total %v (want %v)", st.ScrapeErrorsTotal, st.RequestsTotal, want)
			}
		})
	}
}

// Triton with its default metrics (no process_start_time_seconds). Model
// "b", with a small history (20 requests) and quiet, is reloaded at scrape
// 4 (its counters restart) and then used, 30 requests a scrape from scrape
// 6, past its old count within two scrapes; model "a" serves 100 a scrape
// throughout. One server: the reload is a counter reset and every request
// is counted.
func TestTritonQuietModelReloadedThenUsed(t *testing.T) {
	b := []int{20, 20, 20, 20, 0, 0, 30, 60, 90, 120}
	tr, _ := runTriton(t, len(b), func(i int) (int, int) { return 100000 + 100*i, b[i] })
	st := tr.Status()
	if want := float64(100*(len(b)-1) + 120); st.ScrapeErrorsTotal != 0 || st.RequestsTotal != want {
		t.Errorf("scrape errors %d, requests_total %v (want %v), last error %q", st.ScrapeErrorsTotal, st.RequestsTotal, want, st.LastError)
	}
}

// One Go server, never restarted, counting 10 requests a scrape, whose
// process_start_time_seconds (btime, re-read from /proc/stat at every
// scrape, in whole seconds, + ticks/100) moves by a second at scrape 5, or
// a clock stepped an hour back, and comes back at scrape 6: it cannot be
// told from a second pod (docs/slo.md, "One server", the cost). Scrape 5
// is a restart, counted; 6 and 7 are refused; 8, the third answer in a
// row with one start time, is counted: 90 of the 110 requests, 2 refused.
func TestStartTimeFlipsBackRefusedTwice(t *testing.T) {
	start := float64(1_000_000-86400) + 0.37
	for name, other := range map[string]float64{"btime +1 s and back": start + 1, "clock stepped 1 h back, then corrected": start - 3600} {
		t.Run(name, func(t *testing.T) {
			tr := runOneServer(t, PresetVLLME2E, "vllm:e2e_request_latency_seconds", 12, func(i int) (int, float64) {
				if i == 5 {
					return 5000 + 10*i, other
				}
				return 5000 + 10*i, start
			})
			if st := tr.Status(); st.ScrapeErrorsTotal != 2 || st.RequestsTotal != 90 || !st.SourceUp {
				t.Errorf("scrape errors %d, requests_total %v, source up %v; want 2 refused, 90 counted, up", st.ScrapeErrorsTotal, st.RequestsTotal, st.SourceUp)
			}
		})
	}
}

// btime flapping between two whole seconds every 3 scrapes (40 answers of
// one server, 10 requests each): each run of three ends a refusal at its
// third answer, so the source is counted again at every run, never down
// for good (it was while ending a refusal took four answers in a row):
// answers 1-2, 3-5 (the first flip, a restart) and the third of each of
// the 11 runs after, 160 counted; two refused a run, and 39, 23.
func TestStartTimeFlapsRecoverEachRun(t *testing.T) {
	start := float64(1_000_000-86400) + 0.37
	tr := runOneServer(t, PresetVLLME2E, "vllm:e2e_request_latency_seconds", 40, func(i int) (int, float64) {
		return 5000 + 10*i, start + float64((i/3)%2)
	})
	if st := tr.Status(); st.ScrapeErrorsTotal != 23 || st.RequestsTotal != 160 {
		t.Errorf("scrape errors %d, requests_total %v; want 23 refused and 160 counted", st.ScrapeErrorsTotal, st.RequestsTotal)
	}
}

// A body whose start-time family has a sample before its TYPE line (a
// sidecar's text with a bare sample, concatenated with the server's
// block): the histogram is fine, the start time is ambiguous; the scrape
// should succeed with no start time, as docs/slo.md says ("never a parse
// error"), not fail.
func TestStartTimeTypeAfterSample(t *testing.T) {
	const hist = "# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"0.5\"} 5\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 5\n" +
		"vllm:e2e_request_latency_seconds_sum 0.5\n" +
		"vllm:e2e_request_latency_seconds_count 5\n"
	for name, body := range map[string]string{
		"bare sample, then a full block": hist + "process_start_time_seconds 913600.25\n" +
			"# HELP process_start_time_seconds Start time.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 913000\n",
		"TYPE after the sample": hist + "process_start_time_seconds 913000\n# TYPE process_start_time_seconds gauge\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
			defer srv.Close()
			src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "chat", Source: src, Window: 5 * time.Minute})
			sc := &scraper{httpc: srv.Client()}
			if err := sc.scrapeOnce(context.Background(), tr, time.Unix(1_000_000, 0)); err != nil {
				t.Fatalf("scrape failed: %v", err)
			}
			if tr.prev == nil || tr.prev.count != 5 {
				t.Errorf("answer read %+v; want count 5", tr.prev)
			}
		})
	}
}
