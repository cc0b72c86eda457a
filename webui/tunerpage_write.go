package webui

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// A tuner page response is written through an httplimit.StallWriter, in
// pieces of at most httplimit.StallPiece, the write deadline moved to
// TunerPageWriteTimeout past the page's clock before each: the deadline
// bounds a stall, not the whole transfer. A client that stops reading is
// cut within the timeout; one that reads, however slowly (a port-forward,
// a VPN), gets the whole page as long as each piece drains within it
// (about 3 KB/s), where one deadline for the whole response cut the
// 1000-tenant JSON (28 MB) of any client under 3 MB/s. The HTML, rendered
// whole within its slot, is written outside it (httplimit.Release) where
// it fits maxOutsideBytes with the others being written: a browser is
// not refused for clients that do not read. A response cut at its
// deadline is logged at warn level, rate-limited, with the bytes written;
// a client that hung up, at debug.

// maxOutsideBytes bounds the bytes of the HTML pages written outside
// their slot at once (five pages of 1000 tenants, fifty of 100): past it,
// a page holds its slot while written, so that clients that do not read
// hold a bounded memory however many connections they open.
const maxOutsideBytes = 32 << 20

// maxLoggedPath is the most of a request's path and query a warning
// shows: a query of 60 KB is no line of 60 KB.
const maxLoggedPath = 256

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

// logWriteFailed logs a tuner page response whose write through s
// failed, with the bytes written and size, what says how much there was
// (total_bytes of the HTML; history_series of the JSON, whose length is
// known only at its end): at warn level, rate-limited, where it was cut
// at its deadline (a client that read nothing for
// TunerPageWriteTimeout), at debug where the client hung up.
func (p tunerPage) logWriteFailed(r *http.Request, s *httplimit.StallWriter, err error, size ...any) {
	if !s.CutAtDeadline(err) {
		level.Debug(p.logger).Log(append(append([]any{"msg", "writing the tuner page", "written_bytes", s.Written()}, size...), "err", err)...)
		return
	}
	held, ok := p.logs.cut.NoteAt(p.now())
	if !ok {
		return
	}
	kv := []any{"msg", "tuner page response cut short: " + s.Why(),
		"path", clip.Text(r.URL.RequestURI(), maxLoggedPath), "remote", r.RemoteAddr, "written_bytes", s.Written()}
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
