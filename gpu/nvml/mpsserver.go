package nvml

import (
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/go-kit/log/level"

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
// the daemon that starts the servers. The exe links are read only with
// ptrace read access to the process (the same user and no capability
// the exporter lacks, or CAP_SYS_PTRACE): a root exporter short of the
// daemon's capabilities reads neither. So a process whose identity is not
// read (its exe link, its stat or its parent's exe link: not readable to
// the exporter, gone, a read past its deadline) is taken for the server
// where it is named as one (its name as last read, the name's base
// nvidia-cuda-mps-server): the tuner fails closed, never freezing the
// server, which would stall every MPS client of the GPU; a tenant may
// then escape its pauses by taking the name. Such a process is marked
// (gpu.Process.MPSServerUnverified) and logged once while listed, with
// the remedy. One whose links are read and are not the server's and its
// daemon's is not the server, whatever its name.
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
	named     bool // named as the MPS server
}

// mpsIdentity is what the reads of a process tell of it: whether it is
// taken for the MPS server, and what was not read where it is taken so
// unverified ("" where verified).
type mpsIdentity struct {
	server bool
	unread string
}

// markMPSServers sets MPSServer on the processes of rd that are their
// GPU's MPS server, reading the processes side by side, and
// MPSServerUnverified on those taken for it unread.
func (n *procNames) markMPSServers(rd *gpu.Readings) {
	var reads []mpsServerRead
	for i := range rd.Devices {
		d := &rd.Devices[i]
		if d.Mode != gpu.SharingMPS {
			continue
		}
		for j, p := range d.Processes {
			if p.Type == gpu.ProcessCompute && p.VGPUInstance == 0 {
				reads = append(reads, mpsServerRead{dev: i, proc: j, pid: p.PID, named: filepath.Base(p.Name) == gpu.MPSServerName})
			}
		}
	}
	ids := make([]mpsIdentity, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() { ids[i] = n.mpsServer(r.pid, r.named) })
	}
	wg.Wait()
	for i, r := range reads {
		d := &rd.Devices[r.dev]
		p := &d.Processes[r.proc]
		p.MPSServer, p.MPSServerUnverified = ids[i].server, ids[i].server && ids[i].unread != ""
		if p.MPSServerUnverified {
			n.sayUnverified(r.pid, d, ids[i].unread)
		}
	}
}

// sayUnverified logs, once while it is listed, process pid of d taken for
// its MPS server unverified, unread not read.
func (n *procNames) sayUnverified(pid uint32, d *gpu.Device, unread string) {
	if n.firstSaid(n.unverified, pid) {
		level.Warn(n.logger).Log("msg", "a process named as the MPS server is taken for it unverified: its pauses are refused, as the server's, and a tenant's process so named escapes its pauses; grant the exporter CAP_SYS_PTRACE (read access to /proc/PID/exe only) to verify it",
			"pid", pid, "gpu", d.Index, "uuid", d.UUID, "not_read", unread)
	}
}

// mpsServer says whether process pid's executable is the MPS server's and
// its parent's the MPS control daemon's; where either is not read, whether
// it is named as the server (named), unverified.
func (n *procNames) mpsServer(pid uint32, named bool) mpsIdentity {
	unread := func(what string) mpsIdentity {
		if !named {
			return mpsIdentity{}
		}
		return mpsIdentity{server: true, unread: what}
	}
	is, err := n.executable(pid, gpu.MPSServerName)
	if err != nil {
		return unread("its executable (/proc/PID/exe): " + err.Error())
	}
	if !is {
		return mpsIdentity{}
	}
	stat, err := n.readFile(pid, "stat", maxProcStat)
	if err != nil {
		return unread("its parent (/proc/PID/stat): " + err.Error())
	}
	ppid, ok := procread.ParentPID(stat)
	if !ok {
		return unread("its parent (/proc/PID/stat): field 4 not read")
	}
	if ppid <= 1 {
		return mpsIdentity{}
	}
	is, err = n.executable(ppid, gpu.MPSControlName)
	if err != nil {
		return unread("its parent's executable (/proc/" + strconv.FormatUint(uint64(ppid), 10) + "/exe): " + err.Error())
	}
	return mpsIdentity{server: is}
}

// executable says whether process pid's executable (the target of its
// exe link, " (deleted)" where the file was replaced since) is named name,
// or fails where the link is not read.
func (n *procNames) executable(pid uint32, name string) (bool, error) {
	path := filepath.Join(n.root, strconv.FormatUint(uint64(pid), 10), "exe")
	b, err := n.reads.Read(int(pid), "exe", func() ([]byte, error) {
		s, err := n.link(path)
		return []byte(s), err
	})
	if err != nil {
		return false, err
	}
	return filepath.Base(strings.TrimSuffix(string(b), " (deleted)")) == name, nil
}
