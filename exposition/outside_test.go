package exposition

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// codedStalled is a StalledClient that records its status.
type codedStalled struct {
	*testutil.StalledClient
	code int
}

func (c *codedStalled) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *codedStalled) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.StalledClient.Write(p)
}

// stall serves r through h to a client that reads nothing, and returns
// once its response is being written, with the client (its status known)
// and what waits for its handler to return.
func stall(h http.Handler, r *http.Request, unblock <-chan struct{}, wg *sync.WaitGroup) *codedStalled {
	writing := make(chan struct{})
	c := &codedStalled{StalledClient: testutil.NewStalledClient(writing, unblock)}
	wg.Go(func() { h.ServeHTTP(c, r) })
	<-writing
	return c
}

// A body the Cache renders for one request alone (an encoding past the
// maxCachedFormats it keeps, or every body without Version) is written
// outside the request's slot only within the bytes allowed those
// (maxOutsideBytes), shared with the filtered responses, as a filtered
// one is: past them, it holds its slot. It was written outside its slot
// whatever its size, as if it were the body that all requests share:
// clients that read nothing each held a body of their own and no slot
// (six at once under a limit of 1; over TCP, 29 clients of a 7.4 MB
// body under a limit of 2 took the heap from 116 to 236 MiB).
func TestPrivateBodiesWithinBudget(t *testing.T) {
	var formats []string
	for _, accept := range []string{"text/plain;version=0.0.4", string(expfmt.FmtProtoDelim)} {
		for _, esc := range []string{"underscores", "dots", "values", "allow-utf-8"} {
			formats = append(formats, accept+";escaping="+esc)
		}
	}
	newCollector := func(...string) (prometheus.Collector, error) { return namedCollector{"gpu"}, nil }
	for _, tc := range []struct {
		name      string
		noVersion bool
		gzip      bool // the stalled request's; the cached formats are the other
		target    string
		budget    int64
		want      int
	}{
		{"a format past those cached", false, false, "/metrics", 0, http.StatusServiceUnavailable},
		{"a format past those cached, gzip", false, true, "/metrics", 0, http.StatusServiceUnavailable},
		{"a format past those cached, within the budget", false, false, "/metrics", maxOutsideBytes, http.StatusOK},
		{"without a version", true, false, "/metrics", 0, http.StatusServiceUnavailable},
		{"without a version, gzip", true, true, "/metrics", 0, http.StatusServiceUnavailable},
		{"without a version, within the budget", true, false, "/metrics", maxOutsideBytes, http.StatusOK},
		{"filtered, the cache's budget", false, false, "/metrics?collect[]=gpu", 0, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			if tc.noVersion {
				f.c = New(Options{Collectors: f.gate})
			}
			for _, accept := range formats {
				hdr := map[string]string{"Accept": accept}
				if !tc.gzip {
					hdr["Accept-Encoding"] = "gzip"
				}
				f.served(t, hdr)
			}
			f.c.outside = httplimit.NewBudget(tc.budget)
			h := httplimit.InFlight(1, "metrics", log.NewNopLogger(), f.c.Metrics(newCollector, nil, nil))
			unblock := make(chan struct{})
			var wg sync.WaitGroup
			r := httptest.NewRequest("GET", tc.target, nil)
			r.Header.Set("Accept", "text/plain;version=0.0.4")
			if tc.gzip {
				r.Header.Set("Accept-Encoding", "gzip")
			}
			c := stall(h, r, unblock, &wg)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			close(unblock)
			wg.Wait()
			if c.code != http.StatusOK {
				t.Fatalf("the stalled request: %d", c.code)
			}
			if !tc.noVersion && len(f.c.slots) != maxCachedFormats {
				t.Fatalf("%d encodings cached, want %d", len(f.c.slots), maxCachedFormats)
			}
			if rec.Code != tc.want {
				t.Errorf("a scrape while a body rendered for one request is written to a stalled client, a limit of 1, a budget of %d: %d, want %d",
					tc.budget, rec.Code, tc.want)
			}
		})
	}
}

// A cached body retired while clients that read nothing still write it
// counts against the bytes allowed outside the slots: past them, requests
// hold their slot while they write, so that stalled clients pin the
// bodies of at most so many publications. Each stalled client pinned its
// publication's body outside any slot and any bound: one per publication
// in the minute a transfer may take, times the encodings.
func TestRetiredBodiesWithinBudget(t *testing.T) {
	const limit, publications = 2, 10
	for _, tc := range []struct {
		name     string
		budget   int64
		admitted int // stalled clients served, one per publication
	}{
		// the first written outside its slot, the next two within theirs
		{"past the budget", 0, limit + 1},
		{"within the budget", maxOutsideBytes, publications},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			f.c.outside = httplimit.NewBudget(tc.budget)
			h := httplimit.InFlight(limit, "metrics", log.NewNopLogger(), f.c)
			unblock := make(chan struct{})
			var wg sync.WaitGroup
			admitted := 0
			for range publications {
				f.version.Add(1)
				f.c.Publish()
				if c := stall(h, httptest.NewRequest("GET", "/metrics", nil), unblock, &wg); c.code == http.StatusOK {
					admitted++
				}
			}
			close(unblock)
			wg.Wait()
			if admitted != tc.admitted {
				t.Errorf("stalled clients of %d publications under a limit of %d, a budget of %d: %d served, want %d",
					publications, limit, tc.budget, admitted, tc.admitted)
			}
			// Their writing over, the retired bodies count no more:
			// stalled clients' bodies are written outside their slot
			// again.
			f.version.Add(1)
			f.c.Publish()
			unblock = make(chan struct{})
			for range limit {
				stall(h, httptest.NewRequest("GET", "/metrics", nil), unblock, &wg)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			close(unblock)
			wg.Wait()
			if rec.Code != http.StatusOK {
				t.Errorf("a scrape beside %d stalled clients once the others are done: %d, want 200", limit, rec.Code)
			}
		})
	}
}
