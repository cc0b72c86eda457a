package mps

import "github.com/vgpu-exporter/vgpu_exporter/gpu"

var _ gpu.ProcessStarter = (*Controller)(nil)

// ProcessStarts implements gpu.ProcessStarter through Options.Processes
// (gpu.ErrNotSupported without it). A client's PID is another's once the
// client exits, and anyone's after a reboot, while the tuner's journal
// outlives both: it journals what this returns beside a client's original
// cap, and restarts the client to set the cap back only where the PID
// still names that process.
func (c *Controller) ProcessStarts(pids []uint32) (string, []uint64, error) {
	if c.opts.Processes == nil {
		return "", nil, gpu.ErrNotSupported
	}
	return c.opts.Processes.ProcessStarts(pids)
}
