package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// vllmSums is a vLLM e2e exposition of models a and b with the given
// counts (all in the 1 s bucket) and sums, as written.
func vllmSums(untyped bool, aCount int, aSum string, bCount int, bSum string) []byte {
	var b strings.Builder
	if !untyped {
		b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	}
	for _, m := range []struct {
		name  string
		count int
		sum   string
	}{{"a", aCount, aSum}, {"b", bCount, bSum}} {
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=%q,le=\"1\"} %d\n", m.name, m.count)
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=%q,le=\"+Inf\"} %d\n", m.name, m.count)
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{model_name=%q} %d\n", m.name, m.count)
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{model_name=%q} %s\n", m.name, m.sum)
	}
	return []byte(b.String())
}

// TestSeriesBadSumRefused: one series' sum that is negative, NaN or
// infinite fails the scrape with an error naming the series, and changes
// nothing, though the series summed make a plausible total: a reset series'
// delta is its values as they are, and its negative sum made the mean
// latency negative (-3.3 s).
func TestSeriesBadSumRefused(t *testing.T) {
	for _, untyped := range []bool{false, true} {
		for _, sum := range []string{"-50", "NaN", "+Inf", "-Inf"} {
			t.Run(fmt.Sprintf("untyped=%v,sum=%s", untyped, sum), func(t *testing.T) {
				src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
				tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.99, Target: 2 * time.Second}, Window: time.Minute})
				t0 := time.Unix(1000, 0)
				observeText(t, tr, t0, vllmSums(untyped, 10, "5", 10, "100"))
				observeText(t, tr, t0.Add(15*time.Second), vllmSums(untyped, 20, "10", 20, "110"))
				before := tr.Status()
				fams, err := parseExposition(vllmSums(untyped, 5, sum, 30, "120"), expfmt.FmtText, nil)
				if err != nil {
					t.Fatal(err)
				}
				h, err := extract(src, fams)
				if err == nil {
					err = tr.observe(t0.Add(30*time.Second), h)
				}
				if err == nil || !strings.Contains(err.Error(), `model_name="a"`) || !strings.Contains(err.Error(), "bad sum") {
					t.Fatalf("error %v, want one naming the series and its bad sum", err)
				}
				st := tr.Status()
				if st.MeanSeconds == nil || *st.MeanSeconds != *before.MeanSeconds || st.RequestsTotal != before.RequestsTotal {
					t.Errorf("mean %s, requests %v; want them unchanged: %v, %v", ptrString(st.MeanSeconds), st.RequestsTotal, *before.MeanSeconds, before.RequestsTotal)
				}
			})
		}
	}
}
