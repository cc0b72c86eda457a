package tuner

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// What the exit leaves running past its deadline (a close still blocked,
// a restore stuck, the round stuck at exit, a hook cut or cancelled at
// exit, the node lock kept for them) ends later, each end logged as it
// comes. The exporter's shutdown waits for it a while (AwaitLate) before
// it closes the backend and exits, so that those lines are written, and
// names what still runs where it gives up (Late).

// lateWork is what the exit left running, by name, under its own lock.
// The zero value is ready.
type lateWork struct {
	mu      sync.Mutex
	next    int
	running map[int]string
	idle    chan struct{} // closed once none runs (made at a begin with none running)
}

// begin counts name as running until end is called (once or more).
func (l *lateWork) begin(name string) (end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.running) == 0 {
		l.idle = make(chan struct{})
	}
	if l.running == nil {
		l.running = map[int]string{}
	}
	id := l.next
	l.next++
	l.running[id] = name
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.running, id)
			if len(l.running) == 0 {
				close(l.idle)
			}
		})
	}
}

// names are those running, in the order begun.
func (l *lateWork) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, id := range slices.Sorted(maps.Keys(l.running)) {
		out = append(out, l.running[id])
	}
	return out
}

// idled is closed once none runs (at once where none does now).
func (l *lateWork) idled() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.running) == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return l.idle
}

// Late names what the exit (RestoreAtExit, Restore), once it has
// returned, left running past its deadline and has not ended: a close,
// a restore stuck, the round stuck at exit, a hook, the node lock's
// release; none where nothing was left.
func (r *Runner) Late() []string {
	return append(r.t.hookLive.names(), r.late.names()...)
}

// AwaitLate waits, until ctx is done, for what the exit left running
// past its deadline (Late) to end, its end logged as it comes; it
// returns what still runs at ctx's end, none once everything has ended.
func (r *Runner) AwaitLate(ctx context.Context) []string {
	for {
		select {
		case <-r.late.idled():
		case <-ctx.Done():
			return r.Late()
		}
		hooks := r.t.hookLive.ended()
		if hooks == nil {
			if isClosed(r.late.idled()) {
				return nil
			}
			continue // (begun since: waited for in turn)
		}
		select {
		case <-hooks:
		case <-ctx.Done():
			return r.Late()
		}
	}
}
