package exposition

import (
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
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

// newWriteLog returns the log of metrics responses whose writing failed:
// one cut at its deadline (a client that read nothing for
// httplimit.StallTimeout, or a transfer past maxTransfer) at warn level,
// one line per badRequestLogEvery at most, counting those held back; a
// client that hung up at debug level, bounded apart.
func newWriteLog(logger log.Logger) *httplimit.WriteLog {
	return httplimit.NewWriteLog(logger, "metrics", badRequestLogEvery)
}
