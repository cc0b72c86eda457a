package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	gpunvml "github.com/vgpu-exporter/vgpu_exporter/gpu/nvml"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/vmproc"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// build opens the backend and the tenants configuration named by cfg and
// returns the service connecting them.
func build(cfg *config, logger log.Logger) (*service, error) {
	return buildOn(cfg, gpu.RealClock{}, logger)
}

// buildOn is build on a given clock (tests drive a manual one).
func buildOn(cfg *config, clock gpu.Clock, logger log.Logger) (*service, error) {
	src, companion, err := openSource(cfg, clock, logger)
	if err != nil {
		return nil, err
	}
	ts := companion
	if cfg.TenantsConfig != "" {
		ts = tenant.ConfigSource{Path: cfg.TenantsConfig}
	}
	tcfg, err := ts.Load(cfg.TenantsAllowEmpty)
	if err != nil && cfg.TenantsConfig != "" {
		err = fmt.Errorf("--tenants.config: %w", err)
	}
	var check func(*tenant.Config) error
	if s := simulatorOf(src); s != nil {
		check = simTenantsCheck(s)
	}
	if check != nil && err == nil {
		err = check(tcfg)
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	flagPrices, _ := cfg.Metering.prices() // checked by validate
	warnMeteringReplaced(logger, ts.String(), tcfg, &cfg.Metering)
	level.Info(logger).Log("msg", "tenants configuration", "source", ts.String(), "tenants", len(tcfg.Tenants), "prices", tcfg.PricesInUse(flagPrices))
	opts, err := builderIO(cfg, src, clock, log.With(logger, "component", "tenant"))
	if err != nil {
		src.Close()
		return nil, err
	}
	opts.Check = check // a reload is held to what the start was
	b, err := tenant.NewBuilder(tcfg, opts)
	if err != nil {
		src.Close()
		return nil, err
	}
	svc := newService(src, b, ts.Path, clock, cfg.SampleInterval, logger)
	if !cfg.Tuner.active() && cfg.Tuner.Journal != "" {
		thawWithTunerOff(cfg, src, clock, log.With(logger, "component", "tuner"))
	}
	if cfg.Tuner.active() {
		if svc.tuner, err = newTunerRunner(cfg, src, clock, svc.Snapshot, svc.Sampler().Subscribe, log.With(logger, "component", "tuner")); err != nil {
			src.Close()
			return nil, err
		}
	}
	return svc, nil
}

// simTenantsCheck is what a tenants file must meet on the simulator s, at
// start and at each reload: the tuner gets the SLOs the scenario judges
// (sim.Scenario.CheckSLOs) and reads every sim:// source it is given
// (tenant.Config.CheckSimSources).
func simTenantsCheck(s *sim.Simulator) func(*tenant.Config) error {
	return func(c *tenant.Config) error {
		if err := s.Scenario().CheckSLOs(c.File, c.GivenSLO); err != nil {
			return err
		}
		return c.CheckSimSources(s)
	}
}

// builderIO wires the builder's outside world: latency sources (sim:// ones
// read from src when it serves them), /proc under --proc.root, and the
// kubelet mapping when a pod-resources socket (or pod metadata) is set.
func builderIO(cfg *config, src gpu.Source, clock gpu.Clock, logger log.Logger) (tenant.BuilderOptions, error) {
	lopts := latency.Options{Clock: clock, Logger: logger}
	if a, ok := src.(gpu.AppMetricsSource); ok {
		lopts.AppMetrics = a
	}
	opts := tenant.BuilderOptions{
		Clock:   clock,
		Logger:  logger,
		Latency: latency.NewPool(lopts),
		Proc:    kube.NewProcReader(cfg.ProcRoot),

		AllowEmpty:          cfg.TenantsAllowEmpty,
		DepartedRetention:   cfg.DepartedRetention,
		SourcesWhereRunning: cfg.LatencySources == latencySourcesRunning,
	}
	opts.Prices, _ = cfg.Metering.prices() // checked by validate
	if cfg.PodResourcesSocket != "" || cfg.PodMetadata != "" {
		m, err := kube.NewMapper(kube.Options{PodResourcesSocket: cfg.PodResourcesSocket, PodMetadata: cfg.PodMetadata, KubeletAddress: cfg.KubeletAddress,
			BearerTokenFile: cfg.PodMetadataToken, CAFile: cfg.PodMetadataCA, Clock: clock, Logger: logger})
		if err != nil {
			return opts, err
		}
		opts.Pods = m
		opts.PodTenancy = cfg.PodTenancy
		opts.PodInfo = tenant.PodInfoOptions{On: cfg.PodInfo, MaxSeries: int(cfg.PodInfoMaxSeries)}
	}
	return opts, nil
}

// openSource opens the backend cfg selects. For the simulator it also
// returns the scenario's companion tenants file (zero when it has none).
func openSource(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, tenant.ConfigSource, error) {
	switch cfg.Backend {
	case backendSim:
		return openSim(cfg, clock, logger)
	case backendNVML:
		src, err := openNVML(cfg, clock, logger)
		if err != nil {
			return nil, tenant.ConfigSource{}, fmt.Errorf("--backend=nvml: %w", err)
		}
		return src, tenant.ConfigSource{}, nil
	default: // auto
		src, err := openNVML(cfg, clock, logger)
		if err != nil {
			if !strings.Contains(err.Error(), "--backend=sim") {
				err = fmt.Errorf("%w; to run on the built-in GPU simulator instead, start with --backend=sim", err)
			}
			return nil, tenant.ConfigSource{}, fmt.Errorf("--backend=auto found no usable NVIDIA driver, and never serves simulated data by itself: %w", err)
		}
		level.Info(logger).Log("msg", "NVML found; using --backend=nvml")
		return src, tenant.ConfigSource{}, nil
	}
}

// openNVML opens the NVML backend, wrapped by the dcgm-exporter source when
// --backend.dcgm-exporter.url is set.
func openNVML(cfg *config, clock gpu.Clock, logger log.Logger) (gpu.Source, error) {
	// a vGPU's VM by its QEMU process (KVM), for its name and to pause it
	vms := vmproc.New(vmproc.Options{Proc: cfg.ProcRoot, Clock: clock, Logger: log.With(logger, "component", "vmproc")})
	b, err := gpunvml.New(gpunvml.Options{Clock: clock, Logger: log.With(logger, "component", "nvml"), VMs: vms, Proc: cfg.ProcRoot})
	if err != nil {
		return nil, err
	}
	return wrapDCGM(cfg, b, logger)
}

// newCollector is the GPU/tenant collector.
// The tuner's collector is added by the service (withTuner).
func newCollector(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (prometheus.Collector, error) {
	return collector.NewExporter(snap, logger, filters...)
}

// runConfigCheck is --config.check: the tenants file checkConfig checks,
// held with --backend=sim to what a start on the scenario holds it to too
// (simTenantsCheck: a sim:// source of an application the scenario does
// not run is refused by its line, with the start's words). It returns the
// exit status.
func runConfigCheck(cfg *config, stdout, stderr io.Writer) int {
	var check func(*tenant.Config) error
	if cfg.Backend == backendSim {
		s, err := scenarioSim(cfg)
		if err != nil {
			fmt.Fprintln(stderr, err)
			fmt.Fprintf(stderr, "%s: not checked\n", cfg.ConfigCheck)
			return 1
		}
		check = simTenantsCheck(s)
	}
	return checkConfig(cfg.ConfigCheck, cfg.TenantsAllowEmpty, &cfg.Metering, check, stdout, stderr)
}

// scenarioSim is a simulator of the scenario --sim.scenario names, in
// virtual time: what the start's checks of a tenants file read.
func scenarioSim(cfg *config) (*sim.Simulator, error) {
	sc, _, err := resolveScenario(cfg.SimScenario)
	if err != nil {
		return nil, err
	}
	s, err := sim.New(sc, sim.Options{Seed: cfg.SimSeed})
	if err != nil {
		return nil, fmt.Errorf("--sim.scenario=%s: %w", cfg.SimScenario, err)
	}
	return s, nil
}

// checkConfig validates a tenants file and the --metering.* flags of
// metering, and holds a file that reads to check (nil for none), prints
// every error and the prices in use; it returns the exit status.
func checkConfig(path string, allowEmpty bool, metering *meteringConfig, check func(*tenant.Config) error, stdout, stderr io.Writer) int {
	flagPrices, perrs := metering.prices()
	cfg, err := tenant.ConfigSource{Path: path}.Load(allowEmpty)
	if err == nil && check != nil {
		err = check(cfg)
	}
	for _, e := range perrs {
		fmt.Fprintln(stderr, e)
	}
	if err != nil || perrs != nil {
		if err != nil {
			fmt.Fprintln(stderr, err)
		}
		fmt.Fprintf(stderr, "%s: INVALID\n", path)
		return 1
	}
	fmt.Fprintf(stdout, "%s: OK (%d tenants; prices: %s)\n", path, len(cfg.Tenants), cfg.PricesInUse(flagPrices))
	return 0
}
