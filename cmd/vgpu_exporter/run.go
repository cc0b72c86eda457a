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
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/exposition"
	"github.com/vgpu-exporter/vgpu_exporter/gcpace"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
	"github.com/vgpu-exporter/vgpu_exporter/pipeline"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// service is the running exporter: the pipeline (sampler -> builder ->
// store), the tuner beside it, and the HTTP server.
type service struct {
	*pipeline.Pipeline
	logger log.Logger
	src    gpu.Source
	// tuner is nil when --tuner.mode is off on every GPU.
	tuner *tuner.Runner
	// collectorErrs are the collectors' errors logged, shared by the
	// collector of each collect[] scrape and the one rendered per snapshot.
	collectorErrs *collector.Errors
	// web is --web.config.file kept last good; nil without one.
	web *webconf.Kept
	// webChecks ticks the checks of web for a change; nil: every
	// webconf.CheckInterval of the wall clock.
	webChecks <-chan time.Time
}

// newService connects src to builder through a sampler on clock.
func newService(src gpu.Source, b pipeline.Builder, tenantsFile string, clock gpu.Clock, interval time.Duration, logger log.Logger) *service {
	return &service{Pipeline: pipeline.New(src, b, tenantsFile, clock, interval, logger), logger: logger, src: src,
		collectorErrs: collector.NewErrors()}
}

// collectorFunc builds the GPU/tenant collector over a snapshot getter.
type collectorFunc func(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (prometheus.Collector, error)

// shutdownTimeout bounds the shutdown after SIGINT/SIGTERM: HTTP requests
// in flight, the sampler, the builder's background work, a reload in
// progress and closing the backend. What has not finished by then is
// abandoned and the process exits. The tuner's restore, which comes first,
// has its own deadline (--tuner.restore-timeout).
var shutdownTimeout = 10 * time.Second // (a variable for the tests)

// httpShutdownTimeout is the part of shutdownTimeout given to requests in
// flight.
const httpShutdownTimeout = 5 * time.Second

// closeAfterRestore is what the shutdown is given after a restore that
// ended past shutdownTimeout (and after lateAfterRestore's wait): the
// backend's close waits for the restore (the originals are set back
// through it), and would otherwise be abandoned.
const closeAfterRestore = 5 * time.Second

// lateAfterRestore bounds the wait, after the tuner's restore has
// returned, for what its exit left running past --tuner.restore-timeout
// (a close, a restore stuck, the round stuck at exit, a hook, the node
// lock's release: tuner.Runner.Late), whose ends the tuner logs: the
// backend's close and the exit wait for it, or name what still runs.
// The late closes' own bound; with closeAfterRestore, 10 s past the
// restore's, within the chart's grace period (15 s past it). A variable
// for the tests.
var lateAfterRestore = 5 * time.Second

// about is what the landing page shows, now.
func (s *service) about(cfg *config) webui.About {
	a := webui.About{Backend: s.src.Name(), TunerMode: string(tuner.ModeOff)}
	if a.Backend == "sim" {
		a.Simulated, a.Scenario = true, cfg.SimScenario
	}
	st, snap := s.tunerStatus(), s.Published()
	if st != nil {
		a.TunerMode, a.TunerPolicy = string(st.Mode), st.Policy
		a.TunerGPUModes = map[string]string{}
		for g, m := range st.GPUModes {
			a.TunerGPUModes[g] = string(m)
		}
		a.TunerGPUs = webui.TunerGPUsOf(st, snap)
		a.KillSwitch = st.KillSwitch
	}
	if snap != nil {
		a.Sampled = true
		for _, t := range snap.Tenants {
			a.Tenants = append(a.Tenants, t.Name)
		}
	}
	return a
}

// logServing says, once, what is served where: the line a newcomer
// reads first to know where to look. It is written at start, once the
// listeners are bound (a port taken logs no such line, only the error),
// as the GPUs are first read (the sampler has started): its tuner_mode
// is the flags' (webui.About.FlaggedTunerModes), said so where a GPU has
// a mode of its own; the landing page says the modes applied.
func (s *service) logServing(cfg *config) {
	a := s.about(cfg)
	address, bases := servingPlaces(*cfg.Web.WebListenAddresses, cfg.systemdSocket(), s.web != nil && s.web.TLS())
	kv := []any{"msg", "serving", "address", address, "backend", a.Backend, "tuner_mode", a.FlaggedTunerModes()}
	if a.Simulated {
		kv = append(kv, "simulated_scenario", a.Scenario)
	}
	for _, base := range bases {
		kv = append(kv, "landing_page", base+"/", "metrics", base+cfg.TelemetryPath)
		if s.tuner != nil {
			kv = append(kv, "tuner_page", base+webui.TunerPagePath)
		}
	}
	level.Info(s.logger).Log(kv...)
}

// servingPlaces is what the serving line names: the listen addresses and
// the base URL of each (https where the web configuration sets up TLS);
// with systemd socket activation, which ignores the listen addresses, it
// says so and names no URL.
func servingPlaces(addrs []string, systemd, tls bool) (address string, bases []string) {
	if systemd {
		return "systemd socket activation (--web.systemd-socket)", nil
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	for _, addr := range addrs {
		base := addr
		if strings.HasPrefix(base, ":") {
			base = "localhost" + base
		}
		if !strings.Contains(base, "://") {
			base = scheme + base
		}
		bases = append(bases, base)
	}
	return strings.Join(addrs, ","), bases
}

// serveError is the HTTP server's error, naming where it listened as the
// serving line does: the listen addresses, or systemd socket activation,
// which ignores them.
func serveError(cfg *config, err error) error {
	systemd := cfg.systemdSocket()
	address, _ := servingPlaces(*cfg.Web.WebListenAddresses, systemd, false)
	if !systemd {
		address = "--web.listen-address=" + address
	}
	return fmt.Errorf("HTTP server (%s): %w", address, err)
}

// webLog is the logger of the web configuration's reloads and checks.
func (s *service) webLog() log.Logger {
	return log.With(s.logger, "component", "web", "web_config_file", s.web.File())
}

// watchWeb checks the web configuration for a change at each tick of
// ticks until ctx is done, logging each change found once: the file (or a
// file it names) that stays as it was, good or bad, is not logged again,
// and a failure of the system's, retried at each check, is logged again
// only when its error changes.
func (s *service) watchWeb(ctx context.Context, ticks <-chan time.Time) {
	wlog := s.webLog()
	inMemory := s.web.InMemory()
	s.web.Watch(ctx, ticks, func(err error) {
		if err != nil {
			level.Error(wlog).Log("msg", webFailedMsg(inMemory, err), "err", err)
			return
		}
		level.Info(wlog).Log("msg", "web configuration changed; now in use")
	})
}

// webFailedMsg is the log message of a change that a check failed to put
// in use: a failure of the system's (webconf.SystemFailure: out of
// descriptors or memory), retried at each check, is told apart from a
// change found invalid, the file's, and from one refused until a restart
// (webconf.ErrRestart: TLS turned on or off, basic auth or a required
// client certificate dropped): where the exporter keeps copies in memory
// the last good configuration stays in use, elsewhere exporter-toolkit
// reads the file as it is.
func webFailedMsg(inMemory bool, err error) string {
	switch {
	case errors.Is(err, webconf.ErrRestart) && inMemory:
		return "web configuration changed in a way that takes a restart; keeping the last good configuration until then"
	case errors.Is(err, webconf.ErrRestart):
		return "web configuration changed in a way that takes a restart; exporter-toolkit reads the file as it is (no in-memory copy): the change is in use"
	case !webconf.SystemFailure(err) && inMemory:
		return "web configuration changed but is invalid; keeping the last good configuration"
	case !webconf.SystemFailure(err):
		return "web configuration changed but is invalid; " + webconf.InvalidInUse
	case inMemory:
		return "could not make the in-memory copy (the system's failure, not the file's): retried at each check; the last good configuration stays in use"
	}
	return "could not validate the change (the system's failure, not the file's): retried at each check; exporter-toolkit reads the file as it is (no in-memory copy): the change is in use"
}

// serve runs the sampler and the HTTP server until ctx is done or the
// server fails, then stops both and closes the source. hup delivers reload
// requests (SIGHUP). Once ctx is done, it restores the tuner's originals
// (within --tuner.restore-timeout) and returns within shutdownTimeout of ctx's end,
// or within lateAfterRestore and closeAfterRestore of the restore's end when
// that is later, whatever the backend, the builder, a reload or what the
// tuner's exit left running is doing.
func (s *service) serve(ctx context.Context, cfg *config, newCollector collectorFunc, hup <-chan os.Signal) error {
	wlog := log.With(s.logger, "component", "web")
	flags := *cfg.Web
	if s.web != nil {
		// exporter-toolkit reads the file it is given again for every
		// request and TLS handshake: it is given the copy kept last good,
		// which a reload replaces. Its errors name the line, this the file.
		wlog = s.webLog()
		kept := s.web.Path()
		flags.WebConfigFile = &kept
		// SIGHUP and POST /-/reload reread it before the tenants file.
		s.AlsoReload("web configuration", s.web, wlog)
	}
	slogger := newSlogLogger(wlog, slogLevel(cfg.LogLevel))
	var self *exposition.Self
	if !cfg.DisableExporterMetrics {
		self = selfRegistry()
	}
	if s.web != nil {
		// The web configuration's reloads and certificates are the
		// exporter's security, not its runtime: served with
		// --web.disable-exporter-metrics too.
		if self == nil {
			self = exposition.NewSelf()
		}
		self.MustRegister(s.web.Collector())
	}
	clog := log.With(s.logger, "component", "collector")
	pageInfo := tunerPageInfoOf(cfg)
	h, err := newHandler(handlerOptions{
		TelemetryPath:    cfg.TelemetryPath,
		Self:             self,
		NoRequestMetrics: cfg.DisableExporterMetrics,
		NewCollector: func(filters ...string) (prometheus.Collector, error) {
			return s.withTuner(newCollector, clog, filters)
		},
		MaxRequests:   cfg.MaxRequests,
		Logger:        s.logger,
		Ready:         s.Ready,
		Reload:        func() error { return s.ReloadAsked("http") },
		Version:       s.Version,
		Subscribe:     s.Subscribe,
		TunerPage:     webui.NewTunerPage(s.Snapshot, s.tunerStatus, pageInfo, log.With(s.logger, "component", "web")),
		TunerPageInfo: pageInfo,
		About:         func() webui.About { return s.about(cfg) },
	})
	if err != nil {
		return err
	}
	// Each publication allocates about the live heap: a floor of headroom
	// keeps a collection from running after nearly every one of them.
	s.Subscribe(gcpace.New(gcpace.Floor, gcpace.MaxPercent).Adjust)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	waitPipeline := s.Start(ctx)
	if s.tuner != nil {
		wg.Go(func() { s.tuner.Run(ctx) })
	}
	wg.Go(func() { s.ReloadOnSignal(ctx, hup) })
	if s.web != nil {
		ticks := s.webChecks
		if ticks == nil {
			ticker := time.NewTicker(webconf.CheckInterval)
			defer ticker.Stop()
			ticks = ticker.C
		}
		wg.Go(func() { s.watchWeb(ctx, ticks) })
	}

	// A server per listener: exporter-toolkit wraps a server's handler in
	// the web configuration as it serves a listener (httplimit.Group).
	servers := httplimit.NewGroup(h, httplimit.FitOpenFiles(cfg.httpLimits(), s.logger), log.With(s.logger, "component", "web"))
	ready := notifyReadyOnServe(s.logger)
	var serving sync.Once
	servers.Prepare = func(srv *http.Server) {
		// The listeners are bound and the web configuration read.
		serving.Do(func() { s.logServing(cfg) })
		ready(srv)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- servers.ListenAndServe(&flags, slogger) }()

	var result error
	bound := stopBound(cfg.Tuner.RestoreTimeout, s.tuner != nil)
	select {
	case <-ctx.Done():
		level.Info(s.logger).Log("msg", "shutting down", "timeout", bound)
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			result = serveError(cfg, err)
		}
		serveErr <- err // for the shutdown below, which waits for it
	}
	notifyStopping(s.logger, bound)
	cancel()
	// The restore comes first, on its own deadline (--tuner.restore-timeout): what
	// else is stuck (a request, a background read, the builder) cannot
	// keep the originals from being set back.
	var restoreErr error // written before restored closes
	restored := make(chan struct{})
	lateEnded := make(chan struct{}) // what the tuner's exit left running has ended, or the wait for it
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
		if err := servers.Shutdown(sctx); err != nil {
			level.Warn(s.logger).Log("msg", "HTTP shutdown", "err", err)
		}
		scancel()
		<-serveErr
		if s.web != nil {
			s.web.Close() // exporter-toolkit is done with it
		}
		wg.Wait()
		// The builder's loops (latency scrapes of sim:// sources, the
		// kubelet mapping) may still be using the source; they end soon
		// after cancel.
		waitPipeline()
		<-lateEnded // before the backend closes: the originals are set back through it
		if err := s.src.Close(); err != nil {
			level.Warn(s.logger).Log("msg", "closing the backend", "backend", s.src.Name(), "err", err)
		}
	}()
	<-restored
	result = errors.Join(result, restoreErr)
	s.awaitTunerLate()
	close(lateEnded)
	if late := time.Now().Add(closeAfterRestore); late.After(deadline) {
		deadline = late // the backend's close waited for the restore and what its exit left running
	}
	select {
	case <-stopped:
	case <-time.After(time.Until(deadline)):
		level.Warn(s.logger).Log("msg", "shutdown did not finish in time; exiting anyway", "timeout", shutdownTimeout)
	}
	return result
}

// awaitTunerLate waits, up to lateAfterRestore, for what the tuner's exit
// left running past --tuner.restore-timeout, whose ends it logs, and
// names what still runs where it gives up: the process exits without it
// (its error, the exit status, as the restore left them).
func (s *service) awaitTunerLate() {
	if s.tuner == nil {
		return
	}
	running := s.tuner.Late()
	if len(running) == 0 {
		return
	}
	level.Warn(s.logger).Log("msg", "shutting down: waiting for what the tuner's exit left running past --tuner.restore-timeout; each end is logged", "timeout", lateAfterRestore, "running", strings.Join(running, "; "))
	ctx, cancel := context.WithTimeout(context.Background(), lateAfterRestore)
	defer cancel()
	if left := s.tuner.AwaitLate(ctx); len(left) > 0 {
		level.Error(s.logger).Log("msg", "shutting down: what the tuner's exit left running has not ended in time; exiting without it: whether it landed is not known (what the journal holds open is set back at the next start)", "timeout", lateAfterRestore, "running", strings.Join(left, "; "))
		return
	}
	level.Info(s.logger).Log("msg", "shutting down: what the tuner's exit left running has ended (each end logged above)")
}

// signals returns a context cancelled on SIGINT or SIGTERM and a channel of
// SIGHUPs.
func signals(parent context.Context) (context.Context, <-chan os.Signal, func()) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return ctx, hup, func() { stop(); signal.Stop(hup) }
}

// reapOrphans reaps, until the func it returns is called, the orphans
// the kernel gives the exporter as the first process of its PID
// namespace (internal/reap): in a container without an init, each would
// otherwise stay a zombie until the container ends.
func reapOrphans(logger log.Logger) func() {
	level.Info(logger).Log("msg", "running as PID 1: orphaned processes are reaped")
	return reap.Background(func(r reap.Reaped) {
		level.Debug(logger).Log("msg", "reaped an orphaned process", "pid", r.PID, "status", r.Status)
	})
}

// startupInfo logs what is starting, in the usual exporter style.
func startupInfo(logger log.Logger, cfg *config) {
	level.Info(logger).Log("msg", "Starting vgpu_exporter", "version", version.Info())
	level.Info(logger).Log("msg", "Build context", "build_context", version.BuildContext())
	level.Info(logger).Log("msg", "Configuration", "backend", cfg.Backend, "sample_interval", cfg.SampleInterval)
}
