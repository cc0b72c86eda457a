package vmproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
)

// claimant is a process whose command line claims a VM: QEMU's name and
// the VM's "-uuid".
type claimant struct {
	VM
	start  string   // its start time (field 22 of /proc/PID/stat)
	uid    int      // its real UID; -1 when unknown
	cgroup string   // its cgroup path ("" when unknown)
	scope  string   // the virtual machine's scope of systemd-machined it runs in, or ""
	mdevs  []string // the mediated devices its command line names
	// cgroupLate: its cgroup was not read in time at the scan, and is
	// read again at each lookup that examines it until it is
	cgroupLate bool
}

// holding is what /proc/PID/fd says of a process and a vGPU's device.
type holding int8

const (
	holdUnknown holding = iota // no device to look for, or the process's open files unreadable
	holdsNot
	holds
	holdUnanswered // one of its procfs files not read in time: nothing known of it now
)

// How a VM's process is told from other processes that claim its UUID, the
// strongest first:
//
//  1. It holds the vGPU's VFIO device open: the mediated device's group,
//     /dev/vfio/N (N its IOMMU group in sysfs), or its VFIO cdev,
//     /dev/vfio/devices/vfioM (iommufd), as /proc/PID/fd links them. The
//     kernel lets one process at a time open a VFIO group: the holder is
//     the process that runs the vGPU. One whose open files can be read and
//     hold neither is not the VM's, even alone. Reading another user's
//     open files needs CAP_SYS_PTRACE: where they cannot be read, this
//     tells nothing, for or against.
//  2. It runs in a virtual machine's scope that the system's manager made,
//     for a privileged caller: systemd-machined's
//     (machine.slice/machine-*.scope, where libvirt puts its QEMU) or
//     Proxmox VE's (/qemu.slice/VMID.scope, at the root). One under a
//     user's slice or user manager, which the user may make there
//     themselves, is no evidence (systemMachineScope).
//  3. Its command line names the vGPU's mediated device
//     (sysfsdev=/sys/bus/mdev/devices/UUID, as libvirt passes it). Anyone
//     may write that: it only tells apart claimants no stronger evidence
//     does.
//
// A process no other claimant matches at the strongest level that any of
// them reaches is the VM's; where two match (or none holds the device,
// where that could be seen of every one), the VM is nobody's: pausing
// another's process is worse than not pausing the VM. The owner of a
// claimant is logged, not weighed: libvirt's QEMU runs as whatever user
// its configuration names (qemu, libvirt-qemu or root).

// examine reads, without the finder's lock, what procfs says of cs, the
// claimants of the VM k asks for: those that run still (live), whether
// each holds the vGPU's device nodes (held; holdUnanswered for one whose
// files were not read in time, which may be the VM's: it stays a
// claimant), and those nodes.
func (f *Finder) examine(k key, cs []claimant) (live []claimant, held []holding, nodes []string) {
	if len(cs) == 0 {
		return nil, nil, nil
	}
	nodes = f.vgpuNodes(k.mdev)
	for _, c := range cs {
		switch f.still(c.PID, c.UUID, c.start) {
		case running:
			if c.cgroupLate {
				var err error
				if c.cgroup, c.scope, err = f.readCgroup(c.PID); errors.Is(err, procread.ErrStuck) {
					live, held = append(live, c), append(held, holdUnanswered)
					continue
				}
				c.cgroupLate = false
			}
			live, held = append(live, c), append(held, f.holding(c.PID, nodes))
		case unanswered:
			live, held = append(live, c), append(held, holdUnanswered)
		}
	}
	return live, held, nodes
}

// pick returns the process of the VM k asks for among live, the claimants
// that run still (examine's), and whether something about it tells it is
// the VM's (it holds the vGPU's device, runs in a machine scope or names
// the vGPU's mediated device), not only that it alone claims the VM; it
// logs why where the choice was not plain (more than one claimant, or
// none that can be the VM's). final is false where a claimant that did not
// answer in time was chosen, or may have been: nobody's now, decided again
// at the next lookup. The caller holds f.mu.
func (f *Finder) pick(k key, live []claimant, held []holding, nodes []string) (c claimant, ok, sure, final bool) {
	if len(live) == 0 {
		return claimant{}, false, false, true
	}
	i, why := choose(live, held, k.mdev, nodes)
	if i >= 0 && held[i] == holdUnanswered {
		return claimant{}, false, false, false // not confirmed yet
	}
	f.report(k, live, held, i, why)
	if i < 0 {
		return claimant{}, false, false, !slices.Contains(held, holdUnanswered)
	}
	c = live[i]
	sure = held[i] == holds || c.scope != "" || (k.mdev != "" && slices.Contains(c.mdevs, k.mdev))
	return c, true, sure, true
}

// choose returns the index of the VM's process among cs (held: whether
// each holds the vGPU's device nodes; mdev the vGPU's mediated device, ""
// when unknown) and why it is the one; -1 and why when none is.
func choose(cs []claimant, held []holding, mdev string, nodes []string) (int, string) {
	var holders, rest []int
	for i, h := range held {
		switch h {
		case holds:
			holders = append(holders, i)
			rest = append(rest, i)
		case holdUnknown, holdUnanswered:
			rest = append(rest, i)
		}
	}
	dev := strings.Join(nodes, " or ")
	switch {
	case len(holders) == 1:
		return holders[0], "it holds the vGPU's device " + dev
	case len(holders) > 1:
		return -1, fmt.Sprintf("%d of them hold the vGPU's device %s", len(holders), dev)
	case len(rest) == 0:
		return -1, "none of them holds the vGPU's device " + dev
	case len(rest) == 1 && len(cs) > 1:
		return rest[0], "the others do not hold the vGPU's device " + dev
	case len(rest) == 1:
		return rest[0], ""
	}
	rank := func(i int) int {
		r := 0
		if cs[i].scope != "" {
			r += 2
		}
		if mdev != "" && slices.Contains(cs[i].mdevs, mdev) {
			r++
		}
		return r
	}
	best, tops := -1, 0
	for _, i := range rest {
		switch r := rank(i); {
		case best < 0 || r > rank(best):
			best, tops = i, 1
		case r == rank(best):
			tops++
		}
	}
	if tops > 1 {
		return -1, fmt.Sprintf("%d of them are alike in all that tells a VM's process (a machine scope, the vGPU's device held or named)", tops)
	}
	if cs[best].scope != "" {
		return best, "it alone runs in a virtual machine's scope, " + cs[best].scope
	}
	return best, "its command line alone names the vGPU's mediated device " + mdev
}

// vgpuNodes returns the device nodes through which a process holds the
// vGPU of mediated device mdev: its VFIO group (/dev/vfio/N, N the
// device's IOMMU group) and its VFIO cdev (/dev/vfio/devices/vfioM); none
// where mdev is "" or sysfs has neither.
func (f *Finder) vgpuNodes(mdev string) []string {
	if mdev == "" {
		return nil
	}
	dir := filepath.Join(f.sys, "bus", "mdev", "devices", mdev)
	var nodes []string
	if l, err := os.Readlink(filepath.Join(dir, "iommu_group")); err == nil {
		if g := filepath.Base(l); g != "" && strings.Trim(g, "0123456789") == "" {
			nodes = append(nodes, vfioDir+g)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "vfio-dev")); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "vfio") {
				nodes = append(nodes, vfioDir+"devices/"+e.Name())
			}
		}
	}
	return nodes
}

// maxOpenFiles is how many of a process's open files holding looks at:
// a process that holds more (a user's own, with a high limit) costs a
// bounded time, and tells nothing. QEMU opens the
// vGPU's device as it starts, among its first files.
const maxOpenFiles = 16384

// holding says whether process pid has one of nodes open, by the links in
// /proc/PID/fd (at most maxOpenFiles of them), read as readProc reads a
// file (read.go): holdUnanswered where they were not read in time.
func (f *Finder) holding(pid uint32, nodes []string) holding {
	if len(nodes) == 0 {
		return holdUnknown
	}
	b, err := f.bounded(pid, "fd", func(dir string) ([]byte, error) { return f.readLinks(dir, maxOpenFiles) })
	if errors.Is(err, procread.ErrStuck) {
		return holdUnanswered
	}
	for l := range strings.SplitSeq(string(b), "\x00") {
		if l != "" && slices.Contains(nodes, l) {
			return holds
		}
	}
	if err != nil {
		return holdUnknown // another user's (CAP_SYS_PTRACE), gone, or more open files than are looked at
	}
	return holdsNot
}

// errTooManyFiles is fdTargets's error for a process with more open files
// than it looks at.
var errTooManyFiles = errors.New("more open files than are looked at")

// vfioDir holds the device nodes through which a process holds a vGPU
// (vgpuNodes's).
const vfioDir = "/dev/vfio/"

// fdTargets returns the targets of the links in dir, a process's fd
// directory (at most max of them), that are under vfioDir, each ended by
// a NUL byte (which no path holds): a process with many open files costs
// no more memory than it holds vGPUs. With an error (dir unreadable, or
// more than max links in it), those read before it.
func fdTargets(dir string, max int) ([]byte, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var b []byte
	for seen := 0; seen < max; {
		names, err := d.Readdirnames(min(1024, max-seen))
		for _, n := range names {
			if l, err := os.Readlink(filepath.Join(dir, n)); err == nil && strings.HasPrefix(l, vfioDir) {
				b = append(append(b, l...), 0)
			}
		}
		seen += len(names)
		if err == io.EOF || (err == nil && len(names) == 0) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, errTooManyFiles
}

// report logs the choice of a VM's process where it was not plain: the
// VM's process chosen among several claimants, or none; a VM is told of
// once for the same choice, and again when its process is found after
// none was.
func (f *Finder) report(k key, cs []claimant, held []holding, chosen int, why string) {
	descs := make([]string, len(cs))
	for i, c := range cs {
		descs[i] = describe(c, held[i])
	}
	vm, said := k.vm, f.said[k]
	switch {
	case chosen >= 0 && len(cs) == 1:
		if said != "" {
			level.Info(f.logger).Log("msg", "VM's process on the host found", "vm", vm, "pid", cs[chosen].PID)
			delete(f.said, k)
		}
	case chosen >= 0:
		line := fmt.Sprintf("PID %d: %s", cs[chosen].PID, why)
		if line != said {
			others := slices.Delete(slices.Clone(descs), chosen, chosen+1)
			level.Info(f.logger).Log("msg", "VM's process on the host chosen among the processes that claim its UUID",
				"vm", vm, "pid", cs[chosen].PID, "why", why, "passed_over", strings.Join(others, "; "))
			f.said[k] = line
		}
	default:
		line := why + ": " + strings.Join(descs, "; ")
		if line != said {
			level.Warn(f.logger).Log("msg", "VM's process on the host not known: the VM is not named nor paused",
				"vm", vm, "why", why, "claimants", strings.Join(descs, "; "))
			f.said[k] = line
		}
	}
}

// describe names a claimant for the log: its PID, owner, cgroup and what
// its open files say.
func describe(c claimant, h holding) string {
	var facts []string
	if c.uid >= 0 {
		facts = append(facts, "uid "+strconv.Itoa(c.uid))
	}
	if c.cgroup != "" {
		facts = append(facts, "cgroup "+c.cgroup)
	}
	switch h {
	case holds:
		facts = append(facts, "holds the vGPU's device")
	case holdsNot:
		facts = append(facts, "does not hold the vGPU's device")
	case holdUnanswered:
		facts = append(facts, "its procfs files not read in time")
	}
	if len(facts) == 0 {
		return fmt.Sprintf("PID %d", c.PID)
	}
	return fmt.Sprintf("PID %d (%s)", c.PID, strings.Join(facts, ", "))
}
