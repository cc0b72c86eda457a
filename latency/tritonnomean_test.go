package latency

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// A Triton run with --metrics-config counter_latencies=false
// histogram_latencies=true (no summary) serves nothing that times its
// successes as a whole: no mean latency can be known. With a failure
// counter that has no reason label (or none at all) the delta is taken
// whole, which read a mean of 0 s.
func TestTritonHistogramAloneNoMean(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Minute})
	text := func(succ, fail int, b [4]int) []byte {
		return []byte(fmt.Sprintf(`# TYPE nv_inference_request_success counter
nv_inference_request_success{model="bert",version="1"} %d
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="bert",version="1"} %d
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{model="bert",version="1",le="10"} %d
nv_inference_first_response_histogram_ms_bucket{model="bert",version="1",le="50"} %d
nv_inference_first_response_histogram_ms_bucket{model="bert",version="1",le="100"} %d
nv_inference_first_response_histogram_ms_bucket{model="bert",version="1",le="+Inf"} %d
nv_inference_first_response_histogram_ms_sum{model="bert",version="1"} 5000
nv_inference_first_response_histogram_ms_count{model="bert",version="1"} %d
`, succ, fail, b[0], b[1], b[2], b[3], b[3]))
	}
	st := observeTexts(t, tr, src, text(100, 0, [4]int{20, 60, 95, 100}), text(140, 10, [4]int{25, 90, 135, 150}))
	if st.MeanSeconds != nil {
		t.Errorf("mean latency %v s reported with nothing that times the requests (want none)", *st.MeanSeconds)
	}
}

// Triton restarted with --metrics-config counter_latencies=false
// histogram_latencies=true (the flags of its default failure counter,
// reason label included): the first answer after the restart changes the
// shape, its delta is taken whole, and the window's mean read 0 s.
func TestTritonRestartToHistogramAloneNoMean(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Minute})
	steps := []struct {
		f tritonFlags
		s tritonScrape
	}{
		{tritonFlags{counters: true}, tritonScrape{succ: 1000, fail: 5, durUs: 5e7}},
		{tritonFlags{counters: true}, tritonScrape{succ: 1100, fail: 5, durUs: 5.5e7}},
		// restarted with other flags: counters from 0
		{tritonFlags{histogram: true}, tritonScrape{succ: 40, fail: 10, buckets: [4]int{25, 30, 45, 50}, histSumMs: 2000}},
	}
	var texts [][]byte
	for _, st := range steps {
		texts = append(texts, tritonFlagsText(st.f, st.s))
	}
	st := observeTexts(t, tr, src, texts...)
	if st.MeanSeconds != nil {
		t.Errorf("mean latency %v s reported after a restart with counter_latencies=false and no summary (want none)", *st.MeanSeconds)
	}
}

// observeTexts has tr observe each text exposition of src in turn, 15 s
// apart, and returns its status after the last.
func observeTexts(t *testing.T, tr *sloTracker, src *Source, texts ...[]byte) Status {
	t.Helper()
	for i, text := range texts {
		fams, err := parseExposition(text, expfmt.FmtText, families(src))
		if err != nil {
			t.Fatal(err)
		}
		h, err := extract(src, fams)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.observe(time.Unix(int64(15*(i+1)), 0), h); err != nil {
			t.Fatal(err)
		}
	}
	return tr.Status()
}
