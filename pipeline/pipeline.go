// Package pipeline is the exporter's serving pipeline: a sampler on the
// backend, a builder turning each sample into a tenant snapshot, and the
// store the snapshot is published to, with subscriptions to publications,
// live sampler figures on the published snapshot and serialized reloads of
// the tenants file and of other files (the web configuration).
package pipeline

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Builder turns readings into tenant snapshots (tenant.Builder).
type Builder interface {
	Build(*gpu.Readings, gpu.SamplerStats) *tenant.Snapshot
	// Reload rereads the tenants file; on error the old one stays.
	Reload(path string) error
}

// QuietReloader is a Builder whose reload can leave its success unlogged
// (tenant.Builder): a reload whose lines are held back (ReloadAsked) is
// made through it.
type QuietReloader interface {
	ReloadQuietly(path string) error
}

// Starter is implemented by builders with background work (latency
// sources, the kubelet mapping): Start launches it and returns, the work
// runs until ctx is done, and Wait blocks until it has all returned.
type Starter interface {
	Start(ctx context.Context)
	Wait()
}

// tenant.Builder must keep satisfying both interfaces: Start finds its
// background work by a type assertion, which would otherwise fail silently.
var (
	_ Builder       = (*tenant.Builder)(nil)
	_ Starter       = (*tenant.Builder)(nil)
	_ QuietReloader = (*tenant.Builder)(nil)
)

// ErrNothingToReload is what a reload returns when the tenants
// configuration is built in or absent and no other file is reread
// (AlsoReload): nothing failed, nothing was read.
var ErrNothingToReload = errors.New("nothing to reload: the tenants configuration is not read from a file (see --tenants.config)")

// Pipeline is sampler -> builder -> store.
type Pipeline struct {
	sampler *gpu.Sampler
	builder Builder
	// tenantsFile is the file a reload rereads; "" when the tenants
	// configuration is built in (or absent) and a reload has nothing to read.
	tenantsFile string
	// also are the files each reload rereads before the tenants file.
	also   []alsoReload
	logger log.Logger
	clock  gpu.Clock
	// asked bounds the lines of reloads asked for by clients (ReloadAsked).
	asked    *askedLog
	store    tenant.Store
	ready    atomic.Bool
	reloadMu sync.Mutex
	// reloadsStarted counts the reloads begun (read without reloadMu by
	// a caller arriving); reloadsDone, reloadErr and reloadQuiet, under
	// reloadMu, the reloads finished, the last one's outcome and whether
	// it logged no file's success.
	reloadsStarted atomic.Uint64
	reloadsDone    uint64
	reloadErr      error
	reloadQuiet    bool
	// patched is the last copy of the published snapshot that Snapshot
	// made to carry newer sampler figures; reusing it while the figures
	// stay the same keeps one pointer per distinct content, which the HTTP
	// handler keys its encodings on.
	patched atomic.Pointer[patchedSnapshot]
	// failed are the sampler's figures as of the last failed sample, which
	// Snapshot puts on the snapshot published before it.
	failed atomic.Pointer[gpu.SamplerStats]

	pubMu     sync.Mutex
	onPublish []func()
}

type patchedSnapshot struct{ base, snap *tenant.Snapshot }

// New connects src to b through a sampler on clock every interval;
// tenantsFile is what a reload rereads ("" for nothing).
func New(src gpu.Source, b Builder, tenantsFile string, clock gpu.Clock, interval time.Duration, logger log.Logger) *Pipeline {
	if clock == nil {
		clock = gpu.RealClock{}
	}
	p := &Pipeline{builder: b, tenantsFile: tenantsFile, logger: logger, clock: clock, asked: newAskedLog()}
	p.sampler = gpu.NewSampler(src, clock, interval, log.With(logger, "component", "sampler"))
	p.sampler.Subscribe(func(r *gpu.Readings) {
		p.store.Store(p.builder.Build(r, p.sampler.Stats()))
		p.ready.Store(true)
		p.published()
	})
	p.sampler.SubscribeFailures(func(st gpu.SamplerStats) {
		p.failed.Store(&st)
		if p.store.Load() != nil { // before the first snapshot nothing is served
			p.published()
		}
	})
	return p
}

// published runs the functions subscribed to publications.
func (p *Pipeline) published() {
	p.pubMu.Lock()
	fs := append([]func(){}, p.onPublish...)
	p.pubMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Sampler is the pipeline's sampler.
func (p *Pipeline) Sampler() *gpu.Sampler { return p.sampler }

// Builder is the pipeline's builder.
func (p *Pipeline) Builder() Builder { return p.builder }

// SetBuilder replaces the builder; only before Start and any sample.
func (p *Pipeline) SetBuilder(b Builder) { p.builder = b }

// TenantsFile is the file a reload rereads; "" when there is none.
func (p *Pipeline) TenantsFile() string { return p.tenantsFile }

// Ready reports whether a first snapshot has been published.
func (p *Pipeline) Ready() bool { return p.ready.Load() }

// Published returns the snapshot last published as it was (nil before
// the first), without the sampler's newer figures.
func (p *Pipeline) Published() *tenant.Snapshot { return p.store.Load() }

// Subscribe registers f to run on the sampler's goroutine after each
// snapshot is published, and after each failed sample once one has been
// (Snapshot then carries the failure's figures).
func (p *Pipeline) Subscribe(f func()) {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	p.onPublish = append(p.onPublish, f)
}

// Version identifies what Snapshot returns now: the same pointer for as
// long as the content is the same.
func (p *Pipeline) Version() any { return p.Snapshot() }

// Snapshot returns the latest published snapshot (nil before the first).
// Failed samples publish no snapshot, so when samples have failed since,
// it returns a copy carrying the sampler's figures as of the last failed
// one: the exported sample error counters stay live while the backend
// fails. The figures of a successful sample (its time, the errors reset)
// come with its snapshot, never on the readings of an older one: while
// that snapshot is being built, the last failure's figures stay.
func (p *Pipeline) Snapshot() *tenant.Snapshot {
	snap := p.store.Load()
	if snap == nil {
		return nil
	}
	f := p.failed.Load()
	if f == nil || f.ErrorsTotal <= snap.Sampler.ErrorsTotal {
		return snap
	}
	st := *f
	if c := p.patched.Load(); c != nil && c.base == snap && c.snap.Sampler == st {
		return c.snap
	}
	c := *snap
	c.Sampler = st
	p.patched.Store(&patchedSnapshot{base: snap, snap: &c})
	return &c
}

// Reloader is a file a reload rereads besides the tenants file (the web
// configuration, webconf.Kept): Reload puts it in use when it is valid,
// and otherwise keeps the one in use and says why, naming the file.
type Reloader interface {
	Reload() error
}

type alsoReload struct {
	name   string
	r      Reloader
	logger log.Logger
}

// AlsoReload has every reload reread r, before the tenants file, and log
// through logger, when it succeeds, that name was reloaded; a failure is
// the reload's error, logged once with the others (LogReload). Only before
// Start and any reload.
func (p *Pipeline) AlsoReload(name string, r Reloader, logger log.Logger) {
	p.also = append(p.also, alsoReload{name, r, logger})
}

// Reload rereads the files added by AlsoReload, then the tenants file;
// ErrNothingToReload when there is none. The error joins those of the
// files that failed, each naming its file, which keeps its previous
// configuration; the others are in use. Reloads are serialized, and those
// asked for while one waits share it: a caller gets the outcome of a
// reload that began after it asked (one begun before may have read a file
// before it changed), and a burst of requests costs two reads of the
// files, not one each. A caller whose files' successes are logged shares
// no quiet reload (ReloadAsked's held back): it runs its own.
func (p *Pipeline) Reload() error { return p.reload(false) }

// reload is Reload, logging no file's success when quiet.
func (p *Pipeline) reload(quiet bool) error {
	return p.reloadSince(p.reloadsStarted.Load(), quiet)
}

// reloadSince is reload for a caller that asked when asked reloads had
// begun: it shares a reload begun since, and done, unless that one was
// quiet and this caller is not.
func (p *Pipeline) reloadSince(asked uint64, quiet bool) error {
	if p.tenantsFile == "" && len(p.also) == 0 {
		return ErrNothingToReload
	}
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	if p.reloadsDone > asked && (quiet || !p.reloadQuiet) {
		return p.reloadErr // began after this call asked, and is done
	}
	p.reloadsStarted.Add(1)
	p.reloadErr = p.reloadFiles(quiet)
	p.reloadsDone = p.reloadsStarted.Load()
	p.reloadQuiet = quiet
	return p.reloadErr
}

// reloadFiles rereads each file once, logging the success of each unless
// quiet; called with reloadMu held.
func (p *Pipeline) reloadFiles(quiet bool) error {
	var errs []error
	for _, a := range p.also {
		if err := a.r.Reload(); err != nil {
			errs = append(errs, err)
			continue
		}
		if !quiet {
			level.Info(a.logger).Log("msg", a.name+" reloaded")
		}
	}
	if p.tenantsFile != "" {
		// The builder refuses (and counts) a FIFO, a device or a huge file
		// swapped in for the tenants file, and one that defines no tenants.
		if q, ok := p.builder.(QuietReloader); ok && quiet {
			errs = append(errs, q.ReloadQuietly(p.tenantsFile))
		} else {
			errs = append(errs, p.builder.Reload(p.tenantsFile))
		}
	}
	return errors.Join(errs...)
}

// Start launches the builder's background work (when it has some) and the
// sampler, both until ctx is done; wait blocks until the sampler and the
// builder's background work have returned (the builder's loops, latency
// scrapes of sim:// sources among them, may use the source until then)
// and the summary of reloads held back (ReloadAsked), logged at once
// when ctx is done, has been logged.
func (p *Pipeline) Start(ctx context.Context) (wait func()) {
	st, hasBackground := p.builder.(Starter)
	if hasBackground {
		st.Start(ctx)
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.sampler.Run(ctx) })
	p.asked.stopWith(ctx)
	return func() {
		wg.Wait()
		p.asked.shut()
		p.asked.waiting.Wait() // the summary of reloads held back, logged
		if hasBackground {
			st.Wait()
		}
	}
}

// ReloadOnSignal reloads (Reload) on each SIGHUP from hup until ctx is
// done, logging the outcome (LogReload).
func (p *Pipeline) ReloadOnSignal(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			LogReload(p.logger, "SIGHUP", p.Reload())
		}
	}
}

// LogReload logs the outcome err of a reload asked for by source (SIGHUP,
// http): one line, the same for every source but its name, holding the
// problem of each file that failed, each naming the file.
func LogReload(logger log.Logger, source string, err error) { logReload(logger, source, err, "") }

// logReload is LogReload, the message ending with note, the line with kv.
func logReload(logger log.Logger, source string, err error, note string, kv ...any) {
	switch {
	case errors.Is(err, ErrNothingToReload):
		level.Info(logger).Log(append([]any{"msg", "reload ignored" + note, "source", source, "reason", err}, kv...)...)
	case err != nil:
		level.Error(logger).Log(append([]any{"msg", "reload failed, the files named keep their previous configuration unless their error says otherwise" + note, "source", source, "err", err}, kv...)...)
	default:
		level.Info(logger).Log(append([]any{"msg", "reloaded the configuration" + note, "source", source}, kv...)...)
	}
}
