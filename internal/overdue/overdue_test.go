package overdue

import (
	"runtime"
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
// fired and waits for the lock: over many watches ended as their timer
// fires, late is called exactly as often as end reports it was.
func TestNoLateAfterEnd(t *testing.T) {
	var calls, said atomic.Int32
	for range 5000 {
		end := Watch(0, func() { calls.Add(1) })
		runtime.Gosched()
		if end() {
			said.Add(1)
		}
	}
	time.Sleep(50 * time.Millisecond) // (a timer's late still to come)
	if c, s := calls.Load(), said.Load(); c != s {
		t.Errorf("late called %d times, end reported it %d times", c, s)
	}
}

// end waits for a late under way, and reports it.
func TestEndWaitsForLate(t *testing.T) {
	in, release := make(chan struct{}), make(chan struct{})
	end := Watch(0, func() { close(in); <-release })
	<-in
	ended := make(chan bool)
	go func() { ended <- end() }()
	select {
	case <-ended:
		t.Fatal("end returned while late ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if !<-ended {
		t.Error("end() = false after late ran")
	}
}
