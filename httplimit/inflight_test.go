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
// logged, naming the host that holds the most slots (the client refused
// is mostly the scraper kept out); the slot frees when the request in
// flight ends.
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
		req := httptest.NewRequest("GET", "/block", nil)
		req.RemoteAddr = "10.0.0.7:52114"
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(logged.String(), "rejected=1") || !strings.Contains(logged.String(), "metrics requests rejected") {
		t.Fatalf("beyond the limit: %d, log %q", rec.Code, logged.String())
	}
	// the line names who holds the slots, not only who was refused
	if s := logged.String(); !strings.Contains(s, "last_remote=192.0.2.1:1234 top_holder=10.0.0.7 top_holder_slots=1") {
		t.Errorf("the rejection's line names no holder: %q", s)
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

// A handler that gives its slot back (Release: its response rendered,
// only the client's reading left) lets the next request in while it
// writes; giving it back twice, and the limit's own at the handler's
// return, frees no other request's slot.
func TestReleaseGivesSlotBack(t *testing.T) {
	entered := make(chan struct{})
	writing, rendering := make(chan struct{}), make(chan struct{})
	h := InFlight(1, "metrics", log.NewNopLogger(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/writing":
			Release(r)
			Release(r)
			entered <- struct{}{}
			<-writing
		case "/rendering":
			entered <- struct{}{}
			<-rendering
		}
	}))
	serve := func(target string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		return rec.Code
	}
	wrote, rendered := make(chan int, 1), make(chan int, 1)
	go func() { wrote <- serve("/writing") }()
	<-entered
	if code := serve("/"); code != http.StatusOK {
		t.Errorf("while a request writes, its slot given back: %d, want 200", code)
	}
	go func() { rendered <- serve("/rendering") }()
	select {
	case <-entered:
	case code := <-rendered:
		t.Fatalf("a request once the writing one gave its slot back: %d, want it served", code)
	}
	close(writing) // it returns: its slot was given back already
	if code := <-wrote; code != http.StatusOK {
		t.Errorf("the writing request: %d", code)
	}
	if code := serve("/"); code != http.StatusServiceUnavailable {
		t.Errorf("while a request renders, after another gave its slot back twice and returned: %d, want 503", code)
	}
	close(rendering)
	if code := <-rendered; code != http.StatusOK {
		t.Errorf("the rendering request: %d", code)
	}
}
