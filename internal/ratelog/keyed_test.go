package ratelog

import (
	"fmt"
	"testing"
	"time"
)

func TestKeyed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := NewKeyed(time.Minute, 3)
	for i, c := range []struct {
		key  string
		at   time.Duration
		ok   bool
		held int64
	}{
		{"warn", 0, true, 0},
		{"warn", time.Second, false, 0},       // held
		{"refused", 2 * time.Second, true, 0}, // another text: its own allowance
		{"warn", 3 * time.Second, false, 0},   // held
		{"warn", time.Minute, true, 2},        // a minute on: the two held
		{"refused", time.Minute, false, 0},    // 58 s since its line: held
		{"refused", time.Minute + 2*time.Second, true, 1},
		{"third", time.Minute + 2*time.Second, true, 0},     // a third key
		{"fourth", time.Minute + 2*time.Second, false, 0},   // "warn" forgotten; 3 lines a minute in all
		{"warn", time.Minute + 3*time.Second, false, 0},     // "refused" forgotten; none left in all
		{"refused", 2*time.Minute + 3*time.Second, true, 0}, // seen anew: its held count was forgotten
		{"warn", 2*time.Minute + 3*time.Second, true, 1},    // the one held since it was seen anew
	} {
		held, ok := k.NoteAt(c.key, t0.Add(c.at))
		if ok != c.ok || held != c.held {
			t.Errorf("event %d (%s at %v): (%d, %v), want (%d, %v)", i, c.key, c.at, held, ok, c.held, c.ok)
		}
	}
	if len(k.keys) != 3 || len(k.order) != 3 {
		t.Errorf("%d keys (%d in order), want at most 3", len(k.keys), len(k.order))
	}
}

// TestKeyedVaryingTexts: texts that differ each time are still bounded
// in all, and the keys kept stay at the bound.
func TestKeyedVaryingTexts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := NewKeyed(time.Minute, 16)
	lines := 0
	for i := range 1000 {
		if _, ok := k.NoteAt(fmt.Sprint("pid ", i), t0.Add(time.Duration(i)*time.Millisecond)); ok {
			lines++
		}
	}
	if lines != 16 || len(k.keys) != 16 {
		t.Errorf("%d lines, %d keys for 1000 texts in a second, want 16 and 16", lines, len(k.keys))
	}
}
