package exposition

import (
	"net/http"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// A metrics response is rendered within its request's slot of
// --web.max-requests and written outside it (httplimit.Release), through
// an httplimit.StallWriter: a client that reads nothing for
// httplimit.StallTimeout is cut, one that reads slowly gets the whole
// response within maxTransfer. Clients that do not read thus hold
// connections, each for a bounded time, and no slot: a scraper is not
// refused for them.

// maxTransfer bounds the writing of a metrics response, as the server's
// write timeout did when the response was written within its slot: a
// minute.
const maxTransfer = time.Minute

// maxOutsideBytes bounds the bytes of the responses rendered each for its
// request alone (filtered ones, collect[] and name[]; an encoding the
// Cache does not keep) written outside their slot at once, with the
// cached bodies of earlier publications still being written: a response
// that does not fit is written within its slot. The cached body of the
// current publication is shared by every request, written outside its
// slot as long as the bound is not passed; the retired bodies of one
// publication's encodings may pass it, once.
const maxOutsideBytes = 64 << 20

// writeLog logs metrics responses whose writing failed: one cut at its
// deadline (a client that read nothing for httplimit.StallTimeout, or a
// transfer past maxTransfer) at warn level, with the client's address, the
// path (clipped) and the bytes written, one line per badRequestLogEvery
// at most, counting those held back; a client that hung up at debug
// level, bounded apart.
type writeLog struct {
	logger log.Logger
	now    func() time.Time
	cut    *ratelog.Log
	gone   *ratelog.Log
}

func newWriteLog(logger log.Logger, now func() time.Time) *writeLog {
	return &writeLog{logger: logger, now: now, cut: ratelog.New(badRequestLogEvery, 1), gone: ratelog.New(badRequestLogEvery, 1)}
}

// note logs the failed writing through s of a response of total bytes
// to r's client.
func (l *writeLog) note(r *http.Request, s *httplimit.StallWriter, total int, err error) {
	kv := []any{"path", clip.Text(r.URL.RequestURI(), maxLoggedBytes), "remote", r.RemoteAddr,
		"written_bytes", s.Written(), "total_bytes", total}
	if !s.CutAtDeadline(err) {
		if held, ok := l.gone.NoteAt(l.now()); ok {
			level.Debug(l.logger).Log(append(append([]any{"msg", "client gone mid-scrape"}, kv...), "not_logged", held, "err", err)...)
		}
		return
	}
	if held, ok := l.cut.NoteAt(l.now()); ok {
		level.Warn(l.logger).Log(append(append([]any{"msg", "metrics response cut short: " + s.Why()}, kv...), "cut", held+1, "err", err)...)
	}
}
