// Package httplimit bounds what HTTP clients can hold of the exporter:
// the servers' timeouts, a server per listener (Group), and their
// connection limit (idle connections closed first), no wait for a request body (none past the header timeout where
// a handler wrapped around the server's answers), its own error log
// rate-limited (a client's failed TLS handshake at debug level), and the
// limit on requests in flight with its rate-limited log.
package httplimit

import (
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// Limits bounds what clients can hold of the HTTP server.
type Limits struct {
	// ReadHeaderTimeout bounds the time to read a request's headers, and
	// the whole request too: a body the server waits for (see noBody) is
	// not waited for past it.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// MaxConnections bounds open connections; 0 means no limit.
	MaxConnections int
}

// writeTimeout bounds the time to write one response, from the request's
// read, where its handler sets no deadline of its own: the metrics and
// the tuner page write through a StallWriter, whose deadlines replace it.
const writeTimeout = time.Minute

// maxHeaderBytes bounds a request's header; scrapes send a few hundred
// bytes.
const maxHeaderBytes = 64 << 10

// NewServer returns the exporter's HTTP server: h behind the header,
// idle and write timeouts and the connection limit of lim, logging its own
// errors (accept errors, TLS handshakes) through logger, rate-limited; a
// TLS handshake the client failed is logged at debug level (serverErrorLog).
func NewServer(h http.Handler, lim Limits, logger log.Logger) *http.Server {
	var conns *connLimiter
	if lim.MaxConnections > 0 {
		conns = newConnLimiter(lim.MaxConnections, logger)
	}
	return newServer(h, lim, newServerErrorLog(logger), conns)
}

// newServer is NewServer with the error log and the connection limiter
// (nil: no limit) given, so that servers can share them (Group).
func newServer(h http.Handler, lim Limits, errLog *serverErrorLog, conns *connLimiter) *http.Server {
	srv := &http.Server{
		Handler:           noBody(h),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		// A handler wrapped around h (the web configuration's basic auth)
		// may answer without calling it, so noBody does not see that
		// request: net/http then reads its body before the response, and
		// the whole request's deadline is what ends a body never sent.
		ReadTimeout:    lim.ReadHeaderTimeout,
		IdleTimeout:    lim.IdleTimeout,
		WriteTimeout:   writeTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       stdlog.New(errLog, "", 0),
	}
	if conns != nil {
		srv.ConnState = conns.track
	}
	return srv
}

// noBody serves h without waiting for a request's body: no endpoint of the
// exporter reads one, and the server would read it, with no deadline,
// before the response's first bytes (and after the handler), so that a
// client announcing a body and never sending it would hold the handler,
// its request slot and its connection (beyond the connection limit's
// reach) for ever. The connection's read deadline is set in the past
// instead: a body not there already is not waited for, and the connection
// closes after the response.
func noBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		}
		h.ServeHTTP(w, r)
	})
}

// serverErrorLog writes net/http's log lines as error records of the
// project's logger, at most a burst of serverLogBurst then one per
// serverLogEvery; the suppressed lines are counted in the next one. A TLS
// handshake the client failed (clientHandshakeFailure: a port scanner, a
// load balancer's TCP check) is no error of the exporter's: it is logged
// at debug level, bounded apart, so that such clients do not hold back the
// lines of the server's own failures (a certificate that cannot be
// loaded), which stay at error level.
type serverErrorLog struct {
	logger log.Logger
	lines  *ratelog.Log
	client *ratelog.Log // the debug lines of clients' failed handshakes
}

const (
	serverLogEvery = time.Second
	serverLogBurst = 10
)

func newServerErrorLog(logger log.Logger) *serverErrorLog {
	return &serverErrorLog{logger: logger, lines: ratelog.New(serverLogEvery, serverLogBurst), client: ratelog.New(serverLogEvery, serverLogBurst)}
}

func (l *serverErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	lines, lvl := l.lines, level.Error
	if clientHandshakeFailure(line) {
		lines, lvl = l.client, level.Debug
	}
	n, ok := lines.Note()
	if !ok {
		return len(p), nil
	}
	kv := []any{"msg", line}
	if n > 0 {
		kv = append(kv, "suppressed", n)
	}
	lvl(l.logger).Log(kv...)
	return len(p), nil
}

// handshakeError begins net/http's line for a failed TLS handshake; the
// remote address and the reason follow.
const handshakeError = "http: TLS handshake error from "

// clientHandshakeFailure reports whether line is net/http's for a TLS
// handshake the client failed: it hung up or reset the connection before
// or during the handshake (EOF, a reset: a port scanner, a load balancer's
// TCP health check), sent nothing in time, or spoke no TLS (plain HTTP
// among them). A handshake failing for any other reason, the server's (a
// certificate or key that cannot be loaded) or a client's refusal of the
// server's certificate, is not one.
func clientHandshakeFailure(line string) bool {
	rest, ok := strings.CutPrefix(line, handshakeError)
	if !ok {
		return false
	}
	// The address holds colons ([::1]:80), the reason ": " only after it.
	_, reason, ok := strings.Cut(rest, ": ")
	if !ok {
		return false
	}
	switch reason {
	case "EOF", "unexpected EOF",
		"client sent an HTTP request to an HTTPS server",
		"tls: first record does not look like a TLS handshake":
		return true
	}
	for _, s := range []string{": connection reset by peer", ": broken pipe", ": i/o timeout"} {
		if strings.HasSuffix(reason, s) {
			return true
		}
	}
	return false
}

// connLimiter keeps at most max connections open. A connection beyond the
// limit first evicts the connection idle the longest (a keep-alive
// connection between requests), else the oldest one that has not sent a
// request yet; only when every connection is serving a request is the new
// one closed. Idle sockets, however many, thus never lock a scraper out,
// and the process's file descriptors stay bounded.
type connLimiter struct {
	max    int
	logger log.Logger
	lines  *ratelog.Log // connections closed by the limiter

	mu    sync.Mutex
	seq   uint64
	conns map[net.Conn]connInfo
}

type connInfo struct {
	state http.ConnState
	since uint64 // when it entered state, in the limiter's sequence
}

func newConnLimiter(max int, logger log.Logger) *connLimiter {
	return &connLimiter{max: max, logger: logger, lines: ratelog.New(10*time.Second, 1), conns: map[net.Conn]connInfo{}}
}

// track is the server's ConnState hook.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	l.seq++
	var victim net.Conn
	switch st {
	case http.StateNew:
		if len(l.conns) >= l.max {
			if victim = l.oldestLocked(http.StateIdle); victim == nil {
				victim = l.oldestLocked(http.StateNew)
			}
		}
		switch {
		case victim != nil:
			delete(l.conns, victim)
			l.conns[c] = connInfo{st, l.seq}
		case len(l.conns) >= l.max:
			victim = c // every connection is busy: refuse the new one
		default:
			l.conns[c] = connInfo{st, l.seq}
		}
	case http.StateActive, http.StateIdle:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{st, l.seq}
		}
	default: // closed or hijacked
		delete(l.conns, c)
	}
	l.mu.Unlock()
	if victim == nil {
		return
	}
	victim.Close()
	if held, ok := l.lines.Note(); ok {
		level.Warn(l.logger).Log("msg", "connection limit reached; closed connections (see --web.max-connections)",
			"limit", l.max, "closed", held+1)
	}
}

// oldestLocked returns the connection in state st for the longest, or nil.
func (l *connLimiter) oldestLocked(st http.ConnState) net.Conn {
	var oldest net.Conn
	var since uint64
	for c, info := range l.conns {
		if info.state == st && (oldest == nil || info.since < since) {
			oldest, since = c, info.since
		}
	}
	return oldest
}

// open returns the number of connections tracked.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// FitOpenFiles lowers the connection limit to half the open-files limit,
// so that connections alone cannot exhaust the process's file descriptors.
func FitOpenFiles(lim Limits, logger log.Logger) Limits {
	n, ok := openFilesLimit()
	if !ok || lim.MaxConnections == 0 || uint64(lim.MaxConnections) <= n/2 {
		return lim
	}
	level.Info(logger).Log("msg", "lowered --web.max-connections to half the open-files limit", "from", lim.MaxConnections, "to", n/2, "open_files_limit", n)
	lim.MaxConnections = max(int(n/2), 1)
	return lim
}
