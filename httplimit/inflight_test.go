package httplimit

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-kit/log"
)

// A request beyond the limit is answered 503 with a Retry-After and
// logged; the slot frees
// when the request in flight ends.
func TestInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var logged bytes.Buffer
	h := InFlight(1, "metrics", log.NewLogfmtLogger(log.NewSyncWriter(&logged)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/block", nil))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(logged.String(), "rejected=1") || !strings.Contains(logged.String(), "metrics requests rejected") {
		t.Fatalf("beyond the limit: %d, log %q", rec.Code, logged.String())
	}
	if got := rec.Header().Get("Retry-After"); got != RetryAfter {
		t.Errorf("beyond the limit: Retry-After %q, want %q", got, RetryAfter)
	}
	close(release)
	<-done
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after the slot freed: %d", rec.Code)
	}
}

// No limit: the handler itself.
func TestInFlightUnlimited(t *testing.T) {
	h := http.NotFoundHandler()
	if got := InFlight(0, "metrics", log.NewNopLogger(), h); got == nil {
		t.Fatal("nil handler")
	}
}
