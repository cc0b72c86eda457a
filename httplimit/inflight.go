package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// InFlight returns h behind a limit of max requests in flight (0 means no
// limit): a request beyond it is answered 503 at once, with a Retry-After
// of RetryAfter (Busy), and rejections are logged through logger,
// rate-limited, as what ("metrics") requests, naming --web.max-requests.
// A request holds its slot until h returns or gives it back (Release).
func InFlight(max int64, what string, logger log.Logger, h http.Handler) http.Handler {
	return InFlightOf(max, what, "see --web.max-requests", Busy(max, RetryAfter), logger, h)
}

// InFlightOf is InFlight with the rejections' log line saying what sets
// the limit (setBy: "see --web.max-requests"), and a request beyond it
// answered by busy, for requests that may hold a slot longer than a
// scrape does (a longer Retry-After) or whose answer a browser shows (a
// page that reloads itself).
func InFlightOf(max int64, what, setBy string, busy http.Handler, logger log.Logger, h http.Handler) http.Handler {
	if max <= 0 {
		return h
	}
	inFlight := make(chan struct{}, max)
	rejected := newRejectLog(logger, what, setBy, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			s := &slot{inFlight: inFlight, holders: rejected.holders, host: hostOf(r.RemoteAddr)}
			s.holders.add(s.host, 1)
			defer s.release()
			r = withSlot(r, s)
		default:
			rejected.note(r)
			busy.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Busy answers a request beyond a limit of max requests in flight: 503,
// with a Retry-After of retryAfter seconds.
func Busy(max int64, retryAfter string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", max), http.StatusServiceUnavailable)
	})
}

// RetryAfter is the Retry-After, in seconds, of a metrics request
// rejected beyond the limit: a scrape in flight takes well under a
// second (its response is written outside its slot, Release). A handler
// whose requests may hold a slot longer (the tuner page's JSON, up to its
// write timeout for a client that stops reading) gives InFlightOf its own
// answer.
const RetryAfter = "1"

// rejectLog logs requests rejected beyond a limit: the first at
// once, then at most one line per rejectLogEvery with the number rejected
// since the previous line.
type rejectLog struct {
	logger  log.Logger
	msg     string
	limit   int64
	lines   *ratelog.Log
	holders *holders
}

const rejectLogEvery = 10 * time.Second

func newRejectLog(logger log.Logger, what, setBy string, limit int64) *rejectLog {
	return &rejectLog{logger: logger, msg: what + " requests rejected: too many in flight (" + setBy + ")",
		limit: limit, lines: ratelog.New(rejectLogEvery, 1), holders: &holders{slots: map[string]int{}}}
}

func (l *rejectLog) note(r *http.Request) {
	held, ok := l.lines.Note()
	if !ok {
		return
	}
	host, n := l.holders.top()
	level.Warn(l.logger).Log("msg", l.msg,
		"limit", l.limit, "rejected", held+1, "last_remote", r.RemoteAddr, "top_holder", host, "top_holder_slots", n)
}

// holders counts the slots each client host holds, so that a rejection's
// line names the host holding the most (top_holder), not only the client
// refused (last_remote), which is mostly the scraper kept out.
type holders struct {
	mu    sync.Mutex
	slots map[string]int
}

func (h *holders) add(host string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots[host] += n; h.slots[host] <= 0 {
		delete(h.slots, host)
	}
}

// top returns the host holding the most slots, and how many.
func (h *holders) top() (host string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, v := range h.slots {
		if v > n || v == n && k < host {
			host, n = k, v
		}
	}
	return host, n
}

// hostOf is a remote address's host: its port left out.
func hostOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
