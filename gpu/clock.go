package gpu

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Clock is the time the sampler, the simulator and the tuner run on. Real
// hosts use RealClock; tests and offline simulation use a ManualClock, so an
// hour of virtual time passes in milliseconds.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the clock's time once d has
	// passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After wraps time.After.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ManualClock is a Clock that moves only when Advance or Set is called.
// It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a ManualClock set to start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that fires when the clock has been advanced by d.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.now.Add(d)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: at, ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires due timers in order.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		return
	}
	c.now = t
	sort.SliceStable(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// Waiters returns how many After timers are pending; tests use it to know
// that a goroutine is parked on the clock before advancing it.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// UntilNext is how long a loop that runs every interval waits after a
// pass that started at start, by c: the rest of the interval, so that the
// time a pass takes does not stretch it, or of the next whole interval
// from start when the pass took longer (the ticks it covered are skipped,
// never run back to back). An interval of 0 or less waits nothing.
func UntilNext(c Clock, start time.Time, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	return interval - max(c.Now().Sub(start), 0)%interval
}

// Drive advances c by step each time a goroutine waits on it, until done
// says so, and then waits until one waits again: a loop driven by c has
// finished its last pass and parked. It gives up after hang of real time
// with nobody waiting (a test's guard against a loop that never parks).
func (c *ManualClock) Drive(step time.Duration, done func() bool, hang time.Duration) error {
	deadline := time.Now().Add(hang)
	parked := func() error {
		for c.Waiters() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("nothing waited on the clock for %v", hang)
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	for !done() {
		if err := parked(); err != nil {
			return err
		}
		c.Advance(step)
	}
	return parked()
}

// SlowPasses stands in, in tests, for the slow work of a loop driven by a
// ManualClock: each Pass notes when it began (since the Unix epoch) and
// takes Took of the clock's time.
type SlowPasses struct {
	Clock  *ManualClock
	Took   time.Duration
	mu     sync.Mutex
	starts []time.Duration
}

// Pass notes its start and advances the clock by Took.
func (p *SlowPasses) Pass() {
	p.mu.Lock()
	p.starts = append(p.starts, p.Clock.Now().Sub(time.Unix(0, 0)))
	p.mu.Unlock()
	p.Clock.Advance(p.Took)
}

// Starts returns when each pass began, since the Unix epoch.
func (p *SlowPasses) Starts() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.starts...)
}
