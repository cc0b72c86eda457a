package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// tritonOutcomes is one model's cumulative requests in a Triton exposition
// by outcome and first-response time: successes in 5 ms and in 200 ms,
// failures in 2 ms (refused at once) and in 1 s (timed out). Triton
// observes the first-response histogram when a response is sent, an error
// response too, so the failures are in the histogram as the successes
// are.
type tritonOutcomes struct {
	name                       string
	fastOK, slowOK, fast, slow int
}

// tritonOutcomesText is a Triton exposition of models with the
// first-response histogram (buckets at 10, 100 and 500 ms).
func tritonOutcomesText(models ...tritonOutcomes) []byte {
	var b strings.Builder
	b.WriteString("# TYPE nv_inference_request_success counter\n")
	b.WriteString("# TYPE nv_inference_request_failure counter\n")
	b.WriteString("# TYPE nv_inference_request_duration_us counter\n")
	b.WriteString("# TYPE nv_inference_first_response_histogram_ms histogram\n")
	for _, m := range models {
		l := fmt.Sprintf("model=%q,version=\"1\"", m.name)
		fmt.Fprintf(&b, "nv_inference_request_success{%s} %d\n", l, m.fastOK+m.slowOK)
		fmt.Fprintf(&b, "nv_inference_request_failure{%s,reason=\"BACKEND\"} %d\n", l, m.fast+m.slow)
		fmt.Fprintf(&b, "nv_inference_request_duration_us{%s} %d\n", l, m.fastOK*5000+m.slowOK*200000)
		fast := m.fastOK + m.fast
		all := fast + m.slowOK + m.slow
		for _, c := range []struct {
			le string
			n  int
		}{{"10", fast}, {"100", fast}, {"500", fast + m.slowOK}, {"+Inf", all}} {
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{%s,le=%q} %d\n", l, c.le, c.n)
		}
		fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_count{%s} %d\n", l, all)
		fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_sum{%s} %d\n", l, m.fastOK*5+m.slowOK*200+m.fast*2+m.slow*1000)
	}
	return []byte(b.String())
}

// TestTritonFailuresNotGood: Triton's first-response histogram holds the
// failed requests' error responses beside the successes, and cannot tell
// a fast failure from a fast success. No failure may be counted good:
// good requests are those at or under the target (100 ms) but at most the
// successes, over all requests (success + failure). Where a fast failure
// stands in for a slow success the count is still a bound (above the
// truth).
func TestTritonFailuresNotGood(t *testing.T) {
	tests := []struct {
		name    string
		scrapes [][]tritonOutcomes // one a second, the first a baseline
		// good requests and requests, in total and in the window
		good, requests float64
	}{
		// a server that fails fast: 60 fast successes, 40 fast
		// failures; 100 at or under the target, 60 good, not 100
		{"fast failures", [][]tritonOutcomes{
			{{"bert", 0, 0, 0, 0}},
			{{"bert", 60, 0, 40, 0}},
		}, 60, 100},
		// every request refused at once: none good
		{"fast failures only", [][]tritonOutcomes{
			{{"bert", 10, 0, 0, 0}},
			{{"bert", 10, 0, 100, 0}},
		}, 0, 100},
		// failures that time out are over the target anyway
		{"slow failures", [][]tritonOutcomes{
			{{"bert", 0, 0, 0, 0}},
			{{"bert", 60, 0, 0, 40}},
		}, 60, 100},
		// all 60 successes slow, 40 fast failures: none is good, but
		// the histogram shows 40 at or under the target and there are
		// 60 successes; the 40 is a bound
		{"fast failures, slow successes", [][]tritonOutcomes{
			{{"bert", 0, 0, 0, 0}},
			{{"bert", 0, 60, 40, 0}},
		}, 40, 100},
		// model by model: bert fails 50 fast while resnet serves 20
		// fast; then bert reloads (its counters start over) and fails
		// 30 more fast while resnet serves 20: 20 + 20 good of 70 + 50
		{"two models, reload", [][]tritonOutcomes{
			{{"bert", 100, 0, 0, 0}, {"resnet", 100, 0, 0, 0}},
			{{"bert", 100, 0, 50, 0}, {"resnet", 120, 0, 0, 0}},
			{{"bert", 0, 0, 30, 0}, {"resnet", 140, 0, 0, 0}},
		}, 40, 120},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 100 * time.Millisecond}, Window: time.Minute})
			t0 := time.Unix(1000, 0)
			for i, models := range tc.scrapes {
				observeText(t, tr, t0.Add(time.Duration(i)*time.Second), tritonOutcomesText(models...))
			}
			st := tr.Status()
			if !near(st.RequestsTotal, tc.requests) || !near(st.WindowRequests, tc.requests) {
				t.Errorf("requests %v, in the window %v; want %v (success + failure)", st.RequestsTotal, st.WindowRequests, tc.requests)
			}
			if !st.GoodKnown || !near(st.GoodRequestsTotal, tc.good) {
				t.Errorf("good requests %v (known %v), want %v", st.GoodRequestsTotal, st.GoodKnown, tc.good)
			}
			if want := tc.good / tc.requests; st.Attainment == nil || !near(*st.Attainment, want) {
				t.Errorf("attainment %s, want %v", ptrString(st.Attainment), want)
			}
		})
	}
}
