package exposition

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
// (see promLogger); an error writing to a client that hung up mid-scrape
// is its own, not the exporter's, and logged at debug level, one writing
// past the server's write timeout (a filtered request is gathered within
// it) at warn level (requestLog).
func Metrics(cached http.Handler, newCollector func(filters ...string) (prometheus.Collector, error), self prometheus.Gatherer, logger log.Logger) http.Handler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	bad := &badRequestLog{logger: logger, lines: ratelog.New(badRequestLogEvery, 1)}
	errLog := &promLogger{logger: logger, lines: ratelog.New(badRequestLogEvery, 1),
		gone: ratelog.New(badRequestLogEvery, 1), failed: ratelog.New(badRequestLogEvery, 1)}
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
		cw := &clientWriter{ResponseWriter: w}
		if err == nil {
			h, err = Filtered(c, self, requestLog{errLog, cw})
		}
		if err != nil {
			bad.note(filters, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ServeHTTP(cw, r)
	})
}

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
// uncompressed.
type promLogger struct {
	logger log.Logger
	lines  *ratelog.Log
	gone   *ratelog.Log // the debug lines of clients gone (requestLog)
	failed *ratelog.Log // the warnings of other failed writes (requestLog)
}

// Println writes v as fmt.Println would, spaces between all operands.
func (l *promLogger) Println(v ...any) {
	held, ok := l.lines.Note()
	if !ok {
		return
	}
	level.Error(l.logger).Log("msg", strings.TrimSuffix(fmt.Sprintln(v...), "\n"), "not_logged", held)
}

// clientWriter is a request's ResponseWriter that keeps the first error a
// write to it returned: the client's connection failing (it hung up: a
// broken pipe, a reset), or the response written past the server's write
// timeout (a client that stopped reading, or a gather that outlasted it).
type clientWriter struct {
	http.ResponseWriter
	err error
}

func (w *clientWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *clientWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestLog is promLogger for one request written to w. What promhttp
// logs with the error a write to the client returned is no error of the
// exporter's: a client that hung up mid-scrape (a broken pipe, a reset) is
// logged at debug level; any other failed write, a write past the
// server's write timeout above all (a filtered request is gathered while
// it runs, so a gather outlasting it fails the response while the client
// still waits), at warn level. Each is rate-limited apart, so that neither
// holds back the lines of real errors, which stay at error level.
type requestLog struct {
	*promLogger
	w *clientWriter
}

// Println writes v as promLogger does, at debug or warn level where an
// operand is the error that a write to the client returned.
func (l requestLog) Println(v ...any) {
	var werr error
	for _, x := range v {
		if err, ok := x.(error); ok && l.w.err != nil && errors.Is(err, l.w.err) {
			werr = l.w.err
		}
	}
	line := strings.TrimSuffix(fmt.Sprintln(v...), "\n")
	switch {
	case werr == nil:
		l.promLogger.Println(v...)
	case clientHungUp(werr):
		if held, ok := l.gone.Note(); ok {
			level.Debug(l.logger).Log("msg", "client gone mid-scrape: "+line, "not_logged", held)
		}
	case errors.Is(werr, os.ErrDeadlineExceeded):
		if held, ok := l.failed.Note(); ok {
			level.Warn(l.logger).Log("msg", "the response missed the server's write timeout (a filtered scrape is gathered within it): "+line, "not_logged", held)
		}
	default:
		if held, ok := l.failed.Note(); ok {
			level.Warn(l.logger).Log("msg", "writing the response failed: "+line, "not_logged", held)
		}
	}
}

// clientHungUp says whether err, a write's, is the client's hanging up.
func clientHungUp(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
