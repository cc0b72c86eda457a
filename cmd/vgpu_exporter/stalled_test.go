package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// Clients that never read lock no one out: with as many of them stalled
// on the metrics (cached and filtered) as --web.max-requests allows, and
// on the tuner page's JSON and HTML as its limits allow, a scrape and a
// browser's page are served. The slots were held through the writing: a
// scrape got 503 for as long as they stalled (a minute at a time, for
// ever when renewed), and a browser most of the time.
func TestStalledClientsLockNoOneOut(t *testing.T) {
	const maxRequests = 2
	h, err := newHandler(handlerOptions{TelemetryPath: "/metrics", NewCollector: newFakeCollector, MaxRequests: maxRequests,
		TunerPage: webui.NewTunerPage(nil, nil, webui.TunerPageInfo{Backend: "sim"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	writing, unblock := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	stalled := []string{"/metrics", "/metrics?collect[]=gpu"}
	for range webui.TunerPageMaxInFlight {
		stalled = append(stalled, webui.TunerPagePath, webui.TunerPagePath+"?format=json")
	}
	for _, target := range stalled {
		wg.Go(func() {
			h.ServeHTTP(testutil.NewStalledClient(writing, unblock), httptest.NewRequest("GET", target, nil))
		})
	}
	for range stalled {
		<-writing
	}
	for _, target := range []string{"/metrics", webui.TunerPagePath} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s while %d clients stall: %d, want 200", target, len(stalled), rec.Code)
		}
	}
	close(unblock)
	wg.Wait()
}
