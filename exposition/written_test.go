package exposition

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// Clients that read nothing hold no slot of --web.max-requests: a
// response is rendered within its slot and written outside it, so that a
// scrape coming while as many clients as the limit stall on their
// responses, cached or filtered, is served; where the slot was held
// through the writing, the scrape got 503 for as long as they stalled (a
// minute each, for ever when renewed). A filtered response rendered for
// its request alone is written outside its slot only within the bytes
// allowed those (maxOutsideBytes), so that stalled clients hold a
// bounded memory: past them, it holds its slot as before.
func TestStalledClientsHoldNoSlot(t *testing.T) {
	for _, tc := range []struct {
		name         string
		targets      []string
		outsideBytes int64
		want         int
	}{
		{"cached and filtered", []string{"/metrics", "/metrics?collect[]=gpu"}, maxOutsideBytes, http.StatusOK},
		{"filtered past the bytes allowed", []string{"/metrics?collect[]=gpu", "/metrics?collect[]=gpu"}, 0, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			newCollector := func(...string) (prometheus.Collector, error) { return namedCollector{"gpu"}, nil }
			h := httplimit.InFlight(2, "metrics", log.NewNopLogger(),
				metrics(f.c, newCollector, nil, log.NewNopLogger(), time.Now, httplimit.NewBudget(tc.outsideBytes)))
			writing, unblock := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			for _, target := range tc.targets {
				wg.Go(func() {
					h.ServeHTTP(testutil.NewStalledClient(writing, unblock), httptest.NewRequest("GET", target, nil))
				})
			}
			<-writing
			<-writing
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			close(unblock)
			wg.Wait()
			if rec.Code != tc.want {
				t.Errorf("a scrape while two clients stall under a limit of 2: %d, want %d", rec.Code, tc.want)
			}
			if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "vgpu_fake_ratio") {
				t.Errorf("the scrape's body lacks the metrics:\n%.300s", rec.Body.String())
			}
		})
	}
}

// stallingClient takes take bytes on the clock, then nothing: its write
// fails at the write deadline in force, the clock then at it (or, hungUp,
// at once with a broken pipe). It records the deadlines set.
type stallingClient struct {
	header    http.Header
	clock     *time.Time
	take      int
	hungUp    bool
	deadline  time.Time
	deadlines []time.Time
	body      bytes.Buffer
}

func (c *stallingClient) Header() http.Header { return c.header }
func (c *stallingClient) WriteHeader(int)     {}

func (c *stallingClient) SetWriteDeadline(t time.Time) error {
	c.deadline, c.deadlines = t, append(c.deadlines, t)
	return nil
}

func (c *stallingClient) Write(p []byte) (int, error) {
	n := min(len(p), c.take-c.body.Len())
	c.body.Write(p[:n])
	if n == len(p) {
		return n, nil
	}
	if c.hungUp {
		return n, hungUp{}.fail()
	}
	*c.clock = c.deadline
	return n, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// A metrics response, cached or filtered, is written with a deadline
// httplimit.StallTimeout past the clock before each piece, in place of
// the server's minute for the whole; one cut there is logged at warn
// level with the client's address, the path (clipped: a query of 60 KB is
// no line of 60 KB), the bytes written and the response's size, at most
// one line per badRequestLogEvery, counting those held back. Cut writes
// went unlogged. A client that hung up is logged at debug level only.
func TestStalledResponseCutAndLogged(t *testing.T) {
	long := "/metrics?collect[]=gpu&pad=" + strings.Repeat("x", 60<<10)
	for _, tc := range []struct {
		name, target string
		hungUp       bool
	}{
		{"cached", "/metrics", false},
		{"filtered, a long query", long, false},
		{"cached, hung up", "/metrics", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			clock := start
			now := func() time.Time { return clock }
			var logs bytes.Buffer
			logger := log.NewLogfmtLogger(&logs)
			f := newFixture(t, false)
			f.c.o.Now, f.c.cut = now, newWriteLog(logger)
			newCollector := func(...string) (prometheus.Collector, error) { return namedCollector{"gpu"}, nil }
			h := metrics(f.c, newCollector, nil, logger, now, httplimit.NewBudget(maxOutsideBytes))
			for i, at := range []time.Duration{0, time.Second, 2 * time.Second, badRequestLogEvery + 2*time.Second} {
				clock = start.Add(at)
				c := &stallingClient{header: http.Header{}, clock: &clock, take: 100, hungUp: tc.hungUp}
				begun := clock
				h.ServeHTTP(c, httptest.NewRequest("GET", tc.target, nil))
				if i == 0 && (len(c.deadlines) == 0 || !c.deadlines[0].Equal(begun.Add(httplimit.StallTimeout))) {
					t.Errorf("write deadlines %v, want %v", c.deadlines, begun.Add(httplimit.StallTimeout))
				}
				if c.body.Len() != 100 {
					t.Errorf("%d bytes taken, want 100", c.body.Len())
				}
			}
			s := logs.String()
			if tc.hungUp {
				if strings.Contains(s, "level=warn") || strings.Count(s, "level=debug") != 2 || !strings.Contains(s, "broken pipe") {
					t.Errorf("a client gone: want debug lines only, two in 12 s:\n%s", s)
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(s), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], " cut=3 ") {
				t.Fatalf("%d lines for 4 responses cut in 12 s, want 2, the second counting 3:\n%.600s", len(lines), s)
			}
			for _, want := range []string{`level=warn msg="metrics response cut short: the client read nothing for 10s"`,
				" remote=192.0.2.1:1234 ", " written_bytes=100 ", " total_bytes="} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("the warning lacks %q:\n%.2000s", want, lines[0])
				}
			}
			if len(lines[0]) > 1000 || tc.target == long && !strings.Contains(lines[0], "more bytes)") {
				t.Errorf("the warning is %d bytes, the path unclipped:\n%.600s", len(lines[0]), lines[0])
			}
		})
	}
}

// fail is the error a write to a closed socket returns.
func (hungUp) fail() error {
	_, err := hungUp{}.Write(nil)
	return err
}
