package httplimit

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// A response written outside its request's slot (Release) is bounded by
// the connection's write deadline alone: StallWriter moves it before each
// piece, so that the deadline bounds a stall, not the whole transfer, and
// a client that stops reading is cut within the stall bound while one
// that reads, however slowly, gets the whole response up to a bound on
// the transfer as a whole.

// StallTimeout is how long a write of a response written through a
// StallWriter waits for the client to take a piece: a client that reads
// nothing for it is cut.
const StallTimeout = 10 * time.Second

// StallPiece is the most of a response a StallWriter writes at once.
const StallPiece = 32 << 10

// StallWriter writes a response to an http.ResponseWriter in pieces of at
// most 32 KiB, each with a write deadline of the stall bound past the
// clock, never past the transfer's bound, and counts the bytes written.
type StallWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	now      func() time.Time
	stall    time.Duration
	deadline time.Time // the last one set
	end      time.Time // no deadline past it: the transfer's bound
	max      time.Duration
	written  int64
}

// NewStallWriter returns the writer of a response to w whose pieces each
// wait at most stall for the client, and whose writing may take at most
// maxTransfer from now on (now is the network's clock, the wall clock).
// Where w's deadline cannot be set (http.ErrNotSupported), the server's
// write timeout is the bound.
func NewStallWriter(w http.ResponseWriter, now func() time.Time, stall, maxTransfer time.Duration) *StallWriter {
	return &StallWriter{w: w, rc: http.NewResponseController(w), now: now, stall: stall, end: now().Add(maxTransfer), max: maxTransfer}
}

func (s *StallWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), StallPiece)]
		s.deadline = s.now().Add(s.stall)
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

// Written is the number of bytes the client took.
func (s *StallWriter) Written() int64 { return s.written }

// CutAtDeadline says whether err, a failed write of s, failed on its
// deadline: the connection's timeout (HTTP/1), or a write that failed
// once the deadline had passed (HTTP/2 says only that the stream was
// closed, its timer's reset).
func (s *StallWriter) CutAtDeadline(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || (!s.deadline.IsZero() && !s.now().Before(s.deadline))
}

// Why says why a response cut at its deadline was cut: the client read
// nothing for the stall bound, or the whole writing outlasted its bound.
func (s *StallWriter) Why() string {
	if s.deadline.Equal(s.end) {
		return "its writing took longer than " + s.max.String()
	}
	return "the client read nothing for " + s.stall.String()
}

// Budget bounds the bytes of the responses written outside their slot
// that each request holds for itself (a body rendered for it alone), with
// those of shared bodies held past their time (Hold): a response that
// does not fit is written within its slot, as before Release, so that
// clients that do not read hold a bounded memory however many
// connections they open.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Take reserves n bytes, and says whether they fit.
func (b *Budget) Take(n int) bool {
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// Give gives back n bytes taken or held.
func (b *Budget) Give(n int) { b.used.Add(-int64(n)) }

// Hold counts n bytes against the budget whether they fit or not: memory
// held outside the slots already (a shared body that a newer one has
// replaced, still written to clients that took it outside their slot),
// given back with Give. Past the bound, Take refuses, and WriteShared
// keeps the slot, until enough is given back.
func (b *Budget) Hold(n int) { b.used.Add(int64(n)) }

// WriteOutside writes body, rendered for r alone, to w through s,
// outside r's slot where the memory body holds (its capacity: a buffer
// grown as it was rendered holds up to twice its length) fits b,
// reserved for the writing, else within it; a nil b fits nothing.
func WriteOutside(r *http.Request, s *StallWriter, b *Budget, body ...[]byte) error {
	n := 0
	for _, p := range body {
		n += cap(p)
	}
	return write(r, s, b, n, body)
}

// WriteShared writes body, shared by the requests rather than rendered
// for r (a cached rendering), to w through s, outside r's slot unless b
// is past its bound, reserving nothing for it; a nil b fits nothing.
func WriteShared(r *http.Request, s *StallWriter, b *Budget, body ...[]byte) error {
	return write(r, s, b, 0, body)
}

// write writes body through s, outside r's slot where n bytes fit b.
func write(r *http.Request, s *StallWriter, b *Budget, n int, body [][]byte) error {
	if b != nil && b.Take(n) {
		defer b.Give(n)
		Release(r)
	}
	for _, p := range body {
		if _, err := s.Write(p); err != nil {
			return err
		}
	}
	return nil
}
