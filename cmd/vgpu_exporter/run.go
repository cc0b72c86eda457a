package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// snapshotBuilder turns readings into tenant snapshots (tenant.Builder).
type snapshotBuilder interface {
	Build(*gpu.Readings, gpu.SamplerStats) *tenant.Snapshot
	// Reload rereads the tenants file; on error the old one stays.
	Reload(path string) error
}

// starter is implemented by builders with background work (latency
// sources, the kubelet mapping): Start launches it and returns, the work
// runs until ctx is done, and Wait blocks until it has all returned.
type starter interface {
	Start(ctx context.Context)
	Wait()
}

// tenant.Builder must keep satisfying both interfaces: serve finds its
// background work by a type assertion, which would otherwise fail silently.
var (
	_ snapshotBuilder = (*tenant.Builder)(nil)
	_ starter         = (*tenant.Builder)(nil)
)

// service is the running pipeline: sampler -> builder -> store -> HTTP.
type service struct {
	logger  log.Logger
	src     gpu.Source
	sampler *gpu.Sampler
	builder snapshotBuilder
	// tenantsFile is the file a reload rereads; "" when the tenants
	// configuration is built in (or absent) and a reload has nothing to read.
	tenantsFile string
	store       tenant.Store
	ready       atomic.Bool
	reloadMu    sync.Mutex
	// patched is the last copy of the published snapshot that snapshot
	// made to carry newer sampler figures; reusing it while the figures
	// stay the same keeps one pointer per distinct content, which the HTTP
	// handler keys its encodings on.
	patched atomic.Pointer[patchedSnapshot]

	pubMu     sync.Mutex
	onPublish []func()
	// tuner is nil when --tuner.mode is off on every GPU.
	tuner *tuner.Runner
}

type patchedSnapshot struct{ base, snap *tenant.Snapshot }

// newService connects src to builder through a sampler on clock.
func newService(src gpu.Source, b snapshotBuilder, tenantsFile string, clock gpu.Clock, interval time.Duration, logger log.Logger) *service {
	s := &service{logger: logger, src: src, builder: b, tenantsFile: tenantsFile}
	s.sampler = gpu.NewSampler(src, clock, interval, log.With(logger, "component", "sampler"))
	s.sampler.Subscribe(func(r *gpu.Readings) {
		s.store.Store(s.builder.Build(r, s.sampler.Stats()))
		s.ready.Store(true)
		s.pubMu.Lock()
		fs := append([]func(){}, s.onPublish...)
		s.pubMu.Unlock()
		for _, f := range fs {
			f()
		}
	})
	return s
}

// subscribe registers f to run on the sampler's goroutine after each
// snapshot is published.
func (s *service) subscribe(f func()) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.onPublish = append(s.onPublish, f)
}

// version identifies what snapshot returns now: the same pointer for as
// long as the content is the same.
func (s *service) version() any { return s.snapshot() }

// snapshot returns the latest published snapshot (nil before the first).
// Failed samples publish no snapshot, so when the sampler's figures have
// moved on since, it returns a copy carrying the current figures: the
// exported sample error counters stay live while the backend fails.
func (s *service) snapshot() *tenant.Snapshot {
	snap := s.store.Load()
	if snap == nil {
		return nil
	}
	st := s.sampler.Stats()
	if st == snap.Sampler {
		return snap
	}
	if p := s.patched.Load(); p != nil && p.base == snap && p.snap.Sampler == st {
		return p.snap
	}
	c := *snap
	c.Sampler = st
	s.patched.Store(&patchedSnapshot{base: snap, snap: &c})
	return &c
}

// errNothingToReload is what a reload returns when the tenants
// configuration is built in or absent: nothing failed, nothing was read.
var errNothingToReload = errors.New("nothing to reload: the tenants configuration is not read from a file (see --tenants.config)")

// reload rereads the tenants file. Reloads are serialized.
func (s *service) reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.tenantsFile == "" {
		return errNothingToReload
	}
	// The builder refuses (and counts) a FIFO, a device or a huge file
	// swapped in for the tenants file, and one that defines no tenants.
	return s.builder.Reload(s.tenantsFile)
}

// collectorFunc builds the GPU/tenant collector over a snapshot getter.
type collectorFunc func(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (prometheus.Collector, error)

// shutdownTimeout bounds the shutdown after SIGINT/SIGTERM: HTTP requests
// in flight, the sampler, the builder's background work, a reload in
// progress and closing the backend. What has not finished by then is
// abandoned and the process exits. The tuner's restore, which comes first,
// has its own deadline (tuner.RestoreTimeout).
const shutdownTimeout = 10 * time.Second

// httpShutdownTimeout is the part of shutdownTimeout given to requests in
// flight.
const httpShutdownTimeout = 5 * time.Second

// about is what the landing page shows, now.
func (s *service) about(cfg *config) webui.About {
	a := webui.About{Backend: s.src.Name(), TunerMode: string(tuner.ModeOff)}
	if a.Backend == "sim" {
		a.Simulated, a.Scenario = true, cfg.SimScenario
	}
	if st := s.tunerStatus(); st != nil {
		a.TunerMode, a.TunerPolicy = string(st.Mode), st.Policy
	}
	if snap := s.store.Load(); snap != nil {
		a.Sampled = true
		for _, t := range snap.Tenants {
			a.Tenants = append(a.Tenants, t.Name)
		}
	}
	return a
}

// logServing says, once, what is served where: the line a newcomer
// reads first to know where to look.
func (s *service) logServing(cfg *config) {
	a := s.about(cfg)
	kv := []any{"msg", "serving", "backend", a.Backend, "tuner_mode", a.TunerMode}
	if a.Simulated {
		kv = append(kv, "simulated_scenario", a.Scenario)
	}
	for _, addr := range *cfg.Web.WebListenAddresses {
		base := addr
		if strings.HasPrefix(base, ":") {
			base = "localhost" + base
		}
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		kv = append(kv, "metrics", base+cfg.TelemetryPath)
		if s.tuner != nil {
			kv = append(kv, "tuner_page", base+webui.TunerPagePath)
		}
	}
	level.Info(s.logger).Log(kv...)
}

// serve runs the sampler and the HTTP server until ctx is done or the
// server fails, then stops both and closes the source. hup delivers reload
// requests (SIGHUP). Once ctx is done, it restores the tuner's originals
// (within tuner.RestoreTimeout) and returns within shutdownTimeout of ctx's end,
// or as soon as the restore ends when that is later, whatever the backend,
// the builder or a reload is doing.
func (s *service) serve(ctx context.Context, cfg *config, newCollector collectorFunc, hup <-chan os.Signal) error {
	slogger := newSlogLogger(log.With(s.logger, "component", "web"), slogLevel(cfg.LogLevel))
	var self *prometheus.Registry
	if !cfg.DisableExporterMetrics {
		self = selfRegistry()
	}
	clog := log.With(s.logger, "component", "collector")
	h, err := newHandler(handlerOptions{
		TelemetryPath: cfg.TelemetryPath,
		Self:          self,
		NewCollector: func(filters ...string) (prometheus.Collector, error) {
			return s.withTuner(newCollector, clog, filters)
		},
		MaxRequests: cfg.MaxRequests,
		Logger:      s.logger,
		Ready:       s.ready.Load,
		Reload:      s.reload,
		Version:     s.version,
		Subscribe:   s.subscribe,
		TunerPage:   webui.NewTunerPage(s.snapshot, s.tunerStatus, tunerPageInfoOf(cfg), log.With(s.logger, "component", "web")),
		About:       func() webui.About { return s.about(cfg) },
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	st, hasBackground := s.builder.(starter)
	if hasBackground {
		st.Start(ctx)
	}
	wg.Go(func() { s.sampler.Run(ctx) })
	if s.tuner != nil {
		wg.Go(func() { s.tuner.Run(ctx) })
	}
	wg.Go(func() { s.reloadOnSignal(ctx, hup) })

	server := httplimit.NewServer(h, httplimit.FitOpenFiles(cfg.httpLimits(), s.logger), log.With(s.logger, "component", "web"))
	s.logServing(cfg)
	serveErr := make(chan error, 1)
	go func() { serveErr <- web.ListenAndServe(server, cfg.Web, slogger) }()

	var result error
	select {
	case <-ctx.Done():
		level.Info(s.logger).Log("msg", "shutting down", "timeout", shutdownTimeout)
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			result = fmt.Errorf("HTTP server: %w", err)
		}
		serveErr <- err // for the shutdown below, which waits for it
	}
	cancel()
	// The restore comes first, on its own deadline (tuner.RestoreTimeout): what
	// else is stuck (a request, a background read, the builder) cannot
	// keep the originals from being set back.
	var restoreErr error // written before restored closes
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		if s.tuner != nil {
			restoreErr = s.tuner.RestoreAtExit()
		}
	}()
	deadline := time.Now().Add(shutdownTimeout) // wall time: the process's own deadline
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		sctx, scancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		if err := server.Shutdown(sctx); err != nil {
			level.Warn(s.logger).Log("msg", "HTTP shutdown", "err", err)
		}
		scancel()
		<-serveErr
		wg.Wait()
		// The builder's loops (latency scrapes of sim:// sources, the
		// kubelet mapping) may still be using the source; they end soon
		// after cancel.
		if hasBackground {
			st.Wait()
		}
		<-restored // before the backend closes: the originals are set back through it
		if err := s.src.Close(); err != nil {
			level.Warn(s.logger).Log("msg", "closing the backend", "backend", s.src.Name(), "err", err)
		}
	}()
	<-restored
	result = errors.Join(result, restoreErr)
	select {
	case <-stopped:
	case <-time.After(time.Until(deadline)):
		level.Warn(s.logger).Log("msg", "shutdown did not finish in time; exiting anyway", "timeout", shutdownTimeout)
	}
	return result
}

// reloadOnSignal rereads the tenants file on each SIGHUP until ctx is done.
func (s *service) reloadOnSignal(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			switch err := s.reload(); {
			case errors.Is(err, errNothingToReload):
				level.Info(s.logger).Log("msg", "SIGHUP ignored", "reason", err)
			case err != nil:
				level.Error(s.logger).Log("msg", "reload failed, the previous configuration stays in use", "source", "SIGHUP", "err", err)
			default:
				level.Info(s.logger).Log("msg", "reloaded the tenants configuration", "source", "SIGHUP")
			}
		}
	}
}

// signals returns a context cancelled on SIGINT or SIGTERM and a channel of
// SIGHUPs.
func signals(parent context.Context) (context.Context, <-chan os.Signal, func()) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return ctx, hup, func() { stop(); signal.Stop(hup) }
}

// startupInfo logs what is starting, in the usual exporter style.
func startupInfo(logger log.Logger, cfg *config) {
	level.Info(logger).Log("msg", "Starting vgpu_exporter", "version", version.Info())
	level.Info(logger).Log("msg", "Build context", "build_context", version.BuildContext())
	level.Info(logger).Log("msg", "Configuration", "backend", cfg.Backend, "sample_interval", cfg.SampleInterval)
}
