// Package overdue says when something under way runs past a limit: a call
// that hangs (in a driver, an outside program, a stuck file system) counts
// no error and writes no line until it returns, so nothing would say so.
//
// The limit is wall time, how long the thing really runs: an injected
// clock that stands still while a test drives it would never see it pass.
package overdue

import (
	"sync"
	"time"
)

// Watch starts watching something that starts now: once it has run for
// after without ending, late is called, once. The function Watch returns
// ends the watch and reports whether late was called (so that the caller
// can say that it ended after all); once it returns, late is not called,
// and a late under way has returned.
func Watch(after time.Duration, late func()) (end func() (wasLate bool)) {
	var (
		mu          sync.Mutex
		ended, were bool
	)
	timer := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		were = true
		late()
	})
	return func() bool {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		return were
	}
}
