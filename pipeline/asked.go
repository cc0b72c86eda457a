package pipeline

import (
	"errors"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// AskedLogEvery is how often, at most, the lines of a reload asked for by
// a client (ReloadAsked) are logged after the first.
const AskedLogEvery = 10 * time.Second

// askedLog bounds the lines of the reloads clients ask for: POST
// /-/reload needs no authentication without a web configuration, so
// that anyone who reaches the port could otherwise write lines to the
// log as fast as it can send requests.
type askedLog struct {
	lines *ratelog.Log
	mu    sync.Mutex
	last  string // the outcome of the last reload asked for (outcomeOf)
}

func newAskedLog() askedLog { return askedLog{lines: ratelog.New(AskedLogEvery, 1)} }

// changed records the outcome of a reload asked for and reports whether
// it differs from the previous one's.
func (a *askedLog) changed(err error) bool {
	o := outcomeOf(err)
	a.mu.Lock()
	defer a.mu.Unlock()
	was := a.last
	a.last = o
	return was != "" && was != o
}

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
// line. A SIGHUP's reload (ReloadOnSignal) is always logged.
func (p *Pipeline) ReloadAsked(source string) error {
	held, ok := p.asked.lines.NoteAt(p.clock.Now())
	err := p.reload(!ok)
	if changed := p.asked.changed(err); !ok && changed {
		// Held back, but its outcome must be seen: the count taken
		// includes this reload.
		held, ok = max(p.asked.lines.Take()-1, 0), true
	}
	if !ok {
		return err
	}
	if held > 0 {
		logReload(p.logger, source, err, "not_logged", held)
	} else {
		logReload(p.logger, source, err)
	}
	return err
}
