// Package parallel runs independent pieces of work on the available
// processors.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each calls f(0), ..., f(n-1) on up to GOMAXPROCS goroutines, the
// caller's among them, and returns when every call has. The calls must be
// independent of one another: which goroutine makes a call, and in what
// order the calls run, is not defined. With one processor (or n < 2) the
// calls are made in order on the caller's goroutine.
func Each(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers < 2 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
			f(int(i))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
