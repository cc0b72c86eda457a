package exposition

import (
	"bytes"
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// Metrics returns the metrics endpoint's handler: a request without
// collect[] or name[] filters is served by cached (the Cache), any other
// by a handler built for it (Filtered) over the collector newCollector
// returns for its collect[] names, with the exporter's own metrics in self
// (nil for none). A collector newCollector refuses (a bad name) is the
// request's fault: HTTP 400, logged as a warning (see badRequestLog).
// What the handlers of filtered requests log is rate-limited as a whole
// (see promLogger). A filtered response is rendered whole within the
// request's slot and written outside it where it fits maxOutsideBytes
// with those being written, through a StallWriter as the cache's (a
// bound of its own: Cache.Metrics shares the cache's). Its writing
// failing is logged as the cache's (newWriteLog).
func Metrics(cached http.Handler, newCollector func(filters ...string) (prometheus.Collector, error), self prometheus.Gatherer, logger log.Logger) http.Handler {
	return metrics(cached, newCollector, self, logger, time.Now, httplimit.NewBudget(maxOutsideBytes))
}

// Metrics is the package's Metrics over c, the filtered responses'
// bytes written outside their slot bounded with c's bodies' (one bound
// for all that requests hold outside their slots).
func (c *Cache) Metrics(newCollector func(filters ...string) (prometheus.Collector, error), self prometheus.Gatherer, logger log.Logger) http.Handler {
	return metrics(c, newCollector, self, logger, time.Now, c.outside)
}

// metrics is Metrics on the network's clock now, with outside the bytes
// written outside their slot.
func metrics(cached http.Handler, newCollector func(filters ...string) (prometheus.Collector, error), self prometheus.Gatherer, logger log.Logger, now func() time.Time, outside *httplimit.Budget) http.Handler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	bad := &badRequestLog{logger: logger, lines: ratelog.New(badRequestLogEvery, 1)}
	errLog := &promLogger{logger: logger, lines: ratelog.New(badRequestLogEvery, 1)}
	cut := newWriteLog(logger)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			// what it asked for cannot be told: not the whole output as
			// if it asked for no filter
			err = fmt.Errorf("malformed query: %w", err)
			bad.note(nil, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		filters := q["collect[]"]
		if len(filters) == 0 && len(q["name[]"]) == 0 {
			cached.ServeHTTP(w, r)
			return
		}
		// Filtered requests are rendered on demand.
		c, err := newCollector(filters...)
		var h http.Handler
		if err == nil {
			h, err = Filtered(c, self, errLog)
		}
		if err != nil {
			bad.note(filters, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		held := &heldResponse{header: w.Header()}
		h.ServeHTTP(held, r)
		w.WriteHeader(held.status())
		sw := httplimit.NewStallWriter(w, now, httplimit.StallTimeout, maxTransfer)
		if err := httplimit.WriteOutside(r, sw, outside, held.body.Bytes()); err != nil {
			cut.Failed(now(), r, sw, err, "total_bytes", held.body.Len())
		}
	})
}

// heldResponse is a response rendered whole before any of it is written:
// its header is the client's (sent with the status), its status and body
// held.
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(p)
}

// status is the response's status: 200 where none was written.
func (h *heldResponse) status() int { return cmp.Or(h.code, http.StatusOK) }

// badRequestLog logs metrics requests refused as bad: the first at once,
// then at most one line per badRequestLogEvery with the number not logged
// since the previous line, each showing at most maxLoggedBytes of what the
// request sent and of the error, so that a client repeating long bad
// requests cannot flood the log.
type badRequestLog struct {
	logger log.Logger
	lines  *ratelog.Log
}

const (
	badRequestLogEvery = 10 * time.Second
	maxLoggedBytes     = 256
)

func (l *badRequestLog) note(filters []string, err error) {
	held, ok := l.lines.Note()
	if !ok {
		return
	}
	level.Warn(l.logger).Log("msg", "bad metrics request (logged at most once per 10s)", "collect", clip.Text(fmt.Sprint(filters), maxLoggedBytes),
		"err", clip.Text(err.Error(), maxLoggedBytes), "not_logged", held)
}

// Filtered returns a handler rendering c on every request (a scrape with
// collect[] or name[] filters, which the cache does not serve), together
// with the exporter's own metrics in self (nil for none), logging its
// errors through errLog (nil for none).
func Filtered(c prometheus.Collector, self prometheus.Gatherer, errLog promhttp.Logger) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the collector: %w", err)
	}
	gatherers := prometheus.Gatherers{reg}
	if self != nil {
		gatherers = append(prometheus.Gatherers{self}, reg)
	}
	return promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{
		ErrorLog:      errLog,
		ErrorHandling: promhttp.ContinueOnError,
	}), nil
}

// promLogger lets promhttp log through go-kit, at error level: the first
// line at once, then at most one per badRequestLogEvery with the number
// not logged since the previous line. What it logs a client can make it
// log on every request: an Accept-Encoding that refuses every encoding
// (identity;q=0) is logged as one promhttp does not know, and served
// uncompressed. promhttp writes into a heldResponse, which never fails: a
// failed write to the client is newWriteLog's.
type promLogger struct {
	logger log.Logger
	lines  *ratelog.Log
}

// Println writes v as fmt.Println would, spaces between all operands.
func (l *promLogger) Println(v ...any) {
	held, ok := l.lines.Note()
	if !ok {
		return
	}
	level.Error(l.logger).Log("msg", strings.TrimSuffix(fmt.Sprintln(v...), "\n"), "not_logged", held)
}
