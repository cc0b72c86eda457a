package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// supervises says whether this process, pid, supervises the exporter
// (pause.Supervise) rather than being it: where the tuner may pause
// (mayPause), as the first process of its PID namespace, whose exit kills
// every other process there, the watchdog the exporter starts included,
// or with --pause.supervise (a container's main process with the host's
// PIDs, whose exit the runtime kills the container's other processes at).
// An exporter a supervisor started (supervised) never supervises, nor
// one systemd started (underSystemd, env its environment): then the error
// says why, a refusal of --pause.supervise (given, pausing or not), and
// where PID 1 would have supervised, why it does not.
func (c *config) supervises(pid int, supervised bool, env func(string) (string, bool)) (bool, error) {
	if supervised {
		return false, nil
	}
	if c.Actuators.PauseSupervise {
		if err := underSystemd(env); err != nil {
			return false, fmt.Errorf("--pause.supervise: %w", err)
		}
	}
	if !(pid == 1 || c.Actuators.PauseSupervise) || !c.mayPause() {
		return false, nil
	}
	if err := underSystemd(env); err != nil {
		return false, fmt.Errorf("PID 1 does not supervise the exporter: %w", err)
	}
	return true, nil
}

// underSystemd says why a supervisor cannot run where systemd started
// the process (or a manager speaking its protocols), nil where it did
// not: systemd takes READY=1 of a Type=notify unit from its main process
// alone (NotifyAccess=main), not from the supervisor's child, and would
// time the start out; and the sockets it passes (LISTEN_FDS) begin at fd
// 3, the watchdog pipe's in the supervisor's child. The systemd unit needs
// no supervisor: there the watchdog outlives the exporter.
func underSystemd(env func(string) (string, bool)) error {
	for _, v := range []string{"NOTIFY_SOCKET", "LISTEN_FDS"} {
		if _, ok := env(v); ok {
			return fmt.Errorf("%s is set (systemd, or a manager speaking its protocol, started this process): its main process must be the exporter; a pause supervisor runs only as a container's main process", v)
		}
	}
	return nil
}

// mayPause says whether the tuner may freeze a tenant: in enforce (on a
// GPU at least), with the pause knob enabled and a freezer configured,
// off the simulator (which pauses its own tenants). Only the pause
// actuator's restore thaws without it, needing no watchdog.
func (c *config) mayPause() bool {
	mode, err := tuner.ParseMode(c.Tuner.Mode)
	if err != nil {
		return false
	}
	gm, err := c.Tuner.gpuModes()
	if err != nil {
		return false
	}
	return tuner.AnyEnforce(mode, gm) && slices.Contains(c.Tuner.EnabledKnobs, string(gpu.KnobPauseDuty)) &&
		c.Actuators.PauseCgroupRoot != "" && c.Backend != backendSim
}

// superviseIfPausing runs the exporter, args its arguments, as a child
// of this process, which runs its pause watchdog (pause.Supervise), where
// this process supervises (supervises); it returns the exporter's exit
// status, and false where this process is the exporter. Where
// --pause.supervise cannot be (underSystemd) it returns 2, saying why on
// stderr; where PID 1 does not supervise for that, it logs why.
func superviseIfPausing(c *config, args []string, logger log.Logger, stderr io.Writer) (int, bool) {
	ok, err := c.supervises(os.Getpid(), pause.Supervised(), os.LookupEnv)
	if err != nil && c.Actuators.PauseSupervise {
		fmt.Fprintf(stderr, "vgpu_exporter: %v\n", err)
		return 2, true
	}
	if err != nil {
		level.Info(logger).Log("msg", "no pause supervisor", "err", err)
	}
	if !ok {
		return 0, false
	}
	exe, err := os.Executable()
	if err != nil {
		level.Error(logger).Log("component", "pause-supervisor", "msg", "cannot find its own binary to start the exporter", "err", err)
		return 1, true
	}
	return pause.Supervise(exe, args, logger), true
}
