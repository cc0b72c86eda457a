package mps

import "github.com/vgpu-exporter/vgpu_exporter/gpu"

// Withheld implements gpu.KnobWithholder: without a restart hook no client
// is restarted with a value set for it (SetMPSActiveThreads,
// SetMPSPinnedMemoryLimit), so a client's cap or limit never reaches the
// client. (A server's value would still reach the clients it starts
// later; the tuner sets its clients'.)
func (c *Controller) Withheld(_ string, k gpu.Knob) string {
	if c.opts.RestartHook != "" || (k != gpu.KnobMPSActiveThreads && k != gpu.KnobMPSPinnedMemory) {
		return ""
	}
	return NoRestartHook
}

// NoRestartHook is why a client's active-thread cap (or pinned memory
// limit) is not available without a restart hook.
const NoRestartHook = "no --mps.restart-hook: a running MPS client cannot be changed and nothing would start it with a new value"

// RunsHooks implements gpu.Hooked: a client's restart runs the restart
// hook, where one is configured.
func (c *Controller) RunsHooks() bool { return c.opts.RestartHook != "" }
