package webui

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// The HTML holds its slot of TunerPageMaxInFlight only while it renders:
// it is written outside it, so that a browser coming while as many
// clients as the limit stall on the page is served. Where the slot was
// held through the writing, two requests that never read, renewed every
// TunerPageWriteTimeout, kept a browser off the page most of the time.
// Past maxOutsideBytes (here 0) of pages being written, a page holds its
// slot while written, so that stalled clients hold a bounded memory.
func TestTunerPageHTMLWrittenOutsideSlot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outside int64
		want    int
	}{
		{"pages within the bytes allowed", maxOutsideBytes, http.StatusOK},
		{"pages past the bytes allowed", 0, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewTunerPage(pageSnapshot, pageStatus, simInfo, nil).(tunerPage)
			p.outside = httplimit.NewBudget(tc.outside)
			h := httplimit.InFlightOf(TunerPageMaxInFlight, "tuner page", "", NewTunerPageBusy(simInfo, TunerPageMaxInFlight), log.NewNopLogger(), p)
			writing, unblock := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			for range TunerPageMaxInFlight {
				wg.Go(func() {
					h.ServeHTTP(testutil.NewStalledClient(writing, unblock), httptest.NewRequest("GET", "/tuner", nil))
				})
			}
			for range TunerPageMaxInFlight {
				<-writing
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/tuner", nil))
			close(unblock)
			wg.Wait()
			if rec.Code != tc.want {
				t.Errorf("a browser while %d clients stall on the page: %d, want %d", TunerPageMaxInFlight, rec.Code, tc.want)
			}
		})
	}
}

// A cut response's warning shows the path clipped: a client asking with
// a query of 60 KB, every TunerPageWriteTimeout, wrote a line of 60 KB
// each pageCutLogEvery.
func TestTunerPageCutWarningPathClipped(t *testing.T) {
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	p := NewTunerPage(pageSnapshot, pageStatus, simInfo, log.NewLogfmtLogger(&logs)).(tunerPage)
	p.now = func() time.Time { return clock }
	c := newStallClient(&clock, 1<<20, 1<<10)
	p.ServeHTTP(c, httptest.NewRequest("GET", "/tuner?pad="+strings.Repeat("x", 60<<10), nil))
	s := logs.String()
	if !strings.Contains(s, "tuner page response cut short") || !strings.Contains(s, "more bytes)") || len(s) > 1000 {
		t.Errorf("want a warning of a cut response, its path clipped; got %d bytes:\n%.600s", len(s), s)
	}
}
