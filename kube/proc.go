package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
)

// ProcReader reads process facts (cgroup, command name, user) from a
// procfs root.
type ProcReader struct {
	root string
	host *cgroupfile.Host // the root's self/cgroup: what the kernel lists
}

// NewProcReader reads under root; "" means "/proc".
func NewProcReader(root string) ProcReader {
	if root == "" {
		root = "/proc"
	}
	return ProcReader{root: root, host: cgroupfile.NewHost(filepath.Join(root, "self", "cgroup"))}
}

// MaxProcBytes bounds one procfs file read (cgroup, comm, status: a few
// KiB at most), of a container's process or a VM's (gpu/vmproc).
const MaxProcBytes = 1 << 20

func (p ProcReader) read(pid uint32, name string) ([]byte, error) {
	return fileread.Regular(filepath.Join(p.root, strconv.FormatUint(uint64(pid), 10), name), MaxProcBytes)
}

// Cgroup returns, from one read of /proc/PID/cgroup, the path that best
// identifies the process (see ParseProcCgroup), the system manager's
// service it runs in, "" for none (see SystemdUnit), and whether it names
// no pod's place (see ReadProcCgroup). A file whose hierarchies are not
// those of the reader's own (the root's self/cgroup) is refused: a cgroup
// name with a line break in it forged a line.
func (p ProcReader) Cgroup(pid uint32) (ProcCgroup, error) {
	data, err := p.read(pid, "cgroup")
	if err != nil {
		return ProcCgroup{}, err
	}
	cg, err := ReadProcCgroup(data, p.host)
	if err != nil {
		return ProcCgroup{}, fmt.Errorf("%s/%d/cgroup: %w", p.root, pid, err)
	}
	return cg, nil
}

// CgroupFile returns /proc/PID/cgroup as it reads, every hierarchy's
// line (bounded like every procfs read here).
func (p ProcReader) CgroupFile(pid uint32) ([]byte, error) {
	return p.read(pid, "cgroup")
}

// Comm returns the command name from /proc/PID/comm, or "": the name as
// the process set it (the kernel cuts it to 15 bytes and ends the file
// with a newline), spaces and all, so that " vllm" is not taken for
// "vllm".
func (p ProcReader) Comm(pid uint32) string {
	data, err := p.read(pid, "comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// UID returns the real UID from /proc/PID/status, or -1.
func (p ProcReader) UID(pid uint32) int {
	data, err := p.read(pid, "status")
	if err != nil {
		return -1
	}
	return StatusUID(data)
}

// StatusUID is the real UID (the first field of its "Uid:" line) of the
// contents of /proc/PID/status: a number from 0 to 2^32-2 (2^32-1 is no
// UID), or -1 where there is none.
func StatusUID(status []byte) int {
	for l := range strings.SplitSeq(string(status), "\n") {
		rest, ok := strings.CutPrefix(l, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return -1
		}
		u, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil || u == 1<<32-1 {
			return -1
		}
		return int(u)
	}
	return -1
}

// StartTime returns the start time of process pid (field 22 of
// /proc/PID/stat, clock ticks after boot): with the PID, it names one
// process, which a PID taken again does not share.
func (p ProcReader) StartTime(pid uint32) (string, error) {
	data, err := p.read(pid, "stat")
	if err != nil {
		return "", err
	}
	start, ok := procread.StartTime(data)
	if !ok {
		return "", fmt.Errorf("%s/%d/stat: no start time", p.root, pid)
	}
	return start, nil
}

// BootID returns the host's boot ID (/proc/sys/kernel/random/boot_id
// under the root: a random UUID, new at every boot, the same in every
// namespace): with a process's start time, which counts from the boot, it
// names the process across reboots too.
func (p ProcReader) BootID() (string, error) {
	data, err := fileread.Regular(filepath.Join(p.root, "sys", "kernel", "random", "boot_id"), 64)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// ProcessGone reports whether err is of a process, process group or
// cgroup that no longer exists (ESRCH, or its file gone).
func ProcessGone(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrNotExist)
}

// ProcessStarts implements gpu.ProcessStarter: the host's boot ID and the
// start time of each of pids (StartTime), 0 for one that does not run.
func (p ProcReader) ProcessStarts(pids []uint32) (string, []uint64, error) {
	boot, err := p.BootID()
	if err != nil {
		return "", nil, fmt.Errorf("boot ID: %w", err)
	}
	starts := make([]uint64, len(pids))
	for i, pid := range pids {
		s, err := p.StartTime(pid)
		if ProcessGone(err) {
			continue // not running: 0
		}
		if err == nil {
			starts[i], err = strconv.ParseUint(s, 10, 64)
		}
		if err != nil {
			return "", nil, fmt.Errorf("start time of PID %d: %w", pid, err)
		}
	}
	return boot, starts, nil
}
