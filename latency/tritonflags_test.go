package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// tritonScrape is bert's cumulative figures in one Triton answer: requests,
// the successes' duration (the counter's and the request summary's count
// and sum alike: Triton observes both for each success), the request
// summary's own quantiles (µs), and the first-response histogram's
// cumulative counts at 10, 50, 100 and 500 ms.
type tritonScrape struct {
	succ, fail int
	durUs      float64
	quantiles  [3]float64 // 0.5, 0.9, 0.99
	buckets    [4]int
	histSumMs  float64
}

// tritonFlags is which latency families a Triton server serves, as its
// --metrics-config sets them: counter_latencies (default true),
// summary_latencies and histogram_latencies (default false). summaryModel
// is the model the request summary is served for ("" for bert): Triton
// serves none for a model with the response cache.
type tritonFlags struct {
	counters, summary, histogram bool
	summaryModel                 string
}

// tritonFlagsText is bert's exposition under the given flags.
func tritonFlagsText(f tritonFlags, s tritonScrape) []byte {
	var b strings.Builder
	l := `model="bert",version="1"`
	b.WriteString("# TYPE nv_inference_request_success counter\n")
	fmt.Fprintf(&b, "nv_inference_request_success{%s} %d\n", l, s.succ)
	b.WriteString("# TYPE nv_inference_request_failure counter\n")
	fmt.Fprintf(&b, "nv_inference_request_failure{%s,reason=\"BACKEND\"} %d\n", l, s.fail)
	if f.counters {
		b.WriteString("# TYPE nv_inference_request_duration_us counter\n")
		fmt.Fprintf(&b, "nv_inference_request_duration_us{%s} %g\n", l, s.durUs)
	}
	if f.summary {
		sl := l
		if f.summaryModel != "" {
			sl = fmt.Sprintf("model=%q,version=\"1\"", f.summaryModel)
		}
		b.WriteString("# TYPE nv_inference_request_summary_us summary\n")
		for i, q := range []string{"0.5", "0.9", "0.99"} {
			fmt.Fprintf(&b, "nv_inference_request_summary_us{%s,quantile=%q} %g\n", sl, q, s.quantiles[i])
		}
		fmt.Fprintf(&b, "nv_inference_request_summary_us_sum{%s} %g\n", sl, s.durUs)
		fmt.Fprintf(&b, "nv_inference_request_summary_us_count{%s} %d\n", sl, s.succ)
	}
	if f.histogram {
		b.WriteString("# TYPE nv_inference_first_response_histogram_ms histogram\n")
		for i, le := range []string{"10", "50", "100", "500"} {
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=%q} %d\n", l, le, s.buckets[i])
		}
		fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=\"+Inf\"} %d\n", l, s.buckets[3])
		fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_sum{%s} %g\n", l, s.histSumMs)
		fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_count{%s} %d\n", l, s.buckets[3])
	}
	return []byte(b.String())
}

// TestTritonWithoutCounterLatencies: a Triton server started with
// --metrics-config counter_latencies=false serves no
// nv_inference_request_duration_us. Its request counters still count the
// requests; the first-response histogram, where served, still judges the
// SLO, and the request summary's cumulative count and sum still give the
// successes' mean. Only with neither is the source down, and its error
// says what to turn on. Between the two scrapes bert served 50 requests
// (40 succeeded in 2 s in all, 10 failed); the histogram's deltas are
// le=10ms 5, 50ms 30, 100ms 40, 500ms 40 (TestTritonShapes' figures).
func TestTritonWithoutCounterLatencies(t *testing.T) {
	scrapes := []tritonScrape{
		{100, 0, 1.5e6, [3]float64{30000, 50000, 90000}, [4]int{20, 60, 95, 100}, 3000},
		{140, 10, 3.5e6, [3]float64{32000, 56000, 95000}, [4]int{25, 90, 135, 140}, 5000},
	}
	histQ := map[float64]float64{0.5: 0.034, 0.9: 0.08, 0.99: 0.098}
	tests := []struct {
		name  string
		flags tritonFlags
		// wantErr: the scrape fails with it; mean < 0: none; good < 0:
		// not countable
		wantErr          string
		mean             float64
		quantiles        map[float64]float64
		good, attainment float64
	}{
		// the first-response histogram judges the SLO; nothing times
		// the successes as a whole: no mean
		{"histogram", tritonFlags{histogram: true}, "", -1, histQ, 36, 36.0 / 50},
		// the summary's count and sum time the successes, its
		// quantiles are the server's own
		{"summary", tritonFlags{summary: true}, "", 0.05, map[float64]float64{0.5: 0.032, 0.9: 0.056, 0.99: 0.095}, -1, 0},
		{"summary and histogram", tritonFlags{summary: true, histogram: true}, "", 0.05, histQ, 36, 36.0 / 50},
		// nothing times bert's requests
		{"neither", tritonFlags{}, "--metrics-config counter_latencies=true", 0, nil, 0, 0},
		{"summary of another model", tritonFlags{summary: true, summaryModel: "resnet"}, "--metrics-config counter_latencies=true", 0, nil, 0, 0},
		// the default flags, for comparison
		{"counters", tritonFlags{counters: true}, "", 0.05, map[float64]float64{}, -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://x", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Minute})
			for i, s := range scrapes {
				fams, err := parseExposition(tritonFlagsText(tc.flags, s), expfmt.FmtText, families(src))
				if err != nil {
					t.Fatal(err)
				}
				h, err := extract(src, fams)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := tr.observe(time.Unix(int64(15*(i+1)), 0), h); err != nil {
					t.Fatal(err)
				}
			}
			st := tr.Status()
			if !st.SourceUp || st.RequestsTotal != 50 || st.WindowRequests != 50 {
				t.Errorf("up %v, requests %v, in the window %v; want up, 50 (success + failure)", st.SourceUp, st.RequestsTotal, st.WindowRequests)
			}
			if tc.mean < 0 && st.MeanSeconds != nil || tc.mean >= 0 && (st.MeanSeconds == nil || !near(*st.MeanSeconds, tc.mean)) {
				t.Errorf("mean %s, want %v (<0: none)", ptrString(st.MeanSeconds), tc.mean)
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
				if st.GoodKnown || st.Attainment != nil {
					t.Errorf("good requests counted without buckets: %+v", st)
				}
				return
			}
			if !st.GoodKnown || !near(st.GoodRequestsTotal, tc.good) || st.Attainment == nil || !near(*st.Attainment, tc.attainment) {
				t.Errorf("good %v (known %v), attainment %s; want %v, %v", st.GoodRequestsTotal, st.GoodKnown, ptrString(st.Attainment), tc.good, tc.attainment)
			}
		})
	}
}
