package httplimit

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// closed reports whether c was closed (a net.Pipe end errors on use once
// closed).
func closed(c net.Conn) bool {
	return c.SetDeadline(time.Time{}) != nil
}

func TestConnLimiterEvictsIdleFirst(t *testing.T) {
	l := newConnLimiter(2, log.NewNopLogger())
	pipe := func() net.Conn { c, _ := net.Pipe(); return c }
	idle, busy := pipe(), pipe()
	l.track(idle, http.StateNew)
	l.track(idle, http.StateIdle)
	l.track(busy, http.StateNew)
	l.track(busy, http.StateActive)

	// At the limit, a new connection closes the idle one.
	fresh := pipe()
	l.track(fresh, http.StateNew)
	if !closed(idle) || closed(busy) || closed(fresh) || l.open() != 2 {
		t.Fatalf("idle closed %v, busy closed %v, fresh closed %v, open %d", closed(idle), closed(busy), closed(fresh), l.open())
	}
	// No idle one: the oldest that has sent no request yet goes.
	next := pipe()
	l.track(next, http.StateNew)
	if !closed(fresh) || closed(next) || closed(busy) {
		t.Fatalf("fresh closed %v, next closed %v", closed(fresh), closed(next))
	}
	// Every connection busy: the new one is refused.
	l.track(next, http.StateActive)
	last := pipe()
	l.track(last, http.StateNew)
	if !closed(last) || closed(next) || closed(busy) || l.open() != 2 {
		t.Fatalf("last closed %v, open %d", closed(last), l.open())
	}
	// Closed connections free their slot.
	l.track(busy, http.StateClosed)
	if l.open() != 1 {
		t.Errorf("open %d after a close", l.open())
	}
}
