package webui

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// A tuner page response is written in pieces of at most pageChunk, the
// write deadline moved to TunerPageWriteTimeout past the page's clock
// before each: the deadline bounds a stall, not the whole transfer. A
// client that stops reading frees its slot within the timeout; one that
// reads, however slowly (a port-forward, a VPN), gets the whole page as
// long as each piece drains within it (about 3 KB/s), where one deadline
// for the whole response cut the 1000-tenant JSON (28 MB) of any client
// under 3 MB/s. A response cut at its deadline is logged at warn level,
// rate-limited, with the bytes written; a client that hung up, at debug.

// pageChunk is the most of a tuner page response written at once.
const pageChunk = 32 << 10

const (
	// pageCutLogEvery bounds the warnings of responses cut at their
	// deadline: one line per 10 s, counting those held back.
	pageCutLogEvery = 10 * time.Second
	// pageNullsLogEvery bounds the warnings of a history with values
	// that are no number: one line a minute, counting the requests held
	// back (the history keeps a value for its 240 rounds).
	pageNullsLogEvery = time.Minute
	// pageNullsNamed is how many of those series a warning names.
	pageNullsNamed = 10
)

// pageLogs are the tuner page's rate-limited warnings, shared by its
// requests.
type pageLogs struct {
	cut   *ratelog.Log // responses cut at their write deadline
	nulls *ratelog.Log // histories with values written null
}

func newPageLogs() *pageLogs {
	return &pageLogs{cut: ratelog.New(pageCutLogEvery, 1), nulls: ratelog.New(pageNullsLogEvery, 1)}
}

// stallWriter writes a response to w in pieces of at most pageChunk, each
// with a write deadline of TunerPageWriteTimeout past now, and counts the
// bytes written.
type stallWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	now      func() time.Time
	deadline time.Time // the last one set
	end      time.Time // no deadline past it: the transfer's bound
	max      time.Duration
	written  int64
}

// newStallWriter returns the writer of a response to w whose writing may
// take at most maxTransfer from now on.
func newStallWriter(w http.ResponseWriter, now func() time.Time, maxTransfer time.Duration) *stallWriter {
	return &stallWriter{w: w, rc: http.NewResponseController(w), now: now, end: now().Add(maxTransfer), max: maxTransfer}
}

func (s *stallWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), pageChunk)]
		// Where the deadline cannot be set (ErrNotSupported), the
		// server's write timeout is the bound; the handler's first
		// setting logged why.
		s.deadline = s.now().Add(TunerPageWriteTimeout)
		if s.deadline.After(s.end) {
			s.deadline = s.end
		}
		_ = s.rc.SetWriteDeadline(s.deadline)
		k, err := s.w.Write(piece)
		n += k
		s.written += int64(k)
		if err != nil {
			return n, err
		}
		p = p[len(piece):]
	}
	return n, nil
}

// cutAtDeadline says whether err, a failed write of s, failed on its
// deadline: the connection's timeout (HTTP/1), or a write that failed
// once the deadline had passed (HTTP/2 says only that the stream was
// closed, its timer's reset).
func (s *stallWriter) cutAtDeadline(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || (!s.deadline.IsZero() && !s.now().Before(s.deadline))
}

// logWriteFailed logs a tuner page response whose write through s
// failed, with the bytes written and size, what says how much there was
// (total_bytes of the HTML; history_series of the JSON, whose length is
// known only at its end): at warn level, rate-limited, where it was cut
// at its deadline (a client that read nothing for
// TunerPageWriteTimeout), at debug where the client hung up.
func (p tunerPage) logWriteFailed(r *http.Request, s *stallWriter, err error, size ...any) {
	if !s.cutAtDeadline(err) {
		level.Debug(p.logger).Log(append(append([]any{"msg", "writing the tuner page", "written_bytes", s.written}, size...), "err", err)...)
		return
	}
	held, ok := p.logs.cut.NoteAt(p.now())
	if !ok {
		return
	}
	why := fmt.Sprintf("the client read nothing for %v", TunerPageWriteTimeout)
	if s.deadline.Equal(s.end) {
		why = fmt.Sprintf("its writing took longer than %v", s.max)
	}
	kv := []any{"msg", "tuner page response cut short: " + why,
		"path", r.URL.RequestURI(), "remote", r.RemoteAddr, "written_bytes", s.written}
	level.Warn(p.logger).Log(append(append(kv, size...), "cut", held+1, "err", err)...)
}

// logNulls warns, rate-limited, of a history whose values that are no
// number JSON can hold are written null, naming the first
// pageNullsNamed series and counting the rest.
func logNulls(logger log.Logger, logs *pageLogs, now time.Time, nulls []string) {
	held, ok := logs.nulls.NoteAt(now)
	if !ok {
		return
	}
	named := strings.Join(nulls[:min(len(nulls), pageNullsNamed)], "; ")
	if more := len(nulls) - pageNullsNamed; more > 0 {
		named += fmt.Sprintf("; and %d more", more)
	}
	level.Warn(logger).Log("msg", "the tuner page's history holds values that are no number: written null",
		"series", named, "series_count", len(nulls), "requests", held+1)
}
