package latency

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServiceWithTwoReplicas: a tenant's latency read from a Service URL
// (http://chat.llm.svc:8000/metrics) with two ready pods behind it, which
// scrapes reach in turns. Each pod serves 10 requests per scrape interval
// (20 in all). Where the pods serve process_start_time_seconds, the first
// switch, to a start time not seen before, is taken for a restart and
// counts the other pod's history once (40,020: the documented cost); from
// the first switch back, to a start time seen before, the answers are
// refused and nothing more is counted. Without it a switch to the pod with the shorter
// history cannot be told from a restart: it is counted as a counter reset,
// that pod's whole history each time (941,190 where 380 were served). That
// is the documented limit (docs/slo.md, "One server": the URL must reach one
// server process); the test asserts it as it is, so that a change of it
// shows here.
func TestServiceWithTwoReplicas(t *testing.T) {
	const day = 1_000_000 - 86400
	tests := []struct {
		name    string
		starts  [2]float64 // the pods' process_start_time_seconds; 0: not served
		want    float64    // requests_total
		wantErr string     // in the last error; "" for none (up)
	}{
		{"no start times: counted as resets", [2]float64{0, 0}, 941190, ""},
		{"with start times", [2]float64{day, day + 3600}, 40020, "went from 917200 back to 913600, an earlier answer's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			counts := [2]int{100000, 40000} // the two pods' histories so far
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				counts[0] += 10
				counts[1] += 10
				pod := n % 2 // the Service picks a pod
				c := counts[pod]
				n++
				fmt.Fprintf(w, "# TYPE vllm:e2e_request_latency_seconds histogram\n"+
					"vllm:e2e_request_latency_seconds_bucket{model_name=\"llama\",le=\"0.1\"} %d\n"+
					"vllm:e2e_request_latency_seconds_bucket{model_name=\"llama\",le=\"+Inf\"} %d\n"+
					"vllm:e2e_request_latency_seconds_sum{model_name=\"llama\"} %d\n"+
					"vllm:e2e_request_latency_seconds_count{model_name=\"llama\"} %d\n", c, c, c/20, c)
				if s := tc.starts[pod]; s > 0 {
					fmt.Fprintf(w, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %v\n", s)
				}
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
			if st.RequestsTotal != tc.want {
				t.Errorf("requests_total %v, want %v (20 requests a scrape were served)", st.RequestsTotal, tc.want)
			}
			if tc.wantErr == "" {
				if !st.SourceUp || st.ScrapeErrorsTotal != 0 {
					t.Errorf("source up %v, %d scrape errors, last error %q; want up, none refused", st.SourceUp, st.ScrapeErrorsTotal, st.LastError)
				}
				return
			}
			if st.SourceUp || !strings.Contains(st.LastError, tc.wantErr) {
				t.Errorf("source up %v, last error %q; want down, saying %q", st.SourceUp, st.LastError, tc.wantErr)
			}
		})
	}
}
