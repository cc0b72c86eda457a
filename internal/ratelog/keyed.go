package ratelog

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed bounds lines by what they say: each key (a line's text) is allowed
// a line at most once per every, apart from the others, so that a harmless
// line repeated on every event does not use up the allowance of another
// that matters. It keeps at most max keys, forgetting the one first seen
// longest ago (and its count held back) for a new one; and all keys
// together are allowed at most max lines per every, so that texts that
// differ each time cannot flood the log either.
type Keyed struct {
	every time.Duration
	max   int
	all   *rate.Limiter

	mu    sync.Mutex
	keys  map[string]*keyState
	order []string // the keys, first seen first
}

type keyState struct {
	last time.Time // of its last line; zero before the first
	held int64     // events held back since its last line
}

// NewKeyed returns a Keyed allowing each of at most n keys a line per
// every, and n lines per every in all (n at least 1).
func NewKeyed(every time.Duration, n int) *Keyed {
	n = max(n, 1)
	return &Keyed{every: every, max: n, all: rate.NewLimiter(rate.Every(every/time.Duration(n)), n),
		keys: make(map[string]*keyState, n)}
}

// NoteAt counts an event of key at the time now and reports whether a
// line may be written for it; when it may, held is the number of events
// of that key held back since its last line (not counting this one).
func (k *Keyed) NoteAt(key string, now time.Time) (held int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, found := k.keys[key]
	if !found {
		if len(k.order) == k.max {
			delete(k.keys, k.order[0])
			k.order = append(k.order[:0], k.order[1:]...)
		}
		s = &keyState{}
		k.keys[key] = s
		k.order = append(k.order, key)
	}
	if (!s.last.IsZero() && now.Sub(s.last) < k.every) || !k.all.AllowN(now, 1) {
		s.held++
		return 0, false
	}
	s.last = now
	held, s.held = s.held, 0
	return held, true
}
