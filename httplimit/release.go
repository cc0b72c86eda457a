package httplimit

import (
	"context"
	"net/http"
	"sync/atomic"
)

// A request admitted under an InFlight limit holds its slot until its
// handler returns, or until the handler gives it back with Release: a
// handler whose response is rendered (the CPU and memory the limit
// bounds) gives it back before writing, so that a client that reads
// slowly, or not at all, holds a connection and no slot, and a scraper is
// not refused for what other clients do not read.

// slotKey is the context key of a request's slot.
type slotKey struct{}

// slot is a request's place under a limit, given back once.
type slot struct {
	inFlight chan struct{}
	released atomic.Bool
	holders  *holders
	host     string
}

func (s *slot) release() {
	if s.released.CompareAndSwap(false, true) {
		s.holders.add(s.host, -1)
		<-s.inFlight
	}
}

// Release gives back the slot r holds under an InFlight limit, if any;
// later calls, and the limit's own at the handler's return, do nothing.
// A handler calls it once what it writes is rendered: no more of the work
// the limit bounds is left, only the client's reading.
func Release(r *http.Request) {
	if s, ok := r.Context().Value(slotKey{}).(*slot); ok {
		s.release()
	}
}

// withSlot returns r holding s.
func withSlot(r *http.Request, s *slot) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, s))
}
