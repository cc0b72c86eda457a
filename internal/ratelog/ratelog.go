// Package ratelog bounds how often a repeating event is logged: a line
// when a rate limiter allows one, saying how many events were held back
// since the last line, so that a client repeating what it should not (a
// bad request, a request beyond a limit) cannot flood the log.
package ratelog

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Log counts the events it is told of and allows a line for at most burst
// of them at once, then one per every.
type Log struct {
	limiter *rate.Limiter
	held    atomic.Int64 // events held back since the last line
}

// New returns a Log allowing a burst of lines, then one per every.
func New(every time.Duration, burst int) *Log {
	return &Log{limiter: rate.NewLimiter(rate.Every(every), burst)}
}

// Note counts an event and reports whether a line may be written for it
// now; when it may, held is the number of events held back since the last
// line (not counting this one).
func (l *Log) Note() (held int64, ok bool) { return l.NoteAt(time.Now()) }

// NoteAt is Note at the time now.
func (l *Log) NoteAt(now time.Time) (held int64, ok bool) {
	if !l.limiter.AllowN(now, 1) {
		l.held.Add(1)
		return 0, false
	}
	return l.held.Swap(0), true
}

// Take returns the number of events held back since the last line and
// starts counting again from 0: for a line written all the same for an
// event the limiter held back (one that must be seen), which that number
// counts.
func (l *Log) Take() int64 { return l.held.Swap(0) }
