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
// keeps its slot while written.
func TestWriteOutsideBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		len, cap int
		want     int
	}{
		{"fits", 10, 50, http.StatusOK},
		{"its length fits, not its memory", 10, 100, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(50)
			h := InFlight(1, "metrics", log.NewNopLogger(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/stalled" {
					_ = WriteOutside(r, NewStallWriter(w, time.Now, StallTimeout, time.Minute), b, make([]byte, tc.len, tc.cap))
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
				t.Errorf("a request while a body of %d bytes (%d held) is written to a stalled client, a budget of 50: %d, want %d", tc.len, tc.cap, rec.Code, tc.want)
			}
		})
	}
}
