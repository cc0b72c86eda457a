package httplimit

import (
	"net/http"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// maxLoggedPath is the most of a request's path and query a WriteLog line
// shows: a query of 60 KB is no line of 60 KB.
const maxLoggedPath = 256

// WriteLog logs the responses of a handler whose writing through a
// StallWriter failed, shared by its requests: one cut at its deadline (a
// client that read nothing for the stall bound, or a transfer past its
// bound) at warn level, with the client's address, the path (clipped),
// the bytes written and what the handler says of the response's size,
// one line per every at most, counting those cut since; one whose client
// hung up at debug level, bounded apart, counting those not logged.
type WriteLog struct {
	logger    log.Logger
	what      string // the responses, as the lines name them: "metrics"
	cut, gone *ratelog.Log
}

// NewWriteLog returns the WriteLog of what responses, logging to logger a
// line per every at most of each kind.
func NewWriteLog(logger log.Logger, what string, every time.Duration) *WriteLog {
	return &WriteLog{logger: logger, what: what, cut: ratelog.New(every, 1), gone: ratelog.New(every, 1)}
}

// Failed logs the writing through s of the response to r, failed with err
// at now (the clock the lines are bounded on); size are key-value pairs
// saying how much there was to write.
func (l *WriteLog) Failed(now time.Time, r *http.Request, s *StallWriter, err error, size ...any) {
	kv := append([]any{"path", clip.Text(r.URL.RequestURI(), maxLoggedPath), "remote", r.RemoteAddr,
		"written_bytes", s.Written()}, size...)
	if !s.CutAtDeadline(err) {
		if held, ok := l.gone.NoteAt(now); ok {
			level.Debug(l.logger).Log(append(append([]any{"msg", l.what + " response not written whole: the client hung up"}, kv...), "not_logged", held, "err", err)...)
		}
		return
	}
	if held, ok := l.cut.NoteAt(now); ok {
		level.Warn(l.logger).Log(append(append([]any{"msg", l.what + " response cut short: " + s.Why()}, kv...), "cut", held+1, "err", err)...)
	}
}
