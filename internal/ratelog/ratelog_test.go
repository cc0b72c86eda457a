package ratelog

import (
	"testing"
	"time"
)

// A burst of lines, then one per interval, each saying how many events
// were held back since the one before.
func TestNote(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(10*time.Second, 2)
	for i, c := range []struct {
		at   time.Duration
		ok   bool
		held int64
	}{
		{0, true, 0},
		{0, true, 0},                // the burst
		{time.Second, false, 0},     // held
		{2 * time.Second, false, 0}, // held
		{3 * time.Second, false, 0}, // held
		{10 * time.Second, true, 3}, // one token back: the three held
		{11 * time.Second, false, 0},
		{21 * time.Second, true, 1},
		{60 * time.Second, true, 0},
	} {
		held, ok := l.NoteAt(t0.Add(c.at))
		if ok != c.ok || held != c.held {
			t.Errorf("event %d at %v: (%d, %v), want (%d, %v)", i, c.at, held, ok, c.held, c.ok)
		}
	}
}
