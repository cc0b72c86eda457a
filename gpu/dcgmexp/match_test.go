package dcgmexp

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A page scraped without error that has nothing for this host's GPUs (a
// Service routing to another node's dcgm-exporter, only other fields)
// shows as fewer GPUs matched than up, with a warning naming the URL, the
// host's GPUs missing and the page's; at most one a minute.
func TestGPUsMatched(t *testing.T) {
	const other = "GPU-00000000-1111-2222-3333-444444444444"
	for _, tc := range []struct {
		name, page  string
		status      int
		wantMatched int
		wantWarn    []string // in the warning; nil: no warning
	}{
		// innerReadings: A (twice), B, C up; D down
		{"this host's page", string(readFixture(t, "dcgm-mixed.prom")), 200, 3, nil},
		{"another host's page", "DCGM_FI_PROF_SM_ACTIVE{UUID=\"" + other + "\"} 0.5\n", 200, 0,
			[]string{"gpus_up=3", "gpus_matched=0", uuidA, uuidB, uuidC, "page_gpus=1", other}},
		{"only fields not read", "DCGM_FI_DEV_XID_ERRORS{UUID=\"" + uuidA + "\"} 0\n", 200, 0,
			[]string{"gpus_matched=0", "page_gpus=0"}},
		{"some GPUs lacking", string(readFixture(t, "dcgm-k8s.prom")), 200, 2,
			[]string{"gpus_matched=2", "missing=" + uuidC}},
		{"stale page", "DCGM_FI_PROF_SM_ACTIVE{UUID=\"" + uuidA + "\"} 0.5 1000\n", 200, 0, []string{"gpus_matched=0"}},
		{"scrape failed", "", 503, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.page))
			}))
			defer srv.Close()
			var logs bytes.Buffer
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL + "/metrics", Clock: clock, Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			for range 10 { // 10 samples in 10 s: one warning
				rd, err := s.Sample(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if h := rd.DCGMExporter; h == nil || h.GPUsMatched != tc.wantMatched {
					t.Fatalf("health %+v, want %d GPUs matched", h, tc.wantMatched)
				}
				clock.Advance(time.Second)
			}
			warnings := strings.Count(logs.String(), "has no current DCGM fields")
			switch {
			case tc.wantWarn == nil && warnings != 0:
				t.Errorf("warned: %s", logs.String())
			case tc.wantWarn != nil && warnings != 1:
				t.Errorf("%d warnings in 10 s, want 1:\n%s", warnings, logs.String())
			}
			for _, w := range append(tc.wantWarn, srv.URL) {
				if tc.wantWarn != nil && !strings.Contains(logs.String(), w) {
					t.Errorf("warning %q lacks %q", logs.String(), w)
				}
			}
			if tc.wantWarn == nil {
				return
			}
			clock.Advance(time.Minute)
			_, _ = s.Sample(context.Background())
			if n := strings.Count(logs.String(), "has no current DCGM fields"); n != 2 {
				t.Errorf("%d warnings after a minute more, want 2", n)
			}
		})
	}
}
