package latency

import (
	"cmp"
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
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
	// HTTPClient reads http(s) sources; nil means a default client.
	HTTPClient *http.Client
}

// Pool keeps one tracker per named source and scrapes them: on their own
// goroutines every scrape interval after Start, or all at once in the
// caller's goroutine on Refresh. Status never waits on a scrape.
type Pool struct {
	clock   gpu.Clock
	logger  log.Logger
	scraper *scraper

	mu         sync.Mutex // guards everything below
	interval   time.Duration
	trackers   map[string]*sloTracker // by name
	trackerKey map[string]string
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
		scraper:    &scraper{httpc: opts.HTTPClient, app: opts.AppMetrics},
		trackers:   map[string]*sloTracker{},
		trackerKey: map[string]string{},
		cancels:    map[string]context.CancelFunc{},
	}
}

// Set makes specs the tracked sources, scraped every scrapeInterval. A
// name whose Key did not change keeps its tracker; the others start anew
// (and, once started, get their own loop); names not in specs are dropped
// and their loops stopped.
func (p *Pool) Set(specs []Spec, scrapeInterval time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval = scrapeInterval
	keep := map[string]bool{}
	for _, sp := range specs {
		keep[sp.Name] = true
		if _, ok := p.trackers[sp.Name]; ok && p.trackerKey[sp.Name] == sp.Key {
			continue
		}
		p.stopLocked(sp.Name)
		tr := newSLOTracker(sp)
		p.trackers[sp.Name] = tr
		p.trackerKey[sp.Name] = sp.Key
		p.startTrackerLocked(sp.Name, tr)
	}
	for name := range p.trackers {
		if !keep[name] {
			p.stopLocked(name)
			delete(p.trackers, name)
			delete(p.trackerKey, name)
		}
	}
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
	for name, tr := range p.trackers {
		p.startTrackerLocked(name, tr)
	}
}

// Wait blocks until every goroutine Start (and Set while running) started
// has returned, which they do once Start's context ends.
func (p *Pool) Wait() { p.loops.Wait() }

func (p *Pool) startTrackerLocked(name string, tr *sloTracker) {
	if p.runCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(p.runCtx)
	p.cancels[name] = cancel
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		p.trackerLoop(ctx, tr)
	}()
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

// scrape reads tr's source once and logs when it fails after working (or
// at its first failure) and when it recovers.
func (p *Pool) scrape(ctx context.Context, tr *sloTracker, now time.Time) {
	tr.mu.Lock()
	wasUp := tr.up || tr.errsTotal == 0
	tr.mu.Unlock()
	err := p.scraper.scrapeOnce(ctx, tr, now)
	if ctx.Err() != nil {
		return
	}
	if err != nil && wasUp {
		level.Warn(p.logger).Log("msg", "latency source failed", "tenant", tr.name, "err", err)
	} else if err == nil && !wasUp {
		level.Info(p.logger).Log("msg", "latency source recovered", "tenant", tr.name)
	}
}

func (p *Pool) trackerLoop(ctx context.Context, tr *sloTracker) {
	for {
		p.scrape(ctx, tr, p.clock.Now())
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		interval := p.interval
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-p.clock.After(interval):
		}
	}
}
