package latency

import (
	"fmt"
	"testing"
	"time"
)

// TestSeriesWithoutBucketsCountedOnce reads a vLLM page summing two
// models, one of which has no bucket (its _count and _sum only: a native
// histogram without classic buckets reads the same). Its delta found no
// bound in common with its previous scrape and took that as a new
// layout, as after a restart: its whole history was counted again at
// every scrape, the same page twice counting its 1,000 requests. A series
// whose layout has no bound, now and before, is the same layout.
func TestSeriesWithoutBucketsCountedOnce(t *testing.T) {
	page := func(a, b int) []byte {
		body := vllmModels("a", a, 0)
		return append(body, fmt.Sprintf("vllm:e2e_request_latency_seconds_sum{model_name=\"b\"} %d\nvllm:e2e_request_latency_seconds_count{model_name=\"b\"} %d\n", b, b)...)
	}
	for _, tc := range []struct {
		name  string
		pages [][]byte
		total float64
	}{
		{"the same page twice", [][]byte{page(100, 1000), page(100, 1000)}, 0},
		{"each model serves 10", [][]byte{page(100, 1000), page(110, 1010)}, 20},
		{"three scrapes", [][]byte{page(100, 1000), page(110, 1010), page(110, 1015)}, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.5, Target: time.Second}, Window: time.Minute})
			for i, p := range tc.pages {
				observeText(t, tr, time.Unix(int64(1000+15*i), 0), p)
			}
			if st := tr.Status(); !near(st.RequestsTotal, tc.total) {
				t.Errorf("requests %v, want %v", st.RequestsTotal, tc.total)
			}
		})
	}
}
