package webui

import (
	"bytes"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// stallClient is a response read by a client on the page's clock: it
// reads rate bytes a second up to stopAfter bytes, then nothing. A write
// it cannot take by the write deadline in force fails there, the clock at
// the deadline, with the connection's timeout (or, h2, with the stream
// closed, as HTTP/2 says it); hangUp fails the write past stopAfter at
// once, a client gone. It records the deadlines set and the writes.
type stallClient struct {
	header    http.Header
	clock     *time.Time
	rate      float64 // bytes a second
	stopAfter int
	h2        bool
	hangUp    bool

	body        bytes.Buffer
	deadline    time.Time
	deadlines   int
	writes      []stallWrite
	failed      bool
	writesSince int
}

// stallWrite is a write asked of a stallClient: its size, and the
// deadline in force against the clock at its start.
type stallWrite struct {
	size            int
	start, deadline time.Time
}

func newStallClient(clock *time.Time, rate float64, stopAfter int) *stallClient {
	return &stallClient{header: http.Header{}, clock: clock, rate: rate, stopAfter: stopAfter}
}

func (c *stallClient) Header() http.Header { return c.header }
func (c *stallClient) WriteHeader(int)     {}

func (c *stallClient) SetWriteDeadline(t time.Time) error {
	c.deadline, c.deadlines = t, c.deadlines+1
	return nil
}

var errStreamClosed = errors.New("http2: stream closed")

func (c *stallClient) Write(b []byte) (int, error) {
	if c.failed {
		c.writesSince++
		return 0, errClientGone
	}
	c.writes = append(c.writes, stallWrite{size: len(b), start: *c.clock, deadline: c.deadline})
	n := min(len(b), max(c.stopAfter-c.body.Len(), 0))
	if c.hangUp && n < len(b) {
		c.body.Write(b[:n])
		c.failed = true
		return n, errClientGone
	}
	if took := time.Duration(float64(n) / c.rate * float64(time.Second)); n == len(b) && !c.clock.Add(took).After(c.deadline) {
		*c.clock = c.clock.Add(took)
		c.body.Write(b)
		return n, nil
	}
	// Not taken by the deadline: what the client read by then, then the
	// timeout.
	n = min(n, int(c.deadline.Sub(*c.clock).Seconds()*c.rate))
	c.body.Write(b[:n])
	*c.clock = c.deadline
	c.failed = true
	if c.h2 {
		return n, errStreamClosed
	}
	return n, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// stallPage is the tuner page of 100 tenants with a full history on the
// clock clock, logging to logs.
func stallPage(clock *time.Time, logs *bytes.Buffer) tunerPage {
	snap, st := fullHistory(100)
	p := NewTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, simInfo, log.NewLogfmtLogger(logs)).(tunerPage)
	p.now = func() time.Time { return *clock }
	return p
}

// The write deadline bounds a stall, not the whole transfer: a client
// that reads steadily, however slowly (here 3.6 KB/s, the HTML of 100
// tenants taking minutes), gets the whole page, HTML or JSON, each write
// at most httplimit.StallPiece under a deadline TunerPageWriteTimeout past its
// start; the HTML says its length, so that a browser tells a body cut
// short from a whole one. A deadline for the whole response cut every
// client too slow to read it all in TunerPageWriteTimeout.
func TestTunerPageSlowReaderGetsWholePage(t *testing.T) {
	for _, target := range []string{"/tuner", "/tuner?format=json"} {
		clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var logs bytes.Buffer
		p := stallPage(&clock, &logs)
		p.maxTransfer = time.Hour // the JSON takes 13 minutes at 3.6 KB/s: the stall's bound alone
		want := httptest.NewRecorder()
		p.ServeHTTP(want, httptest.NewRequest("GET", target, nil))
		start := clock
		c := newStallClient(&clock, httplimit.StallPiece/9, 1<<40)
		p.ServeHTTP(c, httptest.NewRequest("GET", target, nil))
		if c.failed || !bytes.Equal(c.body.Bytes(), want.Body.Bytes()) {
			t.Errorf("%s: a client reading 3.6 KB/s got %d bytes of %d (cut: %v) after %v", target, c.body.Len(), want.Body.Len(), c.failed, clock.Sub(start))
		}
		if clock.Sub(start) < 2*TunerPageWriteTimeout {
			t.Errorf("%s: the page took the slow client %v: the test proves nothing", target, clock.Sub(start))
		}
		for i, w := range c.writes {
			if w.size > httplimit.StallPiece || !w.deadline.Equal(w.start.Add(TunerPageWriteTimeout)) {
				t.Errorf("%s: write %d of %d bytes at %v under a deadline %v past it; want at most %d bytes, %v", target, i, w.size, w.start.Sub(start), w.deadline.Sub(w.start), httplimit.StallPiece, TunerPageWriteTimeout)
				break
			}
		}
		if got := c.header.Get("Content-Length"); target == "/tuner" && got != strconv.Itoa(want.Body.Len()) {
			t.Errorf("%s: Content-Length %q, want %d", target, got, want.Body.Len())
		}
		if strings.Contains(logs.String(), "level=warn") {
			t.Errorf("%s: warned of a whole page:\n%s", target, logs.String())
		}
	}
}

// A client that stops reading frees its slot within TunerPageWriteTimeout
// of its last read, and the page writes nothing more. Cut at its deadline
// (the connection's timeout, or HTTP/2's stream closed once the deadline
// has passed), the response is logged at warn level with the bytes
// written and the response's size, where a debug line, the same as a
// client's hanging up, was all; a client that hung up is still logged at
// debug level only.
func TestTunerPageStalledClientCut(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		h2, hangUp   bool
		warn         string
	}{
		{"HTML, HTTP/1", "/tuner", false, false, "total_bytes="},
		{"JSON, HTTP/1", "/tuner?format=json", false, false, "history_series=200"},
		{"HTML, HTTP/2", "/tuner", true, false, `err="http2: stream closed"`},
		{"JSON, HTTP/2", "/tuner?format=json", true, false, "history_series=200"},
		{"HTML, hung up", "/tuner", false, true, ""},
		{"JSON, hung up", "/tuner?format=json", false, true, ""},
	} {
		clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var logs bytes.Buffer
		p := stallPage(&clock, &logs)
		const read = 100 << 10
		c := newStallClient(&clock, 1<<20, read)
		c.h2, c.hangUp = tc.h2, tc.hangUp
		p.ServeHTTP(c, httptest.NewRequest("GET", tc.target, nil))
		last := c.writes[len(c.writes)-1]
		if !c.failed || c.writesSince != 0 || c.body.Len() != read {
			t.Errorf("%s: failed %v, %d writes after the failed one, %d bytes read; want a failure, none after, %d", tc.name, c.failed, c.writesSince, c.body.Len(), read)
		}
		if !tc.hangUp && (!clock.Equal(last.deadline) || last.deadline.Sub(last.start) != TunerPageWriteTimeout) {
			t.Errorf("%s: the stalled write started at %v, failed %v after", tc.name, last.start, clock.Sub(last.start))
		}
		line := `level=warn msg="tuner page response cut short: the client read nothing for 10s"`
		switch warned := strings.Contains(logs.String(), line) && strings.Contains(logs.String(), " remote=192.0.2.1:1234 written_bytes="+strconv.Itoa(read)+" ") &&
			strings.Contains(logs.String(), tc.warn); {
		case tc.hangUp && (strings.Contains(logs.String(), "level=warn") || !strings.Contains(logs.String(), "level=debug")):
			t.Errorf("%s: a client gone is logged at debug level only:\n%s", tc.name, logs.String())
		case !tc.hangUp && !warned:
			t.Errorf("%s: the log lacks\n%s ... written_bytes=%d ... %s\nin\n%s", tc.name, line, read, tc.warn, logs.String())
		}
	}
}

// The warnings of responses cut at their deadline are rate-limited: one
// line per pageCutLogEvery, counting those held back.
func TestTunerPageCutWarningRateLimited(t *testing.T) {
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	p := stallPage(&clock, &logs)
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second, pageCutLogEvery + 2*time.Second} {
		clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(at)
		p.ServeHTTP(newStallClient(&clock, 1<<20, 1<<10), httptest.NewRequest("GET", "/tuner", nil))
	}
	if n := strings.Count(logs.String(), "level=warn"); n != 2 || !strings.Contains(logs.String(), " cut=3 ") {
		t.Errorf("%d warnings for 4 responses cut in 12 s, want 2, the second counting 3:\n%s", n, logs.String())
	}
}

// The lines of clients that hung up are bounded as those of responses
// cut: one debug line per pageCutLogEvery, with the path and the client's
// address, counting those not logged, where every hang-up wrote one.
func TestTunerPageGoneClientLogBounded(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := start
	var logs bytes.Buffer
	p := stallPage(&clock, &logs)
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second, pageCutLogEvery + 2*time.Second} {
		clock = start.Add(at)
		c := newStallClient(&clock, 1<<20, 1<<10)
		c.hangUp = true
		p.ServeHTTP(c, httptest.NewRequest("GET", "/tuner", nil))
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || strings.Contains(logs.String(), "level=warn") || !strings.Contains(lines[1], " not_logged=2 ") {
		t.Fatalf("%d lines for 4 clients gone in 12 s, want 2 at debug level, the second not logging 2:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{"level=debug", " path=/tuner ", " remote=192.0.2.1:1234 ", " written_bytes=1024 ", " total_bytes="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %q:\n%s", want, lines[0])
		}
	}
}

// The warning of a history with values that are no number names the
// first pageNullsNamed series and counts the rest, where it named every
// one (up to two for each tenant), and is rate-limited: one line per
// pageNullsLogEvery, counting the requests held back, where every JSON
// request wrote one.
func TestTunerPageNullsWarningBounded(t *testing.T) {
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	snap, st := fullHistory(100)
	for k := range st.History[7].Values {
		st.History[7].Values[k] = math.NaN()
	}
	for k := range st.History[7].Burn {
		st.History[7].Burn[k] = math.Inf(1)
	}
	var logs bytes.Buffer
	p := NewTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, simInfo, log.NewLogfmtLogger(&logs)).(tunerPage)
	p.now = func() time.Time { return clock }
	for _, at := range []time.Duration{0, time.Second, 30 * time.Second, pageNullsLogEvery} {
		clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(at)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest("GET", "/tuner?format=json", nil))
		if rec.Code != 200 {
			t.Fatalf("at %v: %d", at, rec.Code)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], " requests=3") {
		t.Errorf("%d warnings for 4 requests in a minute, want 2, the second counting 3:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if n := strings.Count(l, " of 240, the first "); n != pageNullsNamed || !strings.Contains(l, "; and 190 more") || !strings.Contains(l, " series_count=200 ") {
			t.Errorf("a warning names %d series, want %d, the other 190 counted:\n%s", n, pageNullsNamed, l)
		}
	}
}

// A client that reads just fast enough for each piece's deadline holds
// its slot no longer than the transfer's bound: its response is cut
// there, and said so at warn level, where it held the slot for as long as
// the whole page took (hours for the JSON of 1000 tenants at 3 KB/s).
func TestTunerPageTransferBounded(t *testing.T) {
	for _, target := range []string{"/tuner", "/tuner?format=json"} {
		clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var logs bytes.Buffer
		p := stallPage(&clock, &logs)
		p.maxTransfer = time.Minute
		start := clock
		c := newStallClient(&clock, httplimit.StallPiece/9, 1<<40) // 9 s a piece
		p.ServeHTTP(c, httptest.NewRequest("GET", target, nil))
		if !c.failed || clock.Sub(start) > p.maxTransfer {
			t.Errorf("%s: a client at 3.6 KB/s: cut %v after %v, %d bytes; want cut by %v", target, c.failed, clock.Sub(start), c.body.Len(), p.maxTransfer)
		}
		if !strings.Contains(logs.String(), "level=warn") || !strings.Contains(logs.String(), "took longer than 1m0s") {
			t.Errorf("%s: the cut not said at warn level:\n%s", target, logs.String())
		}
	}
}
