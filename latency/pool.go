package latency

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/headercap"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
)

// Options configure a Pool.
type Options struct {
	// Clock is the model time; nil means gpu.RealClock{}.
	Clock gpu.Clock
	// Logger receives source failures and recoveries; nil discards.
	Logger log.Logger
	// AppMetrics serves sources with sim://<app> URLs (the simulator); nil
	// otherwise.
	AppMetrics gpu.AppMetricsSource
	// HTTPClient reads http(s) sources; nil means a default client. The
	// Pool reads through a copy of its Transport (of
	// http.DefaultTransport where it has none) whose answers' headers
	// may hold at most headercap.MaxBytes; another kind of RoundTripper
	// is used as it is.
	HTTPClient *http.Client
}

// Pool keeps one tracker per named source and scrapes them: on their own
// goroutines every scrape interval after Start (the first scrapes of
// sources started together spread over one interval), or all at once in
// the caller's goroutine on Refresh. Status never waits on a scrape.
type Pool struct {
	clock   gpu.Clock
	logger  log.Logger
	scraper *scraper

	// failLogged holds the sources (tenant and URL) whose failure was
	// logged and whose recovery is not yet: whichever tracker logged it,
	// the one that reads the source when it comes back (a reload that
	// restarts its counters gives it a new tracker) logs the recovery.
	// Only the sources of the last Set's specs are kept.
	logMu      sync.Mutex
	failLogged map[logKey]bool

	mu         sync.Mutex // guards everything below
	interval   time.Duration
	trackers   map[string]*sloTracker // by name
	trackerKey map[string]string
	epochs     uint64 // the last Status.Epoch given to a tracker
	cancels    map[string]context.CancelFunc
	runCtx     context.Context
	// loops counts the goroutines Start and Set started.
	loops sync.WaitGroup
}

// NewPool returns an empty Pool; it does no I/O.
func NewPool(opts Options) *Pool {
	opts.Clock = cmp.Or[gpu.Clock](opts.Clock, gpu.RealClock{})
	opts.Logger = cmp.Or(opts.Logger, log.NewNopLogger())
	opts.HTTPClient = cmp.Or(opts.HTTPClient, &http.Client{})
	return &Pool{
		clock:      opts.Clock,
		logger:     opts.Logger,
		scraper:    &scraper{httpc: headercap.Client(opts.HTTPClient), app: opts.AppMetrics, clock: opts.Clock},
		failLogged: map[logKey]bool{},
		trackers:   map[string]*sloTracker{},
		trackerKey: map[string]string{},
		cancels:    map[string]context.CancelFunc{},
	}
}

// Set makes specs the tracked sources, scraped every scrapeInterval. A
// name whose Key did not change keeps its tracker; the others start anew
// (and, once started, get their own loop, their first scrapes spread
// over one interval: startTrackersLocked) under the next Status.Epoch,
// keeping the Retry-After wait of a tracker of the same URL; names not in
// specs are dropped and their loops stopped.
func (p *Pool) Set(specs []Spec, scrapeInterval time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval = scrapeInterval
	waits := retryWaits(p.trackers, p.clock.Now())
	keep := map[string]bool{}
	sources := map[logKey]bool{}
	var started []string // the names given new trackers
	for _, sp := range specs {
		keep[sp.Name] = true
		sources[logKey{sp.Name, sp.Source.URL}] = true
		if tr, ok := p.trackers[sp.Name]; ok && p.trackerKey[sp.Name] == sp.Key {
			tr.setInterval(scrapeInterval)
			continue
		}
		p.stopLocked(sp.Name)
		tr := newSLOTracker(sp)
		p.epochs++
		tr.setEpoch(p.epochs)
		tr.setInterval(scrapeInterval)
		if old, ok := p.trackers[sp.Name]; ok && old.src.URL == sp.Source.URL {
			tr.keepSourceState(old)
		}
		if w, ok := waits[sp.Source.URL]; ok {
			tr.keepWaiting(w)
		}
		p.trackers[sp.Name] = tr
		p.trackerKey[sp.Name] = sp.Key
		started = append(started, sp.Name)
	}
	for name := range p.trackers {
		if !keep[name] {
			p.stopLocked(name)
			delete(p.trackers, name)
			delete(p.trackerKey, name)
		}
	}
	p.logMu.Lock()
	maps.DeleteFunc(p.failLogged, func(k logKey, _ bool) bool { return !sources[k] })
	p.logMu.Unlock()
	p.startTrackersLocked(started)
}

func (p *Pool) stopLocked(name string) {
	if cancel, ok := p.cancels[name]; ok {
		cancel()
		delete(p.cancels, name)
	}
}

// Status returns the latest status of the named source (a fresh copy);
// false when the Pool does not track it.
func (p *Pool) Status(name string) (Status, bool) {
	p.mu.Lock()
	tr, ok := p.trackers[name]
	p.mu.Unlock()
	if !ok {
		return Status{}, false
	}
	return tr.Status(), true
}

// Start begins scraping each source every scrape interval, on the Pool's
// clock, until ctx ends; sources that a later Set adds get their loop too.
// Start returns at once; a second call does nothing.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runCtx != nil {
		return
	}
	p.runCtx = ctx
	p.startTrackersLocked(slices.Collect(maps.Keys(p.trackers)))
}

// Wait blocks until every goroutine Start (and Set while running) started
// has returned, which they do once Start's context ends.
func (p *Pool) Wait() { p.loops.Wait() }

// startTrackersLocked starts the loops of the named trackers, which start
// together (Start, or the trackers one Set adds), once started: their
// first scrapes are spread evenly over one scrape interval, in the order
// of their names (the first at once), so that their scrapes, and the
// memory each takes while it decodes, do not come together at every
// interval.
func (p *Pool) startTrackersLocked(names []string) {
	if p.runCtx == nil {
		return
	}
	slices.Sort(names)
	for i, name := range names {
		tr := p.trackers[name]
		first := p.interval * time.Duration(i) / time.Duration(len(names))
		ctx, cancel := context.WithCancel(p.runCtx)
		p.cancels[name] = cancel
		p.loops.Add(1)
		go func() {
			defer p.loops.Done()
			p.trackerLoop(ctx, tr, first)
		}()
	}
}

// Refresh scrapes every source once now, in the caller's goroutine.
// Offline runs in virtual time call it instead of Start.
func (p *Pool) Refresh(ctx context.Context) {
	p.mu.Lock()
	trs := make([]*sloTracker, 0, len(p.trackers))
	for _, tr := range p.trackers {
		trs = append(trs, tr)
	}
	p.mu.Unlock()
	now := p.clock.Now()
	for _, tr := range trs {
		p.scrape(ctx, tr, now)
	}
}

// logEvery is the least time between two lines about one source's
// failures; what happens meanwhile is counted and summed up in the next.
const logEvery = time.Minute

// scrape reads tr's source once, unless its Retry-After holds it off, and
// logs when it fails after working (or at its first failure), at most once
// per logEvery per source, and when it recovers from a failure that was
// logged (by this tracker or by one it replaced). A panic while scraping is
// recovered here and recorded as the scrape's error, so that no source can
// end the process.
func (p *Pool) scrape(ctx context.Context, tr *sloTracker, now time.Time) {
	if tr.holdOff(now) {
		return
	}
	tr.mu.Lock()
	wasUp := tr.up || tr.errsTotal == 0
	tr.mu.Unlock()
	err := p.scrapeSafely(ctx, tr, now)
	if ctx.Err() != nil {
		return
	}
	st := &tr.logs
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		st.failures++
	}
	due := st.last.IsZero() || now.Sub(st.last) >= logEvery
	switch {
	case err != nil && wasUp && due:
		p.logFailure(tr, now, "latency source failed", err)
	case err != nil && !wasUp && due && st.suppressed > 0:
		// still down after lines were left out: sum them up
		p.logFailure(tr, now, "latency source still failing", err)
	case err == nil && p.noteFailureLogged(tr, false): // (a recovery's, taken)
		level.Info(p.logger).Log("msg", "latency source recovered", "tenant", tr.name)
	case err != nil && wasUp, err == nil && !wasUp:
		st.suppressed++
		p.noteFailureLogged(tr, false)
	}
}

// logKey is a source, in the log lines: its tenant and URL.
type logKey struct{ name, url string }

// noteFailureLogged notes whether the current failure of tr's source was
// logged (its recovery to be logged), and says whether it was noted so
// before.
func (p *Pool) noteFailureLogged(tr *sloTracker, logged bool) (was bool) {
	k := logKey{tr.name, tr.src.URL}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	was = p.failLogged[k]
	if logged {
		p.failLogged[k] = true
	} else {
		delete(p.failLogged, k)
	}
	return was
}

// logFailure writes a failure line for tr, with how many lines were left
// out and scrapes failed since the previous one when lines were left out.
// The caller holds tr.logs.mu.
func (p *Pool) logFailure(tr *sloTracker, now time.Time, msg string, err error) {
	st := &tr.logs
	kv := []any{"msg", msg, "tenant", tr.name, "err", err}
	if st.suppressed > 0 {
		kv = append(kv, "lines_suppressed", st.suppressed, "failed_scrapes", st.failures)
	}
	level.Warn(p.logger).Log(kv...)
	st.last, st.suppressed, st.failures = now, 0, 0
	p.noteFailureLogged(tr, true)
}

// logState is what a source's rate-limited log lines need (whether the
// current failure was logged is the Pool's: failLogged).
type logState struct {
	mu         sync.Mutex
	last       time.Time // when the last failure line was written
	suppressed int       // lines left out since
	failures   int       // failed scrapes since the last failure line
}

func (p *Pool) scrapeSafely(ctx context.Context, tr *sloTracker, now time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: scrape panicked (recovered): %s", urlmask.DisplayURL(tr.src.URL), clip.Text(fmt.Sprint(r), maxErrLen))
			tr.fail(now, err)
		}
	}()
	return p.scraper.scrapeOnce(ctx, tr, now)
}

// trackerLoop scrapes tr every scrape interval, the first time after
// first, until ctx ends.
func (p *Pool) trackerLoop(ctx context.Context, tr *sloTracker, first time.Duration) {
	if first > 0 {
		select {
		case <-ctx.Done():
			return
		case <-p.clock.After(first):
		}
	}
	for {
		start := p.clock.Now()
		p.scrape(ctx, tr, start)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		interval := p.interval
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-p.clock.After(gpu.UntilNext(p.clock, start, interval)):
		}
	}
}
