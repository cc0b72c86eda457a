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

// TestServiceWithTwoReplicas: the documented Kubernetes example reads
// a tenant's latency from a Service URL (http://chat.llm.svc:8000/metrics).
// With two ready pods behind it, scrapes alternate between them. Each pod
// serves 10 requests per scrape interval (20 in all), so requests_total
// should rise by about 20 per interval, never by a pod's whole history.
func TestServiceWithTwoReplicas(t *testing.T) {
	var mu sync.Mutex
	counts := [2]int{100000, 40000} // the two pods' histories so far
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		counts[0] += 10
		counts[1] += 10
		c := counts[n%2] // the Service picks a pod
		n++
		fmt.Fprintf(w, "# TYPE vllm:e2e_request_latency_seconds histogram\n"+
			"vllm:e2e_request_latency_seconds_bucket{model_name=\"llama\",le=\"0.1\"} %d\n"+
			"vllm:e2e_request_latency_seconds_bucket{model_name=\"llama\",le=\"+Inf\"} %d\n"+
			"vllm:e2e_request_latency_seconds_sum{model_name=\"llama\"} %d\n"+
			"vllm:e2e_request_latency_seconds_count{model_name=\"llama\"} %d\n", c, c, c/20, c)
	}))
	defer srv.Close()
	src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.99, Target: 250 * time.Millisecond}, Window: 5 * time.Minute})
	tr.setInterval(15 * time.Second)
	sc := &scraper{httpc: srv.Client()}
	now := time.Unix(1_000_000, 0)
	const scrapes = 20
	for i := 0; i < scrapes; i++ {
		if err := sc.scrapeOnce(context.Background(), tr, now); err != nil {
			t.Logf("scrape %d: %v", i, err)
		}
		now = now.Add(15 * time.Second)
	}
	st := tr.Status()
	served := float64(20 * (scrapes - 1)) // both pods' requests after the baseline
	t.Logf("requests_total %v, window_requests %v, true requests served after the baseline %v", st.RequestsTotal, st.WindowRequests, served)
	if st.RequestsTotal > 2*served {
		t.Errorf("requests_total %v is %.0fx the %v requests served: each switch to the pod with the shorter history is taken for a counter reset and its whole history counted", st.RequestsTotal, st.RequestsTotal/served, served)
	}
}
