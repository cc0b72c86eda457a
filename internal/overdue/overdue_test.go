package overdue

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		runs  time.Duration // how long the thing watched runs
		late  bool
	}{
		{"ends in time", time.Hour, 0, false},
		{"runs past the limit", time.Millisecond, 200 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			end := Watch(tc.after, func() { calls.Add(1) })
			time.Sleep(tc.runs)
			if got := end(); got != tc.late {
				t.Errorf("end() = %v, want %v", got, tc.late)
			}
			if got, want := calls.Load(), map[bool]int32{false: 0, true: 1}[tc.late]; got != want {
				t.Errorf("late called %d times, want %d", got, want)
			}
		})
	}
}

// Once the watch has ended, late is not called, even where its timer had
// fired and waits for the lock.
func TestNoLateAfterEnd(t *testing.T) {
	var calls atomic.Int32
	end := Watch(0, func() { calls.Add(1) })
	late := end()
	time.Sleep(50 * time.Millisecond)
	if n := calls.Load(); late && n != 1 || !late && n != 0 {
		t.Errorf("end() = %v with late called %d times", late, n)
	}
}
