package webui

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
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
// deadline is logged at warn level with the bytes written and how much
// there was (total_bytes of the HTML; history_series of the JSON, whose
// length is known only at its end); a client that hung up, at debug;
// each rate-limited (httplimit.WriteLog).

// maxOutsideBytes bounds the bytes of the HTML pages written outside
// their slot at once (five pages of 1000 tenants, fifty of 100): past it,
// a page holds its slot while written, so that clients that do not read
// hold a bounded memory however many connections they open.
const maxOutsideBytes = 32 << 20

const (
	// pageCutLogEvery bounds the lines of responses whose writing
	// failed: one per 10 s of those cut at their deadline, counting
	// those held back, and apart one of those whose client hung up.
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
	written *httplimit.WriteLog // responses whose writing failed
	nulls   *ratelog.Log        // histories with values written null
}

func newPageLogs(logger log.Logger) *pageLogs {
	return &pageLogs{written: httplimit.NewWriteLog(logger, "tuner page", pageCutLogEvery), nulls: ratelog.New(pageNullsLogEvery, 1)}
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
