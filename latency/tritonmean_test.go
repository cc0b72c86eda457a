package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// tritonModel is one model's cumulative counters in a Triton exposition:
// successes of 100 ms each (their duration in
// nv_inference_request_duration_us and, with the histogram, in its (50,
// 500] ms bucket) and failures, counted but timed nowhere.
type tritonModel struct {
	name      string
	succ, bad int
}

// tritonText is a Triton exposition of models, with the first-response
// histogram or with the counters alone.
func tritonText(histogram bool, models ...tritonModel) []byte {
	var b strings.Builder
	b.WriteString("# TYPE nv_inference_request_success counter\n")
	b.WriteString("# TYPE nv_inference_request_failure counter\n")
	b.WriteString("# TYPE nv_inference_request_duration_us counter\n")
	if histogram {
		b.WriteString("# TYPE nv_inference_first_response_histogram_ms histogram\n")
	}
	for _, m := range models {
		l := fmt.Sprintf("model=%q,version=\"1\"", m.name)
		fmt.Fprintf(&b, "nv_inference_request_success{%s} %d\n", l, m.succ)
		fmt.Fprintf(&b, "nv_inference_request_failure{%s,reason=\"REJECTED\"} %d\n", l, m.bad)
		fmt.Fprintf(&b, "nv_inference_request_duration_us{%s} %d\n", l, m.succ*100000)
		if histogram {
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=\"50\"} 0\n", l)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=\"500\"} %d\n", l, m.succ)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=\"+Inf\"} %d\n", l, m.succ)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_count{%s} %d\n", l, m.succ)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_sum{%s} %d\n", l, m.succ*100)
		}
	}
	return []byte(b.String())
}

// TestTritonMeanOverSuccesses: Triton adds a request's duration to
// nv_inference_request_duration_us only when it succeeds, so the mean is
// the duration over the successes, while requests are successes and
// failures. Every success here takes 100 ms.
func TestTritonMeanOverSuccesses(t *testing.T) {
	tests := []struct {
		name    string
		scrapes [][]tritonModel // one a second, the first a baseline
		// mean < 0: none; requests: in total and in the window
		mean, requests float64
	}{
		// 100 successes totalling 10 s and 100 failures: 0.1 s, not
		// 10 s over 200 = 0.05 s
		{"failures not timed", [][]tritonModel{
			{{"bert", 0, 0}},
			{{"bert", 100, 100}},
		}, 0.1, 200},
		// the window's requests all failed: no latency is known
		{"failures only", [][]tritonModel{
			{{"bert", 100, 0}},
			{{"bert", 100, 100}},
		}, -1, 100},
		// bert reloads (its counters start over) while resnet serves:
		// 20 successes (2 s) and 10 failures, then bert's 5 and 5 since
		// its reload and resnet's 10, none of the history
		{"model reload", [][]tritonModel{
			{{"bert", 10000, 5000}, {"resnet", 10000, 0}},
			{{"bert", 10010, 5010}, {"resnet", 10010, 0}},
			{{"bert", 5, 5}, {"resnet", 10020, 0}},
		}, 0.1, 50},
	}
	for _, shape := range []string{"counters", "histogram"} {
		for _, tc := range tests {
			t.Run(shape+"/"+tc.name, func(t *testing.T) {
				src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
				tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute})
				t0 := time.Unix(1000, 0)
				for i, models := range tc.scrapes {
					observeText(t, tr, t0.Add(time.Duration(i)*time.Second), tritonText(shape == "histogram", models...))
				}
				st := tr.Status()
				if tc.mean < 0 && st.MeanSeconds != nil || tc.mean >= 0 && (st.MeanSeconds == nil || !near(*st.MeanSeconds, tc.mean)) {
					t.Errorf("mean %s, want %v", ptrString(st.MeanSeconds), tc.mean)
				}
				if !near(st.RequestsTotal, tc.requests) || !near(st.WindowRequests, tc.requests) {
					t.Errorf("requests %v, in the window %v; want %v (success + failure)", st.RequestsTotal, st.WindowRequests, tc.requests)
				}
			})
		}
	}
}
