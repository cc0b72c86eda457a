package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// A body rendered for one request is written outside its slot only where
// the memory it holds fits the budget: its capacity, not its length (a
// buffer grown as a page rendered holds up to twice its length), so that
// stalled clients hold no more than the budget; past it, the request
// keeps its slot while written. Memory held outside the slots already (a
// shared body retired while still written: Hold) counts against it; a
// nil budget fits nothing, where it took no reservation, so that a body
// rendered for one request and passed none was written outside its slot
// whatever its size.
func TestWriteOutsideBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		len, cap int
		shared   bool // written with WriteShared
		held     int  // bytes held against the budget of 50 (Hold)
		noBudget bool
		want     int
	}{
		{"fits", 10, 50, false, 0, false, http.StatusOK},
		{"its length fits, not its memory", 10, 100, false, 0, false, http.StatusServiceUnavailable},
		{"fits beside what is held", 10, 20, false, 30, false, http.StatusOK},
		{"not beside what is held", 10, 30, false, 30, false, http.StatusServiceUnavailable},
		{"no budget fits nothing", 10, 10, false, 0, true, http.StatusServiceUnavailable},
		// A shared body reserves nothing, and is written outside its
		// slot unless what is held passes the bound.
		{"shared", 10, 100, true, 50, false, http.StatusOK},
		{"shared, the budget passed", 10, 10, true, 51, false, http.StatusServiceUnavailable},
		{"shared, no budget", 10, 10, true, 0, true, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(50)
			b.Hold(tc.held)
			if tc.noBudget {
				b = nil
			}
			write := WriteOutside
			if tc.shared {
				write = WriteShared
			}
			h := InFlight(1, "metrics", log.NewNopLogger(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/stalled" {
					_ = write(r, NewStallWriter(w, time.Now, StallTimeout, time.Minute), b, make([]byte, tc.len, tc.cap))
				}
			}))
			writing, unblock := make(chan struct{}), make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(testutil.NewStalledClient(writing, unblock), httptest.NewRequest("GET", "/stalled", nil))
			}()
			<-writing
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			close(unblock)
			<-done
			if rec.Code != tc.want {
				t.Errorf("a request while a body of %d bytes (%d held) is written to a stalled client, a budget of 50 (%d held): %d, want %d", tc.len, tc.cap, tc.held, rec.Code, tc.want)
			}
		})
	}
}
