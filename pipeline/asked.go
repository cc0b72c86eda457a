package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"
)

// AskedLogEvery is how often, at most, the lines of a reload asked for by
// a client (ReloadAsked) are logged after the first.
const AskedLogEvery = 10 * time.Second

// askedLog bounds the lines of the reloads clients ask for: POST
// /-/reload needs no authentication without a web configuration, so
// that anyone who reaches the port could otherwise write lines to the
// log as fast as it can send requests. The reloads it holds back are
// summed up in one line once the bound allows a line again (summarize),
// so that the last of a burst, one that put an edited file in use among
// them, is logged even when no reload follows it.
type askedLog struct {
	mu sync.Mutex
	// lastLine is when the bound last allowed a line (zero before the
	// first): the next is allowed AskedLogEvery after it. Kept as a time,
	// not a token bucket, so that the summary's timer fires exactly when
	// a line is allowed.
	lastLine time.Time
	last     string // the outcome of the last reload asked for (outcomeOf)
	// held counts the reloads held back since the last line; heldSource,
	// heldErr and heldAt are the last one's source, outcome and time.
	held       int64
	heldSource string
	heldErr    error
	heldAt     time.Time
	armed      bool          // a summary waits for the bound (summarize)
	closed     bool          // the pipeline stopped: no summary waits any more
	stop       chan struct{} // closed once closed is set
	// waiting is the goroutine of the summary waiting for the bound,
	// started only while the log is not closed.
	waiting sync.WaitGroup
}

func newAskedLog() *askedLog { return &askedLog{stop: make(chan struct{})} }

// allow reports whether the bound allows a line at now, and if so takes it.
func (a *askedLog) allow(now time.Time) bool {
	if !a.lastLine.IsZero() && now.Sub(a.lastLine) < AskedLogEvery {
		return false
	}
	a.lastLine = now
	return true
}

// shut stops the wait of a summary, which is then logged at once, as is
// any later one; Start calls it once its context is done, and its wait
// before it waits for the summary's goroutine.
func (a *askedLog) shut() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.stop)
	}
}

// stopWith has the summary's wait end when ctx is done (Start).
func (a *askedLog) stopWith(ctx context.Context) { context.AfterFunc(ctx, a.shut) }

// outcomeOf tells reloads apart by what their outcome line says.
func outcomeOf(err error) string {
	switch {
	case errors.Is(err, ErrNothingToReload):
		return "ignored"
	case err != nil:
		return "failed: " + err.Error()
	}
	return "reloaded"
}

// ReloadAsked reloads (Reload) for a client, source naming how it asked
// (http), and logs the outcome (LogReload), bounded: the first reload's
// lines at once, then those of at most one reload per AskedLogEvery (of
// the pipeline's clock), whose outcome line counts the reloads not logged
// since it (not_logged). A reload whose outcome differs from the previous
// one asked for (failed after reloaded, another error) has its outcome
// line logged all the same; the success lines of the files (the web
// configuration's, the tenants file's) go only with a reload allowed a
// line. Reloads held back are summed up once the bound allows a line
// again, by a timer on the pipeline's clock, unless a line counting them
// came first: one line, the last one's outcome with the count (the
// pipeline's stop logs it at once). A SIGHUP's reload (ReloadOnSignal)
// is always logged.
func (p *Pipeline) ReloadAsked(source string) error {
	a := p.asked
	now := p.clock.Now()
	a.mu.Lock()
	ok := a.allow(now)
	a.mu.Unlock()
	err := p.reload(!ok)
	a.mu.Lock()
	defer a.mu.Unlock()
	o := outcomeOf(err)
	changed := a.last != "" && a.last != o
	a.last = o
	if !ok && !changed {
		a.held++
		a.heldSource, a.heldErr, a.heldAt = source, err, now
		p.awaitSummary(now)
		return err
	}
	// Allowed, or held back but its outcome must be seen: the line
	// counts the reloads held back before it.
	held := a.held
	a.held = 0
	if held > 0 {
		logReload(p.logger, source, err, "", "not_logged", held)
	} else {
		logReload(p.logger, source, err, "")
	}
	return err
}

// awaitSummary has the reloads held back summed up (summarize) once the
// bound allows a line, on a goroutine waiting on the pipeline's clock
// unless one waits already; at once once the pipeline stopped. Called
// with the log's mu held.
func (p *Pipeline) awaitSummary(now time.Time) {
	a := p.asked
	if a.armed {
		return
	}
	if a.closed {
		p.summarize()
		return
	}
	a.armed = true
	fire := p.clock.After(a.lastLine.Add(AskedLogEvery).Sub(now))
	a.waiting.Go(func() {
		for {
			stopped := false
			select {
			case <-fire:
			case <-a.stop:
				stopped = true
			}
			a.mu.Lock()
			now := p.clock.Now()
			// A line allowed since the timer was set (a reload's, which
			// counts those held back before it, on its way) holds the
			// summary back for the bound again.
			if a.held > 0 && !stopped && now.Sub(a.lastLine) < AskedLogEvery {
				fire = p.clock.After(a.lastLine.Add(AskedLogEvery).Sub(now))
				a.mu.Unlock()
				continue
			}
			a.armed = false
			if a.held > 0 {
				a.lastLine = now
				p.summarize()
			}
			a.mu.Unlock()
			return
		}
	})
}

// summarize logs the reloads held back since the last line: the last
// one's outcome, when it was asked for, and their count (not_logged).
// Called with the log's mu held.
func (p *Pipeline) summarize() {
	a := p.asked
	if a.held == 0 {
		return
	}
	logReload(p.logger, a.heldSource, a.heldErr, " (the last of the reloads asked for whose lines were held back)",
		"asked_at", a.heldAt, "not_logged", a.held)
	a.held = 0
}
