// Command vgpu_exporter is a Prometheus exporter of what each tenant really
// gets from GPUs shared by several tenants (MIG, MPS, time-slicing, vGPU).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"

	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// A SIGHUP before run installs its handlers must not end the process (the
// signal's default action): from here on it is caught, and run's own
// handler decides what it means. Package initialization is the earliest
// point a Go program can do this.
func init() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == pause.WatchdogArg {
		// The pause actuator's watchdog (gpu/pause), run by the exporter.
		os.Exit(pause.RunWatchdog(os.Stdin, os.Stderr))
	}
	// An exporter its supervisor started takes the watchdog pipe it was
	// given before it starts any program, which must not inherit it
	// (supervise.go).
	if _, err := pause.TakeSupervised(); err != nil {
		fmt.Fprintf(os.Stderr, "vgpu_exporter: %v\n", err)
	}
	if len(os.Args) >= 2 && os.Args[1] == journalCommand {
		os.Exit(runJournal(os.Args[2:], os.Stdout, os.Stderr, time.Now))
	}
	// The collector package declares its --collector.* flags on
	// kingpin.CommandLine, so the exporter's flags go there too.
	app := kingpin.CommandLine
	os.Exit(run(context.Background(), app, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args on app and runs the exporter until SIGINT/SIGTERM. It
// returns the process exit status.
func run(ctx context.Context, app *kingpin.Application, args []string, stdout, stderr io.Writer) int {
	app.Name = "vgpu_exporter"
	app.Help = "Prometheus exporter of per-tenant usage of shared GPUs (MIG, MPS, time-slicing, vGPU). 'vgpu_exporter journal --help': the tuner journal's open originals, listed or dropped."
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.Version(version.Print("vgpu_exporter"))
	app.HelpFlag.Short('h')
	cfg := addFlags(app)
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter: %v\n", err)
		return 2
	}
	if cfg.ConfigCheck != "" {
		return runConfigCheck(cfg, stdout, stderr)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter: %v\n", err)
		return 2
	}
	logger, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter: %v\n", err)
		return 2
	}
	if status, ok := superviseIfPausing(cfg, args, logger, stderr); ok {
		return status // (the exporter was this process's child)
	}
	startupInfo(logger, cfg)
	if pause.Supervised() {
		level.Info(logger).Log("msg", "supervised: this process's parent, the container's first process, runs the pause watchdog and reaps orphaned processes", "ppid", os.Getppid())
	}
	notifyStarting(logger, cfg)

	// Signals are caught before anything that may block (reading the web
	// configuration, opening the backend, reading the tenants file): a
	// SIGHUP during a slow start would otherwise end the process, and a
	// SIGTERM must end it whatever the start is waiting on.
	ctx, hup, stop := signals(ctx)
	defer stop()
	if os.Getpid() == 1 && reap.Supported {
		defer reapOrphans(logger)()
	}
	svc, err := interruptible(ctx, func() (*service, error) { return start(cfg, logger) })
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		level.Info(logger).Log("msg", "interrupted while starting")
		return 0
	}
	if err != nil {
		level.Error(logger).Log("msg", "cannot start", "err", err)
		return 1
	}
	if err := svc.serve(ctx, cfg, newCollector, hup); err != nil {
		level.Error(logger).Log("msg", "exiting", "err", err)
		return 1
	}
	return 0
}

// maxWebConfigBytes bounds the size of --web.config.file.
const maxWebConfigBytes = 1 << 20

// start reads the web configuration and builds the service.
func start(cfg *config, logger log.Logger) (*service, error) {
	// A bad --web.config.file stops the start before the backend opens,
	// naming the flag; a good one is kept for exporter-toolkit (webconf).
	var kept *webconf.Kept
	if f := *cfg.Web.WebConfigFile; f != "" {
		var err error
		wlog := log.With(logger, "component", "web", "web_config_file", f)
		warn := func(msg string) { level.Warn(wlog).Log("msg", msg) }
		if kept, err = webconf.Open(f, maxWebConfigBytes, warn); err != nil {
			return nil, fmt.Errorf("--web.config.file=%s: %w", f, err)
		}
	}
	svc, err := build(cfg, logger)
	if err != nil {
		if kept != nil {
			kept.Close()
		}
		return nil, err
	}
	svc.web = kept
	return svc, nil
}

// interruptible returns f's result, or ctx's error as soon as ctx is done
// while f still runs (f is then abandoned: the process is about to exit).
func interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
