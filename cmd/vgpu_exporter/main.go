// Command vgpu_exporter is a Prometheus exporter of what each tenant really
// gets from GPUs shared by several tenants (MIG, MPS, time-slicing, vGPU).
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
)

func main() {
	// The collector package declares its --collector.* flags on
	// kingpin.CommandLine, so the exporter's flags go there too.
	app := kingpin.CommandLine
	os.Exit(run(context.Background(), app, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args on app and runs the exporter until SIGINT/SIGTERM. It
// returns the process exit status.
func run(ctx context.Context, app *kingpin.Application, args []string, stdout, stderr io.Writer) int {
	app.Name = "vgpu_exporter"
	app.Help = "Prometheus exporter of per-tenant usage of shared GPUs (MIG, MPS, time-slicing, vGPU)."
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
		return checkConfig(cfg.ConfigCheck, stdout, stderr)
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
	startupInfo(logger, cfg)

	// exporter-toolkit reads --web.config.file only once serving; a bad
	// file should stop the start before the backend opens, naming the flag.
	if f := *cfg.Web.WebConfigFile; f != "" {
		if err := web.Validate(f); err != nil {
			level.Error(logger).Log("msg", "cannot start", "err", fmt.Errorf("--web.config.file=%s: %w", f, err))
			return 1
		}
	}
	// Signals are caught before the backend opens: a SIGHUP during a slow
	// start would otherwise end the process (its default action).
	ctx, hup, stop := signals(ctx)
	defer stop()
	svc, err := build(cfg, logger)
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
