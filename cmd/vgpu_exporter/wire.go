package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// build opens the backend and the tenants configuration named by cfg and
// returns the service connecting them.
func build(cfg *config, logger log.Logger) (*service, error) {
	_, err := openSource(cfg, gpu.RealClock{}, logger)
	if err != nil {
		return nil, err
	}
	return nil, errors.New("no backend is available in this build")
}

// openSource opens the backend cfg selects.
func openSource(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, error) {
	switch cfg.Backend {
	case backendSim:
		return nil, errors.New("--backend=sim: the simulator is not in this build")
	case backendNVML:
		src, err := openNVML(cfg, clock, logger)
		if err != nil {
			return nil, fmt.Errorf("--backend=nvml: %w", err)
		}
		return src, nil
	default: // auto
		src, err := openNVML(cfg, clock, logger)
		if err != nil {
			return nil, fmt.Errorf("--backend=auto: NVML is not usable on this host (%w); "+
				"to run on the built-in GPU simulator instead, start with --backend=sim", err)
		}
		level.Info(logger).Log("msg", "NVML found; using --backend=nvml")
		return src, nil
	}
}

// openNVML opens the NVML backend.
func openNVML(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, error) {
	return nil, errors.New("this build has no NVML backend")
}

// newCollector is the GPU/tenant collector.
func newCollector(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (prometheus.Collector, error) {
	return collector.NewExporter(snap, logger, filters...)
}

// checkConfig validates a tenants file and prints every error.
func checkConfig(path string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: tenants files cannot be checked by this build\n", path)
	return 1
}
