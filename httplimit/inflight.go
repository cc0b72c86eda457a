package httplimit

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// InFlight returns h behind a limit of max requests in flight (0 means no
// limit): a request beyond it is answered 503 at once, and rejections are
// logged through logger, rate-limited, as what ("metrics") requests.
func InFlight(max int64, what string, logger log.Logger, h http.Handler) http.Handler {
	if max <= 0 {
		return h
	}
	inFlight := make(chan struct{}, max)
	rejected := newRejectLog(logger, what, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			rejected.note(r)
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", max), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// rejectLog logs requests rejected beyond --web.max-requests: the first at
// once, then at most one line per rejectLogEvery with the number rejected
// since the previous line.
type rejectLog struct {
	logger log.Logger
	msg    string
	limit  int64
	lines  *ratelog.Log
}

const rejectLogEvery = 10 * time.Second

func newRejectLog(logger log.Logger, what string, limit int64) *rejectLog {
	return &rejectLog{logger: logger, msg: what + " requests rejected: too many in flight (see --web.max-requests)",
		limit: limit, lines: ratelog.New(rejectLogEvery, 1)}
}

func (l *rejectLog) note(r *http.Request) {
	held, ok := l.lines.Note()
	if !ok {
		return
	}
	level.Warn(l.logger).Log("msg", l.msg,
		"limit", l.limit, "rejected", held+1, "last_remote", r.RemoteAddr)
}
