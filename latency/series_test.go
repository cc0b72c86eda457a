package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// vllmModels is a vLLM e2e exposition of models, each given as name, fast
// requests (0.2 s) and slow ones (3 s), in buckets 0.5, 1, 5.
func vllmModels(models ...any) []byte {
	var b strings.Builder
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	for i := 0; i < len(models); i += 3 {
		name, fast, slow := models[i].(string), models[i+1].(int), models[i+2].(int)
		for _, le := range []struct {
			le string
			n  int
		}{{"0.5", fast}, {"1.0", fast}, {"5.0", fast + slow}, {"+Inf", fast + slow}} {
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=%q,le=%q} %d\n", name, le.le, le.n)
		}
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{model_name=%q} %g\n", name, 0.2*float64(fast)+3*float64(slow))
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{model_name=%q} %d\n", name, fast+slow)
	}
	return []byte(b.String())
}

func observeText(t *testing.T, tr *sloTracker, at time.Time, body []byte) {
	t.Helper()
	fams, err := parseExposition(body, expfmt.FmtText, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := extract(tr.src, fams)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.observe(at, h); err != nil {
		t.Fatal(err)
	}
}

// TestSummedSeriesRestartAndLeave sums two models of one vLLM server (no
// matchers): a serves fast requests, b slow ones, 10 each a scrape, both
// with a long history. When b restarts, is unloaded, or another model is
// loaded with a history of its own, the counters and the window count only
// the requests served since the previous scrape.
func TestSummedSeriesRestartAndLeave(t *testing.T) {
	src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.5, Target: time.Second}, Window: time.Minute})
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	check := func(step string, total, good, window, attainment float64) {
		t.Helper()
		st := tr.Status()
		if !near(st.RequestsTotal, total) || !near(st.GoodRequestsTotal, good) || !near(st.WindowRequests, window) || st.Attainment == nil || !near(*st.Attainment, attainment) {
			t.Errorf("%s: requests %v good %v window %v attainment %v; want %v %v %v %v", step, st.RequestsTotal, st.GoodRequestsTotal, st.WindowRequests, st.Attainment, total, good, window, attainment)
		}
	}
	const hist = 200000
	observeText(t, tr, at(0), vllmModels("a", hist, 0, "b", 0, hist))
	observeText(t, tr, at(1), vllmModels("a", hist+10, 0, "b", 0, hist+10))
	check("both serve", 20, 10, 20, 0.5)
	// b restarts: its 5 requests since are new, its history is not
	observeText(t, tr, at(2), vllmModels("a", hist+20, 0, "b", 0, 5))
	check("b restarted", 35, 20, 35, 20.0/35)
	observeText(t, tr, at(3), vllmModels("a", hist+30, 0, "b", 0, 15))
	check("after b's restart", 55, 30, 55, 30.0/55)
	// b is unloaded: a's 10 requests alone
	observeText(t, tr, at(4), vllmModels("a", hist+40, 0))
	check("b gone", 65, 40, 65, 40.0/65)
	// c is loaded with a history: only its requests from the next scrape on
	observeText(t, tr, at(5), vllmModels("a", hist+50, 0, "c", 0, hist))
	check("c appears", 75, 50, 75, 50.0/75)
	observeText(t, tr, at(6), vllmModels("a", hist+60, 0, "c", 0, hist+10))
	check("c serves", 95, 60, 95, 60.0/95)
	if st := tr.Status(); st.Quantiles[0.5] <= 0 || st.LastError != "" || !st.SourceUp {
		t.Errorf("status %+v", st)
	}
}

// TestTritonModelReload sums two Triton models' counters and histograms;
// resnet reloads (Triton starts its counters over) while bert keeps
// serving.
func TestTritonModelReload(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Minute})
	triton := func(bert, resnet int) []byte {
		var b strings.Builder
		b.WriteString("# TYPE nv_inference_request_success counter\n")
		b.WriteString("# TYPE nv_inference_request_duration_us counter\n")
		b.WriteString("# TYPE nv_inference_first_response_histogram_ms histogram\n")
		for _, m := range []struct {
			name string
			n    int
			ms   string
		}{{"bert", bert, "10"}, {"resnet", resnet, "100"}} {
			fmt.Fprintf(&b, "nv_inference_request_success{model=%q,version=\"1\"} %d\n", m.name, m.n)
			fmt.Fprintf(&b, "nv_inference_request_duration_us{model=%q,version=\"1\"} %d\n", m.name, m.n*1000)
			fast := 0
			if m.ms == "10" {
				fast = m.n
			}
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{model=%q,version=\"1\",le=\"50\"} %d\n", m.name, fast)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{model=%q,version=\"1\",le=\"500\"} %d\n", m.name, m.n)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_bucket{model=%q,version=\"1\",le=\"+Inf\"} %d\n", m.name, m.n)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_count{model=%q,version=\"1\"} %d\n", m.name, m.n)
			fmt.Fprintf(&b, "nv_inference_first_response_histogram_ms_sum{model=%q,version=\"1\"} %d\n", m.name, m.n)
		}
		return []byte(b.String())
	}
	t0 := time.Unix(0, 0)
	observeText(t, tr, t0, triton(50000, 50000))
	observeText(t, tr, t0.Add(time.Second), triton(50010, 50010))
	observeText(t, tr, t0.Add(2*time.Second), triton(50020, 4)) // resnet reloaded
	// 20 bert requests, all good; 14 resnet ones at 100 ms, in (50, 500]
	// ms, of which 30/450 count under 80 ms
	good := 20 + 14*30.0/450
	st := tr.Status()
	if !near(st.RequestsTotal, 34) || !near(st.GoodRequestsTotal, good) || !near(st.WindowRequests, 34) || st.Attainment == nil || !near(*st.Attainment, good/34) {
		t.Errorf("requests %v good %v window %v attainment %v; want 34 %v 34 %v", st.RequestsTotal, st.GoodRequestsTotal, st.WindowRequests, st.Attainment, good, good/34)
	}
}
