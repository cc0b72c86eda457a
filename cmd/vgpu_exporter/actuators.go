package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/kubeevict"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/nvidiasmi"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/rebalance"
	"github.com/vgpu-exporter/vgpu_exporter/internal/flagvalue"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// actuatorConfig is what the command line says about the actuators that
// drive outside programs (the MPS control daemon, nvidia-smi, hooks).
type actuatorConfig struct {
	MPSControlBinary  string
	MPSPipeDirectory  string
	MPSTimeout        time.Duration
	MPSRestartHook    string
	MPSRestartTimeout time.Duration
	NvidiaSMIPath     string
	NvidiaSMITimeout  time.Duration
	RebalanceHook     string
	RebalanceTimeout  time.Duration
	PauseCgroupRoot   string
	PausePeriod       time.Duration
	PauseMax          time.Duration
	// PauseSupervise: the first process supervises the exporter where it
	// may pause (supervise.go), as PID 1 does.
	PauseSupervise bool
	// The built-in Kubernetes eviction's API server and credentials
	// (--tuner.rebalance-hook=builtin:kubernetes-evict).
	EvictAPIServer string
	EvictTokenFile string
	EvictCAFile    string
}

// The flags of the outside programs' timeouts, which the error of a run
// killed by its timeout names.
const (
	flagMPSTimeout        = "mps.timeout"
	flagMPSRestartTimeout = "mps.restart-hook.timeout"
	flagSMITimeout        = "nvidia-smi.timeout"
	flagRebalanceTimeout  = "tuner.rebalance-hook.timeout"
)

// addActuatorFlags declares the actuator flags on app into c.
func addActuatorFlags(app *kingpin.Application, c *actuatorConfig) {
	pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if pipe == "" {
		pipe = mps.DefaultPipeDirectory
	}
	app.Flag("mps.control-binary", "MPS control daemon client used to change MPS active-thread percentages and pinned memory limits; empty disables the MPS actuator.").
		Default(mps.DefaultControlBinary).StringVar(&c.MPSControlBinary)
	app.Flag("mps.pipe-directory", "CUDA_MPS_PIPE_DIRECTORY of the MPS control daemon (the Kubernetes device plugin's daemon of a resource uses /run/nvidia/mps/RESOURCE/pipe, e.g. /run/nvidia/mps/nvidia.com/gpu/pipe). Default: $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps.").
		Default(pipe).PlaceHolder("DIR").StringVar(&c.MPSPipeDirectory)
	flagvalue.Duration(app, flagMPSTimeout, "Timeout of one MPS control daemon command.", mps.DefaultTimeout.String(), &c.MPSTimeout)
	app.Flag("mps.restart-hook", "Program run to restart an MPS client (or switch over to a standby) so that a new active-thread percentage takes effect; called as HOOK TENANT PID GPU_UUID FRACTION (docs/backends.md). Default: none, so a client's active-thread cap is not available (nothing would start the client with it). Not run with --backend=sim (warned of), whose clients restart in the simulation.").
		PlaceHolder("PATH").StringVar(&c.MPSRestartHook)
	flagvalue.Duration(app, flagMPSRestartTimeout, "Timeout of one run of --mps.restart-hook.", mps.DefaultRestartTimeout.String(), &c.MPSRestartTimeout)
	app.Flag("nvidia-smi.path", "nvidia-smi used to set the compute time-slice level (nvidia-smi compute-policy); empty disables the time-slice actuator.").
		Default(nvidiasmi.DefaultPath).StringVar(&c.NvidiaSMIPath)
	flagvalue.Duration(app, flagSMITimeout, "Timeout of one nvidia-smi run.", nvidiasmi.DefaultTimeout.String(), &c.NvidiaSMITimeout)
	app.Flag("tuner.rebalance-hook", "Program that applies a rebalancing plan (tenant moves, MIG layouts) read as JSON on stdin, e.g. deploy/hooks/kubernetes-evict.sh; or "+kubeevict.Name+": the exporter evicts each move's pod through the Kubernetes Eviction API itself (PodDisruptionBudgets hold), with the --tuner.rebalance-hook.kubernetes-* settings. Default: none, so plans are only recommended.").
		PlaceHolder("PATH").StringVar(&c.RebalanceHook)
	flagvalue.Duration(app, flagRebalanceTimeout, "Timeout of one run of --tuner.rebalance-hook.", rebalance.DefaultTimeout.String(), &c.RebalanceTimeout)
	app.Flag("tuner.rebalance-hook.kubernetes-api-server", "The Kubernetes API server ("+kubeevict.Name+"): https://HOST[:PORT].").
		Default(kubeevict.DefaultAPIServer).StringVar(&c.EvictAPIServer)
	app.Flag("tuner.rebalance-hook.kubernetes-token-file", "Bearer token of the evictions ("+kubeevict.Name+"), read again for each: the pod's service account token.").
		Default(kubeevict.DefaultTokenFile).StringVar(&c.EvictTokenFile)
	app.Flag("tuner.rebalance-hook.kubernetes-ca-file", "CA certificates that verify the API server ("+kubeevict.Name+").").
		Default(kubeevict.DefaultCAFile).StringVar(&c.EvictCAFile)
	app.Flag("pause.cgroup-root", "cgroup filesystem whose freezer pauses batch tenants (pause_duty; cgroup v2 there or under unified/, v1 under freezer/); mounted read-write from the host in a container. Empty disables the pause actuator.").
		Default("/sys/fs/cgroup").StringVar(&c.PauseCgroupRoot)
	flagvalue.Duration(app, "pause.period", "Period of a paused tenant's pulse: paused for pause_duty of it, running for the rest; at least "+pause.MinPeriod.String()+" (a freeze takes up to tens of milliseconds to settle, and a shorter period would be spent freezing and thawing).", pause.DefaultPeriod.String(), &c.PausePeriod)
	flagvalue.Duration(app, "pause.max", "Longest a tenant stays paused at once, counted from the write of the freeze (below its liveness probe's and clients' timeouts); at least "+pause.MinMaxPause.String()+" (it caps every pause: a shorter cap holds every duty to a few milliseconds a period), at most --pause.period; 0: 0.9 of --pause.period.", "0s", &c.PauseMax)
	app.Flag("pause.supervise", "Where the tuner may pause (enforce, --tuner.enable-knob=pause_duty, a freezer), the process started stays small and runs the pause watchdog, the exporter its child (the same command), so that a tenant frozen mid-pulse is thawed whatever kills the exporter (docs/pause.md, \"The supervisor\"). PID 1 always does so (but where systemd started it); this is for a container's main process with the host's PIDs (hostPID), whose exit the runtime kills the rest of the container at; the chart sets it. Refused where systemd started the exporter (NOTIFY_SOCKET or LISTEN_FDS set: systemd takes READY=1 from its main process alone, and passes its sockets from fd 3, the pipe's); not needed under the systemd unit, where the watchdog outlives the exporter.").
		BoolVar(&c.PauseSupervise)
}

// validate returns the problems of the actuator flags.
func (c *actuatorConfig) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--" + flagMPSTimeout, c.MPSTimeout}, {"--" + flagMPSRestartTimeout, c.MPSRestartTimeout},
		{"--" + flagSMITimeout, c.NvidiaSMITimeout}, {"--" + flagRebalanceTimeout, c.RebalanceTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	// (a period out of range is its own error: every --pause.max would be
	// out of range of it)
	switch {
	case c.PausePeriod < pause.MinPeriod:
		errs = append(errs, fmt.Errorf("--pause.period must be at least %s (a shorter one would be spent freezing and thawing), got %s", pause.MinPeriod, c.PausePeriod))
	case c.PauseMax != 0 && (c.PauseMax < pause.MinMaxPause || c.PauseMax > c.PausePeriod):
		errs = append(errs, fmt.Errorf("--pause.max must be 0 (0.9 of --pause.period) or between %s and --pause.period, got %s", pause.MinMaxPause, c.PauseMax))
	}
	if c.MPSRestartHook != "" && c.MPSControlBinary == "" {
		errs = append(errs, errors.New("--mps.restart-hook needs the MPS actuator; --mps.control-binary is empty"))
	}
	return errs
}

// detectActuators returns the actuator backends this host has: the GPU
// backend's own, then those of outside programs that are configured and
// answer. On the simulator only the simulator's own are used, after the
// built-in Kubernetes eviction when it is the rebalancing hook
// (simRebalancer): the other programs would change the real host's GPUs
// and processes. Each one missing is logged with the reason at debug
// level, and all of them in the one info line that lists the backends
// found: every one is optional.
//
// src is the GPU backend; its own actuators (NVML: clocks, power, vGPU
// scheduler, MIG; the simulator: all) come first.
func detectActuators(ctx context.Context, cfg *config, src gpu.Source, logger log.Logger) []tuner.NamedActuator {
	out := ownActuator(cfg, src)
	if cfg.Backend == backendSim {
		// The eviction first: every plan goes to it (the simulator still
		// moves processes for it), and the knobs of plans are described so.
		warnSimRestartHook(cfg.Actuators, logger)
		return append(simRebalancer(cfg.Actuators, out, logger), out...)
	}
	a := cfg.Actuators
	var unavailable []string
	missing := func(name string, err error) {
		level.Debug(logger).Log("msg", "actuator not available on this host", "actuator", name, "reason", err)
		unavailable = append(unavailable, name+": "+err.Error())
	}
	if a.MPSControlBinary != "" {
		c, err := mps.Detect(ctx, mpsOptions(a, cfg.ProcRoot, logger))
		if err != nil {
			missing("mps", err)
		} else {
			out = append(out, tuner.NamedActuator{Name: "mps", Impl: c})
		}
	}
	if a.NvidiaSMIPath != "" {
		s, err := nvidiasmi.Detect(ctx, smiOptions(a, logger))
		if err != nil {
			missing("nvidia-smi", err)
		} else {
			out = append(out, tuner.NamedActuator{Name: "nvidia-smi", Impl: s})
		}
	}
	if a.RebalanceHook != "" {
		r, err := rebalancer(a, logger)
		if err != nil {
			// Configured but unusable: say so louder than a tool the host lacks.
			level.Warn(logger).Log("msg", "rebalancing hook not usable; plans are only recommended", "err", err)
		} else {
			out = append(out, tuner.NamedActuator{Name: "rebalance-hook", Impl: r})
		}
	}
	if a.PauseCgroupRoot != "" {
		if p, err := pauser(cfg, logger); err != nil {
			missing("pause", err)
		} else {
			out = append(out, p)
		}
	}
	names := make([]string, len(out))
	for i, b := range out {
		names[i] = b.Name
	}
	kv := []any{"msg", "actuators detected", "backends", fmt.Sprint(names)}
	if len(unavailable) > 0 {
		kv = append(kv, "not_available", strings.Join(unavailable, "; "))
	}
	level.Info(logger).Log(kv...)
	return out
}

// ownActuator is the GPU backend's own actuator, src or a source it
// wraps (none where neither changes anything).
func ownActuator(cfg *config, src gpu.Source) []tuner.NamedActuator {
	for src != nil {
		if tuner.IsActuator(src) {
			return []tuner.NamedActuator{{Name: cfg.Backend, Impl: src}}
		}
		w, ok := src.(interface{ Inner() gpu.Source })
		if !ok {
			break
		}
		src = w.Inner()
	}
	return nil
}

// pauser is the host's pause actuator: the cgroup freezer under
// --pause.cgroup-root, else an error saying why there is none.
func pauser(cfg *config, logger log.Logger) (tuner.NamedActuator, error) {
	a := cfg.Actuators
	// The watchdog is this binary run again: it thaws what a pulse
	// froze when this process dies mid-pulse.
	var watchdog []string
	if exe, err := os.Executable(); err == nil {
		watchdog = []string{exe, pause.WatchdogArg}
	}
	// A supervised exporter's watchdog is its supervisor (supervise.go).
	sup, err := pause.TakeSupervised()
	if err != nil {
		return tuner.NamedActuator{}, err
	}
	p, err := pause.Detect(pause.Options{Period: a.PausePeriod, MaxPause: a.PauseMax, ProcRoot: cfg.ProcRoot,
		Clock: gpu.RealClock{}, Logger: log.With(logger, "component", "pause"), Watchdog: watchdog, Supervisor: sup}, a.PauseCgroupRoot)
	if err != nil {
		return tuner.NamedActuator{}, err
	}
	return tuner.NamedActuator{Name: "pause", Impl: p}, nil
}

// thawActuators are the actuators a start with the tuner off thaws a
// paused tenant through (tuner.StartOff): the GPU backend's own (the
// simulator's pauses its tenants) and, off the simulator, the host's
// freezer; why says, where no freezer is there, why not (StartOff logs
// it). No outside program is asked: none pauses.
func thawActuators(cfg *config, src gpu.Source, logger log.Logger) (_ []tuner.NamedActuator, why error) {
	out := ownActuator(cfg, src)
	switch {
	case cfg.Backend == backendSim:
		return out, nil
	case cfg.Actuators.PauseCgroupRoot == "":
		return out, errors.New("--pause.cgroup-root is empty: no cgroup freezer")
	}
	p, err := pauser(cfg, logger)
	if err != nil {
		return out, fmt.Errorf("--pause.cgroup-root=%s: %w", cfg.Actuators.PauseCgroupRoot, err)
	}
	return append(out, p), nil
}

// rebalancer is the rebalancing hook a.RebalanceHook names: the built-in
// Kubernetes eviction or a program.
func rebalancer(a actuatorConfig, logger log.Logger) (gpu.Rebalancer, error) {
	logger = log.With(logger, "component", "rebalance")
	if a.RebalanceHook == kubeevict.Name {
		return kubeevict.New(evictOptions(a, logger))
	}
	return rebalance.New(rebalanceOptions(a, logger))
}

// mpsOptions are the MPS actuator's options the flags set.
func mpsOptions(a actuatorConfig, procRoot string, logger log.Logger) mps.Options {
	return mps.Options{
		ControlBinary:      a.MPSControlBinary,
		PipeDirectory:      a.MPSPipeDirectory,
		Timeout:            a.MPSTimeout,
		TimeoutName:        "--" + flagMPSTimeout,
		RestartHook:        a.MPSRestartHook,
		RestartTimeout:     a.MPSRestartTimeout,
		RestartTimeoutName: "--" + flagMPSRestartTimeout,
		Processes:          kube.NewProcReader(procRoot), // (a client's identity: restored only where its PID is still its)
		Logger:             log.With(logger, "component", "mps"),
	}
}

// smiOptions are the time-slice actuator's options the flags set.
func smiOptions(a actuatorConfig, logger log.Logger) nvidiasmi.Options {
	return nvidiasmi.Options{Path: a.NvidiaSMIPath, Timeout: a.NvidiaSMITimeout, TimeoutName: "--" + flagSMITimeout,
		Logger: log.With(logger, "component", "nvidia-smi")}
}

// rebalanceOptions are the rebalancing hook's options the flags set.
func rebalanceOptions(a actuatorConfig, logger log.Logger) rebalance.Options {
	return rebalance.Options{Command: a.RebalanceHook, Timeout: a.RebalanceTimeout, TimeoutName: "--" + flagRebalanceTimeout, Logger: logger}
}

// evictOptions are the built-in Kubernetes eviction's options the flags set.
func evictOptions(a actuatorConfig, logger log.Logger) kubeevict.Options {
	return kubeevict.Options{APIServer: a.EvictAPIServer, TokenFile: a.EvictTokenFile, CAFile: a.EvictCAFile,
		Timeout: a.RebalanceTimeout, TimeoutName: "--" + flagRebalanceTimeout, Logger: logger}
}

// simPlans says where plans go on the simulator without a hook: the
// simulator's own placement applies them in the simulation.
func simPlans(own []tuner.NamedActuator) string {
	for _, impl := range tuner.ImplsOf(own) {
		if _, ok := impl.(gpu.PlacementActuator); ok {
			return "plans are applied in the simulation only"
		}
	}
	return "plans are only recommended"
}

// warnSimRestartHook says that --mps.restart-hook is not run on the
// simulator, as simRebalancer says of a rebalancing hook: the program
// would act on the simulated clients' PIDs, and the simulator restarts
// its MPS clients itself.
func warnSimRestartHook(a actuatorConfig, logger log.Logger) {
	if a.MPSRestartHook != "" {
		level.Warn(logger).Log("msg", "MPS restart hook not run on the simulator: a program may act on the clients' PIDs, which are simulated; the simulator restarts its MPS clients itself", "hook", a.MPSRestartHook)
	}
}

// simRebalancer is the rebalancing hook of the simulator backend: only the
// built-in Kubernetes eviction, its moves modelled in the simulator
// (kubeevict.OnSimulator). own are the simulator's actuators
// (detectActuators).
func simRebalancer(a actuatorConfig, own []tuner.NamedActuator, logger log.Logger) []tuner.NamedActuator {
	if a.RebalanceHook == "" {
		return nil
	}
	if a.RebalanceHook != kubeevict.Name {
		level.Warn(logger).Log("msg", "rebalancing hook not run on the simulator: a program may act on the plan's PIDs, which are simulated; only "+kubeevict.Name+" runs here; "+simPlans(own), "hook", a.RebalanceHook)
		return nil
	}
	m, err := kubeevict.OnSimulator(evictOptions(a, log.With(logger, "component", "rebalance")), tuner.ImplsOf(own)...)
	if err != nil {
		level.Warn(logger).Log("msg", "rebalancing hook not usable; "+simPlans(own), "err", err)
		return nil
	}
	level.Info(logger).Log("msg", "rebalancing hook on the simulator: each move's pod is evicted through the real API server, then the move is made in the simulator", "hook", a.RebalanceHook)
	return []tuner.NamedActuator{{Name: "rebalance-hook", Impl: m}}
}
