package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// onceServer answers its first request with status and a Retry-After
// header (none when retryAfter is ""), and every later one with a vLLM
// histogram; it records when, by clock, each request came.
type onceServer struct {
	mu    sync.Mutex
	clock gpu.Clock
	hits  []time.Time
}

func newOnceServer(t *testing.T, clock gpu.Clock, status int, retryAfter string) (*onceServer, *httptest.Server) {
	t.Helper()
	s := &onceServer{clock: clock}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, s.clock.Now())
		first := len(s.hits) == 1
		s.mu.Unlock()
		if first {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			if status == http.StatusOK {
				_, _ = w.Write([]byte(vllmText("5")))
			}
			return
		}
		_, _ = w.Write([]byte(vllmText("5")))
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *onceServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hits)
}

// TestRetryAfterHonoured: a source that answers 429 or 503 with a
// Retry-After is not scraped again before the time it gives (seconds or
// an HTTP date, at most maxRetryAfter later), and its status says until
// when; a Retry-After past, malformed, on another status, or absent
// changes nothing: the next scrape comes at the next interval.
func TestRetryAfterHonoured(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	const interval = 15 * time.Second
	tests := []struct {
		name       string
		status     int
		retryAfter string
		next       time.Duration // when, after t0, the second scrape comes
		wantErr    string        // in LastError while it waits; "" for up
		notErr     string
	}{
		{"delta-seconds", 429, "120", 120 * time.Second, "HTTP 429 Too Many Requests; retrying after 2026-12-06T09:02:00Z (Retry-After)", ""},
		{"delta-seconds off the grid", 429, "20", 30 * time.Second, "retrying after 2026-12-06T09:00:20Z (Retry-After)", ""},
		{"HTTP-date", 429, "Sun, 06 Dec 2026 09:01:00 GMT", 60 * time.Second, "HTTP 429 Too Many Requests; retrying after 2026-12-06T09:01:00Z (Retry-After)", ""},
		{"RFC 850 date", 429, "Sunday, 06-Dec-26 09:01:30 GMT", 90 * time.Second, "retrying after 2026-12-06T09:01:30Z (Retry-After)", ""},
		{"past date", 429, "Sun, 06 Dec 2026 08:00:00 GMT", interval, "HTTP 429 Too Many Requests", "retrying"},
		{"zero seconds", 429, "0", interval, "HTTP 429 Too Many Requests", "retrying"},
		{"malformed", 429, "soon", interval, `HTTP 429 Too Many Requests; Retry-After "soon" is neither delta-seconds nor an HTTP date: ignored`, "retrying"},
		{"exponent", 429, "1e12", interval, `Retry-After "1e12" is neither delta-seconds nor an HTTP date: ignored`, "retrying"},
		{"negative", 429, "-5", interval, `Retry-After "-5" is neither`, "retrying"},
		{"huge value capped", 429, "1000000000000", 10 * time.Minute, "HTTP 429 Too Many Requests; retrying after 2026-12-06T09:10:00Z (Retry-After 1000000000000 s, capped at 10m0s)", ""},
		{"beyond uint64 capped", 429, "99999999999999999999999999", 10 * time.Minute, "retrying after 2026-12-06T09:10:00Z (Retry-After 99999999999999999999999999 s, capped at 10m0s)", ""},
		{"date in 2100 capped", 429, "Fri, 01 Jan 2100 00:00:00 GMT", 10 * time.Minute, "retrying after 2026-12-06T09:10:00Z (Retry-After Fri, 01 Jan 2100 00:00:00 GMT, capped at 10m0s)", ""},
		{"503 with Retry-After", 503, "45", 45 * time.Second, "HTTP 503 Service Unavailable; retrying after 2026-12-06T09:00:45Z (Retry-After)", ""},
		{"503 without", 503, "", interval, "HTTP 503 Service Unavailable", "retrying"},
		{"429 without", 429, "", interval, "HTTP 429 Too Many Requests", "retrying"},
		{"500 with Retry-After", 500, "120", interval, "HTTP 500 Internal Server Error", "retrying"},
		{"200 with Retry-After", 200, "120", interval, "", ""},
		{"200 without", 200, "", interval, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			srvState, srv := newOnceServer(t, clock, tc.status, tc.retryAfter)
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			p.Set([]Spec{{Name: "a", Key: "a", Source: src, Window: 5 * time.Minute}}, interval)
			p.Refresh(context.Background())
			check := func(when string) {
				t.Helper()
				st, _ := p.Status("a")
				if tc.wantErr == "" {
					if !st.SourceUp || st.LastError != "" {
						t.Errorf("%s: up %v, error %q; want up", when, st.SourceUp, st.LastError)
					}
					return
				}
				if st.SourceUp || st.ScrapeErrorsTotal != 1 || !strings.Contains(st.LastError, tc.wantErr) ||
					(tc.notErr != "" && strings.Contains(st.LastError, tc.notErr)) {
					t.Errorf("%s: up %v, errors %d, error %q; want down, 1 error, %q", when, st.SourceUp, st.ScrapeErrorsTotal, st.LastError, tc.wantErr)
				}
			}
			check("after the first scrape")
			for clock.Now().Sub(t0) < tc.next {
				clock.Advance(interval)
				p.Refresh(context.Background())
				at := clock.Now().Sub(t0)
				switch n := srvState.count(); {
				case at < tc.next && n != 1:
					t.Fatalf("scraped again at +%v, before +%v", at, tc.next)
				case at < tc.next:
					check("at +" + at.String())
				case n != 2:
					t.Fatalf("%d scrapes by +%v, want the second then", n, at)
				}
			}
			if st, _ := p.Status("a"); !st.SourceUp || st.LastError != "" {
				t.Errorf("after the wait: up %v, error %q; want up", st.SourceUp, st.LastError)
			}
		})
	}
}

// TestRetryAfterKeepsStaleHandling: while a source waits out its
// Retry-After, its figures age as those of a source whose scrapes fail:
// the window drains at the same times, the counters stay.
func TestRetryAfterKeepsStaleHandling(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	const interval = 15 * time.Second
	clock := gpu.NewManualClock(t0)
	var mu sync.Mutex
	count, phase := 0, 0 // phase 0: answers; 1: refuses
	handler := func(status int, retryAfter string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if phase == 1 {
				if retryAfter != "" {
					w.Header().Set("Retry-After", retryAfter)
				}
				w.WriteHeader(status)
				return
			}
			_, _ = w.Write([]byte(vllmText(strconv.Itoa(count))))
		}
	}
	backoff := httptest.NewServer(handler(http.StatusTooManyRequests, "600"))
	defer backoff.Close()
	failing := httptest.NewServer(handler(http.StatusInternalServerError, ""))
	defer failing.Close()
	pools := map[string]*Pool{}
	for name, srv := range map[string]*httptest.Server{"backoff": backoff, "failing": failing} {
		p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
		p.Set([]Spec{{Name: "a", Key: "a", Source: &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
			Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute}}, interval)
		pools[name] = p
	}
	refresh := func() {
		for _, p := range pools {
			p.Refresh(context.Background())
		}
	}
	for i := 0; i < 5; i++ {
		mu.Lock()
		count += 10
		mu.Unlock()
		refresh()
		clock.Advance(interval)
	}
	mu.Lock()
	phase = 1
	mu.Unlock()
	for i := 0; i < 8; i++ {
		refresh()
		b, _ := pools["backoff"].Status("a")
		f, _ := pools["failing"].Status("a")
		if b.SourceUp || b.RequestsTotal != f.RequestsTotal || b.WindowRequests != f.WindowRequests ||
			len(b.Quantiles) != len(f.Quantiles) || (b.Attainment == nil) != (f.Attainment == nil) {
			t.Errorf("at +%v: backing off %+v, failing %+v", clock.Now().Sub(t0), b, f)
		}
		clock.Advance(interval)
	}
	if b, _ := pools["backoff"].Status("a"); b.WindowRequests != 0 || b.ScrapeErrorsTotal != 1 {
		t.Errorf("after two minutes of waiting: %+v; want the window drained, one failed scrape", b)
	}
}

// TestRetryAfterSurvivesReload: a reload that starts a source's tracker
// anew (its quantile, target or window changed its Key, or the tenant was
// renamed) keeps the wait its URL's Retry-After asked for, and the error
// that says so: its source is down, not read yet; a tracker of another URL
// is read at once.
func TestRetryAfterSurvivesReload(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	const interval = 15 * time.Second
	tests := []struct {
		name     string
		spec     func(src *Source) Spec
		next     time.Duration // when, after t0, the second scrape comes
		wantWait bool          // the new tracker says it waits
	}{
		{"same Key", func(src *Source) Spec {
			return Spec{Name: "a", Key: "a", Source: src, Window: 5 * time.Minute}
		}, 120 * time.Second, true},
		{"new Key, same URL", func(src *Source) Spec {
			return Spec{Name: "a", Key: "a2", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute}
		}, 120 * time.Second, true},
		{"renamed, same URL", func(src *Source) Spec {
			return Spec{Name: "b", Key: "b", Source: src, Window: 5 * time.Minute}
		}, 120 * time.Second, true},
		{"new Key, another URL", func(src *Source) Spec {
			other := *src
			other.URL += "?other"
			return Spec{Name: "a", Key: "a2", Source: &other, Window: 5 * time.Minute}
		}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			srvState, srv := newOnceServer(t, clock, http.StatusTooManyRequests, "120")
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			src := &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			p.Set([]Spec{{Name: "a", Key: "a", Source: src, Window: 5 * time.Minute}}, interval)
			p.Refresh(context.Background())
			clock.Advance(5 * time.Second)
			sp := tc.spec(src)
			p.Set([]Spec{sp}, interval)
			for {
				p.Refresh(context.Background())
				at := clock.Now().Sub(t0)
				n := srvState.count()
				if at < tc.next {
					if n != 1 {
						t.Fatalf("scraped again at +%v, before +%v", at, tc.next)
					}
					st, _ := p.Status(sp.Name)
					if tc.wantWait && (st.SourceUp || !st.SourceRead || !strings.Contains(st.LastError, "retrying after 2026-12-06T09:02:00Z (Retry-After)")) {
						t.Errorf("at +%v: up %v, read %v, error %q; want down (read), waiting", at, st.SourceUp, st.SourceRead, st.LastError)
					}
				} else {
					if n != 2 {
						t.Fatalf("%d scrapes by +%v, want the second then", n, at)
					}
					break
				}
				clock.Advance(interval)
			}
			if st, _ := p.Status(sp.Name); !st.SourceUp || st.LastError != "" {
				t.Errorf("after the wait: up %v, error %q; want up", st.SourceUp, st.LastError)
			}
		})
	}
}

// TestRetryAfterFromAnswer: a Retry-After wait runs from when the answer
// came, not from when the scrape began: a slow source is not read again
// before the time it asked for, however long it took to say so.
func TestRetryAfterFromAnswer(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	const interval = 15 * time.Second
	tests := []struct {
		name       string
		retryAfter string
		slow       time.Duration // how long the refusal took
		next       time.Duration // when, after t0, the second scrape comes
		wantErr    string
	}{
		{"delta-seconds", "10", 8 * time.Second, 30 * time.Second, "retrying after 2026-12-06T09:00:18Z (Retry-After)"},
		{"delta-seconds, fast", "10", 0, 15 * time.Second, "retrying after 2026-12-06T09:00:10Z (Retry-After)"},
		{"HTTP-date", "Sun, 06 Dec 2026 09:00:20 GMT", 8 * time.Second, 30 * time.Second, "retrying after 2026-12-06T09:00:20Z (Retry-After)"},
		{"capped", "100000", 8 * time.Second, 10*time.Minute + 15*time.Second, "retrying after 2026-12-06T09:10:08Z (Retry-After 100000 s, capped at 10m0s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			var mu sync.Mutex
			hits := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				first := hits == 1
				mu.Unlock()
				if first {
					clock.Advance(tc.slow)
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = w.Write([]byte(vllmText("5")))
			}))
			defer srv.Close()
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Minute, MaxBytes: 1 << 20}
			p.Set([]Spec{{Name: "a", Key: "a", Source: src, Window: 5 * time.Minute}}, interval)
			p.Refresh(context.Background())
			if st, _ := p.Status("a"); !strings.Contains(st.LastError, tc.wantErr) {
				t.Errorf("error %q, want %q", st.LastError, tc.wantErr)
			}
			for at := interval; ; at += interval {
				clock.Set(t0.Add(at))
				p.Refresh(context.Background())
				mu.Lock()
				n := hits
				mu.Unlock()
				if at < tc.next && n != 1 {
					t.Fatalf("scraped again at +%v, before +%v", at, tc.next)
				}
				if at >= tc.next {
					if n != 2 {
						t.Fatalf("%d scrapes by +%v, want the second then", n, at)
					}
					break
				}
			}
		})
	}
}

// stepClock is a Clock that a test may set back; its timers never fire.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(time.Duration) <-chan time.Time { return nil }

func (c *stepClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestRetryAfterClockBack: a clock set back (NTP stepping it, a VM
// resumed) cannot stretch a Retry-After wait past maxRetryAfter from now:
// a wait that would end further on is dropped and the source read.
func TestRetryAfterClockBack(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		retryAfter string
		back       time.Duration
		read       bool // read at once after the step back
	}{
		{"an hour back, 600 s asked", "600", time.Hour, true},
		{"30 s back, 600 s asked", "600", 30 * time.Second, true},
		{"30 s back, 120 s asked", "120", 30 * time.Second, false},
		{"not back, 600 s asked", "600", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{now: t0}
			srvState, srv := newOnceServer(t, clock, http.StatusTooManyRequests, tc.retryAfter)
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			p.Set([]Spec{{Name: "a", Key: "a", Source: src, Window: 5 * time.Minute}}, 15*time.Second)
			p.Refresh(context.Background())
			clock.set(t0.Add(-tc.back))
			p.Refresh(context.Background())
			if n := srvState.count(); (n == 2) != tc.read {
				t.Fatalf("%d scrapes after the clock went back %v; want read again %v", n, tc.back, tc.read)
			}
			st, _ := p.Status("a")
			if tc.read && (!st.SourceUp || st.LastError != "") {
				t.Errorf("after the read: up %v, error %q; want up", st.SourceUp, st.LastError)
			}
			if !tc.read && (st.SourceUp || !strings.Contains(st.LastError, "retrying after")) {
				t.Errorf("while waiting: up %v, error %q; want down, waiting", st.SourceUp, st.LastError)
			}
		})
	}
}

// TestRetryAfterOfAnotherTenantReadsDown: two tenants read one URL (told
// apart by their matchers); a's read answered, b's later one was a 429
// with Retry-After. A reload that restarts a's tracker at that URL takes
// the URL's wait (not read before it) and with it the source as down:
// source_up 0 with the 429's error, not a's last read's 1 carried over
// while nothing is read.
func TestRetryAfterOfAnotherTenantReadsDown(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := gpu.NewManualClock(t0)
	page := "# TYPE vllm:e2e_request_latency_seconds histogram\n"
	for _, m := range []string{"a", "b"} {
		page += `vllm:e2e_request_latency_seconds_bucket{model_name="` + m + `",le="0.1"} 5
vllm:e2e_request_latency_seconds_bucket{model_name="` + m + `",le="+Inf"} 5
vllm:e2e_request_latency_seconds_sum{model_name="` + m + `"} 1
vllm:e2e_request_latency_seconds_count{model_name="` + m + `"} 5
`
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) == 1 {
			_, _ = w.Write([]byte(page))
			return
		}
		w.Header().Set("Retry-After", "300")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
	src := func(model string) *Source {
		return &Source{URL: srv.URL + "/metrics", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20, Matchers: map[string]string{"model_name": model}}
	}
	a := Spec{Name: "a", Key: "a", Source: src("a"), Window: time.Minute}
	b := Spec{Name: "b", Key: "b", Source: src("b"), Window: time.Minute}
	p.Set([]Spec{a}, 15*time.Second)
	p.Refresh(context.Background()) // a's read: answered
	if st, _ := p.Status("a"); !st.SourceUp {
		t.Fatalf("a's first read: up %v (%q), want up", st.SourceUp, st.LastError)
	}
	clock.Advance(5 * time.Second)
	p.Set([]Spec{a, b}, 15*time.Second)
	p.mu.Lock()
	trb := p.trackers["b"]
	p.mu.Unlock()
	p.scrape(context.Background(), trb, clock.Now()) // b's read alone: 429, Retry-After 300
	if st, _ := p.Status("b"); st.SourceUp || !strings.Contains(st.LastError, "429") {
		t.Fatalf("b's read: up %v (%q), want down with the 429", st.SourceUp, st.LastError)
	}
	clock.Advance(5 * time.Second)
	a.Key = "a2" // a's SLO changed: a new tracker at the same URL
	p.Set([]Spec{a, b}, 15*time.Second)
	for range 4 {
		p.Refresh(context.Background())
		st, _ := p.Status("a")
		if st.SourceUp || !st.SourceRead || !strings.Contains(st.LastError, "Retry-After") {
			t.Errorf("+%v: a up %v, read %v, error %q; want down (read), waiting out the URL's Retry-After", clock.Now().Sub(t0), st.SourceUp, st.SourceRead, st.LastError)
		}
		clock.Advance(15 * time.Second)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("%d reads of the URL, want 2: none during its wait", n)
	}
}
