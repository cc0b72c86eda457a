package exposition

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// namedCollector serves vgpu_fake_ratio{collector=<name>} for each name.
type namedCollector []string

func (c namedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c namedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c {
		ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, n)
	}
}

func TestMetrics(t *testing.T) {
	cached := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("cached\n")) })
	newCollector := func(filters ...string) (prometheus.Collector, error) {
		for _, f := range filters {
			if f == "bogus" {
				return nil, errors.New(`unknown collector "bogus"`)
			}
		}
		return namedCollector(filters), nil
	}
	self := prometheus.NewRegistry()
	self.MustRegister(collectors.NewBuildInfoCollector())
	for _, tc := range []struct {
		name   string
		target string
		self   prometheus.Gatherer
		code   int
		has    []string
		hasNot []string
	}{
		{"no filter: the cache", "/metrics", self, 200, []string{"cached"}, []string{"vgpu_fake_ratio"}},
		{"collect[]", "/metrics?collect[]=gpu&collect[]=tenant", self, 200,
			[]string{`vgpu_fake_ratio{collector="gpu"} 1`, `vgpu_fake_ratio{collector="tenant"} 1`, "go_build_info"}, []string{"cached"}},
		{"collect[] without the exporter's own", "/metrics?collect[]=gpu", nil, 200, []string{`vgpu_fake_ratio{collector="gpu"} 1`}, []string{"go_build_info"}},
		{"name[] alone: rendered", "/metrics?name[]=vgpu_fake_ratio", nil, 200, nil, []string{"cached"}},
		{"a bad collector", "/metrics?collect[]=bogus", self, 400, []string{`unknown collector "bogus"`}, nil},
		// a query that cannot be read is refused, not served whole as if
		// it asked for no filter
		{"a semicolon", "/metrics?collect[]=gpu;collect[]=tenant", self, 400, []string{"malformed query", "semicolon"}, []string{"cached"}},
		{"a bad escape", "/metrics?collect[]=%zz", self, 400, []string{"malformed query", "escape"}, []string{"cached"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Metrics(cached, newCollector, tc.self, nil).ServeHTTP(rec, httptest.NewRequest("GET", tc.target, nil))
			body := rec.Body.String()
			if rec.Code != tc.code {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.code, body)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("body has %q:\n%s", s, body)
				}
			}
		})
	}
}

// Bad requests are logged, but a client repeating them cannot flood the
// log: the first at once, then a bounded number of lines, each of bounded
// size however long the collect[] values it sent.
func TestMetricsBadRequestLogBounded(t *testing.T) {
	var logged bytes.Buffer
	newCollector := func(filters ...string) (prometheus.Collector, error) {
		return nil, fmt.Errorf("unknown collector %q", filters[0])
	}
	h := Metrics(http.NotFoundHandler(), newCollector, nil, log.NewLogfmtLogger(&logged))
	long := strings.Repeat("x", 30<<10)
	const requests = 100
	for range requests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics?collect[]=bogus"+long+"&collect[]=gpu", nil))
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", rec.Code)
		}
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) > 2 || !strings.Contains(lines[0], "bad metrics request") || !strings.Contains(lines[0], "bogusxxx") {
		t.Errorf("%d log lines for %d bad requests (%d bytes), want the first and at most one more", len(lines), requests, logged.Len())
	}
	for _, l := range lines {
		if len(l) > 2048 {
			t.Errorf("a log line of %d bytes for a request of %d", len(l), len(long))
			break
		}
	}
}

// What promhttp logs on a filtered scrape reads as it wrote it, and a
// client repeating what makes it log (an Accept-Encoding that refuses
// every encoding, identity;q=0) cannot flood the log: the first at once,
// then a bounded number of lines.
func TestFilteredErrorLogBounded(t *testing.T) {
	var logged bytes.Buffer
	newCollector := func(filters ...string) (prometheus.Collector, error) { return namedCollector(filters), nil }
	h := Metrics(http.NotFoundHandler(), newCollector, nil, log.NewLogfmtLogger(&logged))
	const requests = 100
	for range requests {
		req := httptest.NewRequest("GET", "/metrics?collect[]=gpu", nil)
		req.Header.Set("Accept-Encoding", "identity;q=0")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `vgpu_fake_ratio{collector="gpu"} 1`) {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) > 2 || !strings.Contains(lines[0], "error getting writer content compression format not recognized") {
		t.Errorf("%d log lines for %d requests, want the first, as promhttp wrote it, and at most one more; the first: %s", len(lines), requests, lines[0])
	}
}

// hungUp is a ResponseWriter whose client hung up: every write fails as
// a write to a closed socket does.
type hungUp struct{ *httptest.ResponseRecorder }

func (hungUp) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
}

// failing serves its metric, and then one that cannot be collected.
type failing struct{ namedCollector }

func (c failing) Collect(ch chan<- prometheus.Metric) {
	c.namedCollector.Collect(ch)
	ch <- prometheus.NewInvalidMetric(fakeDesc, errors.New("the backend failed"))
}

// TestFilteredClientGone: a client that hangs up mid-scrape (a broken
// pipe) is its own doing, not the exporter's: logged at debug level, not
// error, with or without compression; a collector's error stays an error,
// a client gone or not.
func TestFilteredClientGone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hungUp      bool
		gzip        bool
		collector   prometheus.Collector
		debug, errs []string // what lines at each level hold; nil: no line
	}{
		{"hung up", true, false, namedCollector{"gpu"}, []string{"broken pipe"}, nil},
		{"hung up, gzip", true, true, namedCollector{"gpu"}, []string{"broken pipe"}, nil},
		{"a collector's error", false, false, failing{namedCollector{"gpu"}}, nil, []string{"the backend failed"}},
		{"a collector's error, hung up", true, true, failing{namedCollector{"gpu"}}, []string{"broken pipe"}, []string{"the backend failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			newCollector := func(...string) (prometheus.Collector, error) { return tc.collector, nil }
			h := Metrics(http.NotFoundHandler(), newCollector, nil, log.NewLogfmtLogger(&logged))
			req := httptest.NewRequest("GET", "/metrics?collect[]=gpu", nil)
			if tc.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			var w http.ResponseWriter = httptest.NewRecorder()
			if tc.hungUp {
				w = hungUp{httptest.NewRecorder()}
			}
			h.ServeHTTP(w, req)
			got := map[string][]string{}
			for _, l := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
				for _, lv := range []string{"debug", "error"} {
					if strings.Contains(l, "level="+lv) {
						got[lv] = append(got[lv], l)
					}
				}
			}
			for lv, want := range map[string][]string{"debug": tc.debug, "error": tc.errs} {
				if len(got[lv]) != len(want) {
					t.Errorf("%d lines at %s level, want %d:\n%s", len(got[lv]), lv, len(want), logged.String())
					continue
				}
				for i, w := range want {
					if !strings.Contains(got[lv][i], w) {
						t.Errorf("%s line %q lacks %q", lv, got[lv][i], w)
					}
				}
			}
		})
	}
}

// gated serves its metrics once open is closed, having closed started.
type gated struct {
	namedCollector
	started, open chan struct{}
}

func (c gated) Collect(ch chan<- prometheus.Metric) {
	close(c.started)
	<-c.open
	c.namedCollector.Collect(ch)
}

// TestFilteredClientGoneOverTCP: a scraper that hangs up (a reset, as a
// scrape timeout gives) while the exporter gathers a large filtered
// answer is logged at debug level, not error, over a real connection.
func TestFilteredClientGoneOverTCP(t *testing.T) {
	var logged bytes.Buffer
	c := gated{make(namedCollector, 20000), make(chan struct{}), make(chan struct{})}
	for i := range c.namedCollector {
		c.namedCollector[i] = fmt.Sprintf("collector-%d", i)
	}
	newCollector := func(...string) (prometheus.Collector, error) { return c, nil }
	srv := httptest.NewServer(Metrics(http.NotFoundHandler(), newCollector, nil, log.NewLogfmtLogger(log.NewSyncWriter(&logged))))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /metrics?collect[]=gpu HTTP/1.1\r\nHost: x\r\n\r\n")
	<-c.started
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	close(c.open)
	srv.Close() // waits for the handler
	if s := logged.String(); strings.Contains(s, "level=error") || !strings.Contains(s, "level=debug") {
		t.Errorf("want one debug line and no error:\n%s", s)
	}
}
