package nvml

import (
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
)

// An MPS server is a process of its own, listed in its GPU's compute list
// beside its clients (the MPS clients' list), and every MPS client of the
// GPU waits on it: the tuner never pauses it. Its name cannot tell it: the
// name is argv[0] (procname.go), which any process sets (exec -a,
// setproctitle), and a tenant that took the server's would have its
// pauses refused. So the backend tells the server by what a process
// cannot set by renaming itself (gpu.Process.MPSServer): its GPU in MPS
// mode, the process in the compute list, its executable (the target of
// /proc/PID/exe, which exec sets and nothing else) nvidia-cuda-mps-server,
// and its parent's (field 4 of /proc/PID/stat) nvidia-cuda-mps-control,
// the daemon that starts the servers. A process whose files are not read
// (it or its parent gone, not readable to the exporter, a read past its
// deadline) is not taken for the server.
//
// An executable's name is a file's: a tenant can copy a binary under it.
// Its process then needs a parent of the other name, and a GPU context
// outside MPS on a GPU in MPS mode, which a GPU in exclusive-process
// compute mode (as the device plugin's MPS sets it) does not give; a
// tenant that runs an MPS control daemon of its own (with a pipe
// directory of its own) has a server of its own, which serves its own
// clients, and is told as one.

// mpsServerRead is one compute process of a GPU in MPS mode.
type mpsServerRead struct {
	dev, proc int
	pid       uint32
}

// markMPSServers sets MPSServer on the processes of rd that are their
// GPU's MPS server, reading the processes side by side.
func (n *procNames) markMPSServers(rd *gpu.Readings) {
	var reads []mpsServerRead
	for i := range rd.Devices {
		d := &rd.Devices[i]
		if d.Mode != gpu.SharingMPS {
			continue
		}
		for j, p := range d.Processes {
			if p.Type == gpu.ProcessCompute && p.VGPUInstance == 0 {
				reads = append(reads, mpsServerRead{dev: i, proc: j, pid: p.PID})
			}
		}
	}
	servers := make([]bool, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() { servers[i] = n.mpsServer(r.pid) })
	}
	wg.Wait()
	for i, r := range reads {
		rd.Devices[r.dev].Processes[r.proc].MPSServer = servers[i]
	}
}

// mpsServer says whether process pid's executable is the MPS server's and
// its parent's the MPS control daemon's.
func (n *procNames) mpsServer(pid uint32) bool {
	if !n.executable(pid, gpu.MPSServerName) {
		return false
	}
	stat, err := n.readFile(pid, "stat", maxProcStat)
	if err != nil {
		return false
	}
	ppid, ok := procread.ParentPID(stat)
	return ok && ppid > 1 && n.executable(ppid, gpu.MPSControlName)
}

// executable says whether process pid's executable (the target of its
// exe link, " (deleted)" where the file was replaced since) is named name.
func (n *procNames) executable(pid uint32, name string) bool {
	path := filepath.Join(n.root, strconv.FormatUint(uint64(pid), 10), "exe")
	b, err := n.reads.Read(int(pid), "exe", func() ([]byte, error) {
		s, err := n.link(path)
		return []byte(s), err
	})
	if err != nil {
		return false
	}
	return filepath.Base(strings.TrimSuffix(string(b), " (deleted)")) == name
}
