package dcgmexp

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A dcgm-exporter that fails every other scrape logs at most one failure
// warning a minute, with the count of those not logged, and a recovery
// only after a failure that was logged; a long outage after a long
// success is logged at once.
func TestFlappingSourceLogRateLimited(t *testing.T) {
	body := readFixture(t, "dcgm-k8s.prom")
	var n atomic.Int64
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() || n.Add(1)%2 == 1 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	var logs bytes.Buffer
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL, Logger: log.NewLogfmtLogger(&logs), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sample := func(k int) {
		for range k {
			if _, err := s.Sample(context.Background()); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
		}
	}
	count := func(what string) int { return strings.Count(logs.String(), what) }
	sample(150) // 2.5 minutes flapping every second: 75 failures
	if got := count("scraping dcgm-exporter failed"); got != 3 {
		t.Errorf("%d failure warnings in 2.5 minutes of flapping, want 3 (one a minute):\n%s", got, logs.String())
	}
	if got := count("reachable again"); got != 3 {
		t.Errorf("%d recoveries logged, want 3 (one after each failure logged):\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "other_failures_not_logged=29") {
		t.Errorf("no count of the failures not logged:\n%s", logs.String())
	}
	if s.ScrapeErrorsTotal() != 75 {
		t.Errorf("%d errors counted, want 75", s.ScrapeErrorsTotal())
	}
	// the last scrape succeeded; an outage after an hour of success is
	// logged at once
	logs.Reset()
	clock.Advance(time.Hour)
	down.Store(true)
	sample(1)
	if got := count("scraping dcgm-exporter failed"); got != 1 {
		t.Errorf("outage after an hour of success: %d warnings, want 1 at once:\n%s", got, logs.String())
	}
}
