// Package parallel runs independent pieces of work on the available
// processors.
//
// The work is shared with helper goroutines that outlive a call. A
// sleeping goroutine takes tens of microseconds to wake on another
// processor, as long as many a call's pieces of work take, so a helper
// that has finished its share spins a while for the next call (yielding
// its processor to any other goroutine that can run) before it sleeps: a
// program that calls Each in a loop, with short stretches of serial work
// between the calls, finds its helpers awake.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// linger is how long a helper waits for the next call, spinning, before it
// sleeps; a caller whose helpers spin waits a quarter of it for their last
// calls to return, spinning, before it sleeps.
const linger = time.Millisecond

// Each calls f(0), ..., f(n-1) on up to GOMAXPROCS goroutines, the
// caller's among them, and returns when every call has. The calls must be
// independent of one another: which goroutine makes a call, and in what
// order the calls run, is not defined. With one processor (or n < 2) the
// calls are made in order on the caller's goroutine; calls of Each from
// several goroutines at once share the helpers, and a call that finds
// them all busy makes its calls on the caller's goroutine.
func Each(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers < 2 {
		for i := range n {
			f(i)
		}
		return
	}
	j := &job{n: int64(n), f: f, done: make(chan struct{})}
	j.left.Store(int64(n))
	spin := true
	for _, h := range helpers(workers - 1) {
		if h.give(j) {
			spin = spin && h.spins()
		}
	}
	if j.work() {
		return
	}
	// a helper given the job that has not started on it is not waited
	// for: it will find no call left
	if spin {
		deadline := time.Now().Add(linger / 4) // wall time: how long to spin
		for i := 0; j.left.Load() > 0; i++ {
			if i%32 == 0 && time.Now().After(deadline) {
				break
			}
		}
	}
	<-j.done
}

// job is one call of Each.
type job struct {
	n    int64
	f    func(int)
	next atomic.Int64
	// left counts the calls not yet returned; the goroutine whose call
	// brings it to 0 closes done.
	left atomic.Int64
	done chan struct{}
}

// work makes calls of the job until none is left to start; it reports
// whether it made the job's last call to return.
func (j *job) work() (last bool) {
	for i := j.next.Add(1) - 1; i < j.n; i = j.next.Add(1) - 1 {
		j.f(int(i))
		if j.left.Add(-1) == 0 {
			close(j.done)
			return true
		}
	}
	return false
}

// helper is a goroutine that takes part in calls of Each.
type helper struct {
	// job is the call the helper is given, nil while it is free: a caller
	// takes a free helper by setting it.
	job atomic.Pointer[job]
	// asleep is set while the helper may be waiting on wake.
	asleep atomic.Bool
	wake   chan struct{}
	// gap is the moving average of h's waits for a job in nanoseconds,
	// each counted as at most 2*linger; only the helper changes it.
	gap atomic.Int64
}

// spins says whether h spins while it waits: while its waits are short.
func (h *helper) spins() bool {
	return time.Duration(h.gap.Load()) < linger/2
}

// give has h take part in j if h is free; it reports whether h is.
func (h *helper) give(j *job) bool {
	if !h.job.CompareAndSwap(nil, j) {
		return false
	}
	if h.asleep.Load() {
		select {
		case h.wake <- struct{}{}:
		default: // a wake-up is already on its way
		}
	}
	return true
}

// run is the helper's goroutine: it works on the job it is given, then
// waits for the next.
func (h *helper) run() {
	for {
		j := h.wait()
		last := j.work()
		h.job.Store(nil)
		if last {
			// the caller may be asleep, readied onto this processor
			runtime.Gosched()
		}
	}
}

// wait returns the next job h is given. While the waits are short (the
// caller's serial work between its calls of Each, as h has seen it) it
// spins for up to linger, yielding its processor to other goroutines,
// before it sleeps; while they are long, which they also are when the
// machine's other work has the processors, it sleeps at once, since
// spinning would only take time from that work and from the caller.
func (h *helper) wait() *job {
	start := time.Now() // wall time: how long h waited
	spin := h.spins()
	for {
		if j := h.job.Load(); j != nil {
			gap := h.gap.Load()
			h.gap.Store(gap + (int64(min(time.Since(start), 2*linger))-gap)/8)
			return j
		}
		if spin && time.Since(start) < linger {
			runtime.Gosched()
			continue
		}
		h.asleep.Store(true)
		if j := h.job.Load(); j != nil {
			h.asleep.Store(false)
			continue
		}
		<-h.wake
		h.asleep.Store(false)
	}
}

var (
	mu  sync.Mutex
	all atomic.Pointer[[]*helper]
)

// helpers returns k helpers, starting those not yet running.
func helpers(k int) []*helper {
	if hs := all.Load(); hs != nil && len(*hs) >= k {
		return (*hs)[:k]
	}
	mu.Lock()
	defer mu.Unlock()
	var hs []*helper
	if p := all.Load(); p != nil {
		hs = *p
	}
	for len(hs) < k {
		h := &helper{wake: make(chan struct{}, 1)}
		go h.run()
		hs = append(hs, h)
	}
	all.Store(&hs)
	return hs[:k]
}
