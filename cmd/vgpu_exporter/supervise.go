package main

import (
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
// An exporter a supervisor started (supervised) never supervises.
func (c *config) supervises(pid int, supervised bool) bool {
	return (pid == 1 || c.Actuators.PauseSupervise) && c.mayPause() && !supervised
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
// status, and false where this process is the exporter.
func superviseIfPausing(c *config, args []string, logger log.Logger, stderr io.Writer) (int, bool) {
	if !c.supervises(os.Getpid(), pause.Supervised()) {
		return 0, false
	}
	exe, err := os.Executable()
	if err != nil {
		level.Error(logger).Log("component", "pause-supervisor", "msg", "cannot find its own binary to start the exporter", "err", err)
		return 1, true
	}
	return pause.Supervise(exe, args, logger), true
}
