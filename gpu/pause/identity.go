package pause

import (
	"fmt"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// ProcessStarts implements gpu.ProcessIdentifier from the procfs root: the
// host's boot ID and each process's start time (field 22 of
// /proc/PID/stat), 0 for one that no longer runs. A PID, once its process
// exits, is another's (and after a reboot, anyone's): the tuner journals
// what this returns beside the PIDs it pauses, so that a thaw after a
// crash passes over a PID that names another process by then, and the
// group (cgroup or process group) found from it is never touched.
func (p *Pauser) ProcessStarts(pids []uint32) (string, []uint64, error) {
	boot, starts, err := kube.NewProcReader(p.r.proc).ProcessStarts(pids)
	if err != nil {
		return "", nil, fmt.Errorf("pause: %w", err)
	}
	return boot, starts, nil
}
