// Package kube finds the Kubernetes pod (and container) behind a GPU
// process or device: it parses cgroup paths, reads process facts from
// /proc/PID, and keeps the kubelet's pod-resources mapping (with optional
// pod metadata) fresh on its own goroutine. It knows nothing of tenants.
package kube

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
)

// CgroupInfo is what a process's cgroup path says about where it runs.
type CgroupInfo struct {
	Path        string // the cgroup path (v2 unified, or the chosen v1 hierarchy)
	PodUID      string // Kubernetes pod UID with dashes; "" when not in a pod
	ContainerID string // container ID (hex); "" when not in a container
	Runtime     string // "containerd", "crio", "docker", "" when unknown
	// NoPod: the process's place is known, by more than Path, to be no
	// pod's (ProcCgroup.NoPod of its cgroup file, or a file that could not
	// be read though the process runs): ResolvePod gives it no pod by the
	// devices it runs on. ParseCgroupPath leaves it false.
	NoPod bool
}

var (
	// <runtime>-<id>.scope for systemd-managed containers.
	scopeRE = regexp.MustCompile(`^(cri-containerd|containerd|crio|cri-o|docker|libpod)-([0-9a-fA-F]{12,64})\.scope$`)
	hexIDRE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// Rank is how well the path names a process's workload: 2 where it names
// a pod, 1 a container alone, 0 neither. Of a process's cgroup paths (a
// hybrid host's unified and v1 lines), the higher rank is the process's
// own: a runtime that manages v1 controllers may leave the process in its
// own unified cgroup, its service's, or name only the container there.
func (c CgroupInfo) Rank() int {
	switch {
	case c.PodUID != "":
		return 2
	case c.ContainerID != "":
		return 1
	}
	return 0
}

// ParseCgroupPath extracts the pod UID and container ID from a cgroup path of
// any of the usual forms: cgroupfs ("/kubepods/burstable/pod<uid>/<id>"),
// systemd ("/kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope"),
// CRI-O ("crio-<id>.scope", or "crio-<id>" under cgroupfs), docker
// ("/docker/<id>", "docker-<id>.scope"). A path relative to the reader's
// cgroup namespace (a reader in a pod of its own) gives them the same way:
// under systemd by its slice and scope names, under cgroupfs, where the
// kubepods segment lies above the namespace, by its shape
// ("/../../../burstable/pod<uid>/<id>", see namespacedPodAt).
// A kubepods cgroup below a user's slice or any service (user.slice, a
// user manager's user@UID.service, a service with a subtree delegated to
// it) is one its owner made, and names no pod: the kubelet's is at the
// root, or in a container's or a machine's scope (a node in a container),
// or in the payload of a container that machinectl runs as a service
// (nodeRootAt).
func ParseCgroupPath(path string) CgroupInfo {
	info := CgroupInfo{Path: path}
	segs := strings.Split(path, "/")
	podAt := namespacedPodAt(segs)
	nodeAt := nodeRootAt(segs)
	inKube, inDocker, owned := false, false, false
	for i, s := range segs {
		if i == nodeAt {
			owned = false // a node's root, the service above it the host's
			continue
		}
		if info.PodUID != "" && info.ContainerID != "" {
			// the pod's container was found (a container found above the
			// pod is dropped there): what lies below it is the container's
			// own, which may name its cgroups as it likes (a pod's name,
			// another container's ID among them) and names no pod
			break
		}
		if s == "" {
			continue
		}
		if !inKube && ownedSegment(s) {
			owned = true // what lies below is the user's or the service's to name
		}
		if kubepodsSegment(s) && !owned {
			inKube = true
		}
		if i == podAt {
			inKube = true // the kubepods segment is above the namespace
		}
		// (each expression runs only where its match is possible: they
		// are slow, and a process's path is parsed at every sample)
		if uid := poduid.InCgroup(s); uid != "" && inKube {
			if info.PodUID != "" {
				break // a pod's name within a pod's cgroup: the pod's own
			}
			// the outermost pod, the kubelet's: a container above it is
			// the node's (a node in a container)
			info.PodUID = normalizeUID(uid)
			info.ContainerID, info.Runtime = "", ""
			continue
		}
		if m := scopeSubmatch(s); m != nil {
			info.ContainerID = strings.ToLower(m[2])
			info.Runtime = runtimeName(m[1])
			continue
		}
		if strings.HasPrefix(s, "crio-conmon-") {
			continue // the conmon monitor, not the container
		}
		if id, ok := strings.CutPrefix(s, "crio-"); ok && inKube && len(id) == 64 && hexIDRE.MatchString(id) {
			// CRI-O's container under the cgroupfs driver: crio-<id>, no scope
			info.ContainerID, info.Runtime = strings.ToLower(id), "crio"
			continue
		}
		if s == "docker" {
			inDocker = true
			continue
		}
		if len(s) == 64 && hexIDRE.MatchString(s) && (inKube || inDocker) {
			info.ContainerID = strings.ToLower(s)
			if inDocker && info.Runtime == "" {
				info.Runtime = "docker"
			}
		}
	}
	return info
}

// NamesNoPod says whether a cgroup path places its process somewhere that
// is no pod's: in a user's slice (a login session's scope, a user
// manager's user@UID.service) or in a service, above any kubepods segment
// (ParseCgroupPath takes no pod from below them). Below the payload of a
// container that machinectl runs as a service (nodeRootAt) it is read as
// from a root of its own: a node's. "" (unread), the root, and a path it
// does not recognise are not known to be no pod's.
func NamesNoPod(path string) bool {
	segs := strings.Split(path, "/")
	for _, s := range segs[nodeRootAt(segs)+1:] {
		switch {
		case kubepodsSegment(s):
			return false
		case ownedSegment(s):
			return true
		}
	}
	return false
}

// nodeRootAt is the index in segs (a path split at "/") of the root of a
// container that machinectl (systemd-nspawn@.service) runs, -1 where there
// is none: "payload" below "systemd-nspawn@NAME.service" in machine.slice,
// with only slices above it, from the root (or from the ".." segments of a
// path relative to the reader's cgroup namespace) down, where the system's
// manager alone puts the service. Its payload is the container's root, a
// node's where it runs the kubelet, as a machine's scope is.
func nodeRootAt(segs []string) int {
	for i := 2; i+1 < len(segs); i++ {
		if segs[i+1] == "payload" && strings.HasPrefix(segs[i], "systemd-nspawn@") && isServiceName(segs[i]) &&
			segs[i-1] == "machine.slice" && inSlice(segs[:i]) {
			return i + 1
		}
	}
	return -1
}

// kubepodsSegment says whether a cgroup path's segment is the kubelet's
// kubepods cgroup or one below it: "kubepods..." (cgroupfs, and the
// systemd driver's slices), or, under the systemd driver with the
// kubelet's cgroupRoot set (kind and nvkind set "/kubelet"), a slice
// whose name has kubepods among its dash-separated parts,
// "kubelet-kubepods-besteffort.slice": the driver names a slice by the
// path of cgroup names down to it, joined by dashes.
func kubepodsSegment(s string) bool {
	if strings.HasPrefix(s, "kubepods") {
		return true
	}
	name, ok := strings.CutSuffix(s, ".slice")
	return ok && strings.Contains(name, "-kubepods") && slices.Contains(strings.Split(name, "-"), "kubepods")
}

// namespacedPodAt is the index in segs (a path split at "/") of the pod
// segment of a cgroupfs pod's path relative to the reader's cgroup
// namespace, -1 where there is none. Read from inside a pod, another pod's
// path climbs to their common ancestor, kubepods or its QoS class, and
// comes down to the pod: "/../../../burstable/pod<uid>/<id>",
// "/../../pod<uid>/<id>". Only that shape is taken: ".." segments from
// the root, at most a QoS class, then the pod segment, "pod" and the UID
// (with dashes or underscores) alone. A cgroup made anywhere else with a
// pod's name (in a user manager's subtree, a container's own, a
// service's) has the slices or units it lies in before its pod segment,
// and is no pod's.
func namespacedPodAt(segs []string) int {
	if len(segs) < 3 || segs[0] != "" || segs[1] != ".." {
		return -1
	}
	i := 2
	for i < len(segs) && segs[i] == ".." {
		i++
	}
	if i < len(segs) && (segs[i] == "burstable" || segs[i] == "besteffort") {
		i++
	}
	if i < len(segs) && isPodSegment(segs[i]) {
		return i
	}
	return -1
}

// isPodSegment says whether seg is a cgroupfs pod segment: "pod" and the
// pod's UID, nothing else.
func isPodSegment(seg string) bool {
	uid := poduid.InCgroup(seg)
	return uid != "" && len(seg) == len("pod")+len(uid)
}

// SystemdService is the system manager's service unit a process of cgroup
// path runs in: "llm-a.service" for "/system.slice/llm-a.service" or its
// plain subgroup "/system.slice/llm-a.service/worker"; "" otherwise. A
// container's or a pod's process is not its runtime's service (restarting
// that would restart every container), and a user manager's units
// (under user@UID.service) are not the system manager's.
func SystemdService(path string) string {
	if containerMarked(path) || strings.Contains(path, "/user@") {
		return ""
	}
	segs := strings.Split(path, "/")
	leaf := segs[len(segs)-1]
	if isServiceName(leaf) {
		if inSlice(segs[:len(segs)-1]) {
			return leaf
		}
		return ""
	}
	if leaf == "" || strings.ContainsAny(leaf, ".@:") || hexIDRE.MatchString(leaf) || len(segs) < 3 {
		return ""
	}
	if parent := segs[len(segs)-2]; isServiceName(parent) && inSlice(segs[:len(segs)-2]) {
		return parent
	}
	return ""
}

// SystemdUnit is the system manager's service a process runs in, from the
// contents of its /proc/PID/cgroup: SystemdService of its path in
// systemd's own hierarchy, the unified (v2) line's, else name=systemd's
// (cgroup v1), where the manager puts its units and deploy/hooks/
// systemd-move.sh finds them. The path ParseProcCgroup ranks first is not
// it on cgroup v1: a v1 controller's hierarchy need not hold the process
// in its unit (at the root, with the unit's accounting off; in a job's
// cgroup that Slurm made, the unit slurmd's). "" where there is none, where
// any line is a container's, a pod's, a scope's or a user manager's (as
// SystemdService tells of one path: restarting the service would not be
// restarting the process's own), or where cgroupfile.Lines refuses the
// file.
func SystemdUnit(data []byte) string {
	lines, err := cgroupfile.Lines(data)
	if err != nil {
		return ""
	}
	return systemdUnit(lines)
}

func systemdUnit(lines []cgroupfile.Line) string {
	for _, e := range lines {
		if containerMarked(e.Path) || strings.Contains(e.Path, "/user@") {
			return ""
		}
	}
	path := systemdPath(lines)
	if path == "" {
		return ""
	}
	return SystemdService(path)
}

// systemdPath is the process's path in systemd's own hierarchy: the
// unified (v2) line's, else name=systemd's (cgroup v1); "" without either.
func systemdPath(lines []cgroupfile.Line) string {
	path := ""
	for _, e := range lines {
		if e.Unified() {
			return e.Path
		}
		if e.Controllers == "name=systemd" {
			path = e.Path
		}
	}
	return path
}

// inSlice says whether the segments above a unit are slices alone, from
// the root (or from the ".." segments that begin a path relative to the
// reader's cgroup namespace) down: where the system's manager puts a
// service. A cgroup named like a service anywhere inside another
// service's (a subtree delegated to it, as Delegate=yes gives) is that
// service's own, slices it made above it included, and names no unit of
// the system's: a tenant that made ".../tenant.service/sshd.service" or
// ".../tenant.service/x.slice/sshd.service" is not sshd.
func inSlice(above []string) bool {
	if len(above) == 0 || above[0] != "" {
		return false
	}
	i := 1
	for i < len(above) && above[i] == ".." {
		i++
	}
	for _, s := range above[i:] {
		if len(s) <= len(".slice") || !strings.HasSuffix(s, ".slice") {
			return false
		}
	}
	return true
}

// SlicesAbove says whether every cgroup above path's last one is a slice,
// from the root (or from the ".." segments that begin a path relative to
// the reader's cgroup namespace) down: whether the system's manager made
// the cgroup's place, not a user (user.slice's user@UID.service) or a
// service in a subtree delegated to it, who may name cgroups and slices
// there as they like.
func SlicesAbove(path string) bool {
	segs := strings.Split(path, "/")
	return len(segs) > 1 && inSlice(segs[:len(segs)-1])
}

// MachineScope is the part of a cgroup path up to the scope that
// systemd-machined gives a virtual machine or a container it registers
// ("/machine.slice/machine-qemu\x2d1\x2dtrain.scope" of
// ".../machine-qemu\x2d1\x2dtrain.scope/libvirt/emulator", where libvirt
// keeps QEMU's threads below it), or that Proxmox VE gives a VM's QEMU
// ("/qemu.slice/VMID.scope", VMID its number), or "".
// The innermost such scope is the one: a machine that runs machines of its
// own (a node in a systemd-nspawn container) is not taken for one of them.
// Proxmox VE's is taken only directly under the root's qemu.slice, where
// the system's manager alone puts it: anyone may make a qemu.slice with
// such a scope in a subtree of their own (their user manager's).
// A path relative to the reader's cgroup namespace ("/../../machine.slice/
// ...") gives its scope the same way.
func MachineScope(path string) string {
	segs := strings.Split(path, "/")
	for i := len(segs) - 2; i >= 1; i-- {
		next := segs[i+1]
		if segs[i] == "machine.slice" && strings.HasPrefix(next, "machine-") && len(next) > len("machine-.scope") && strings.HasSuffix(next, ".scope") ||
			segs[i] == "qemu.slice" && atRoot(segs[1:i]) && isVMIDScope(next) {
			return strings.Join(segs[:i+2], "/")
		}
	}
	return ""
}

// atRoot says whether the segments above a cgroup reach no further than
// the root: none, or only the ".." of a path relative to the reader's
// cgroup namespace.
func atRoot(above []string) bool {
	for _, s := range above {
		if s != ".." {
			return false
		}
	}
	return true
}

// isVMIDScope says whether seg is the scope Proxmox VE names by a VM's
// number, "VMID.scope": digits, no leading zero (Proxmox VE gives VMIDs from
// 100; a smaller one is taken too).
func isVMIDScope(seg string) bool {
	id, ok := strings.CutSuffix(seg, ".scope")
	if !ok || id == "" || id[0] == '0' {
		return false
	}
	return strings.Trim(id, "0123456789") == ""
}

// ownedSegment says whether a cgroup path's segment is a place whose
// subtree its owner may shape: a user's slice, or any service (a user's
// manager user@UID.service, a Delegate=yes service).
func ownedSegment(seg string) bool { return seg == "user.slice" || isServiceName(seg) }

// InUserSlice says whether the cgroup path is in a user's slice, where any
// login user may name cgroups of their own.
func InUserSlice(path string) bool { return slices.Contains(strings.Split(path, "/"), "user.slice") }

// isServiceName says whether seg names a systemd service unit.
func isServiceName(seg string) bool {
	return len(seg) > len(".service") && strings.HasSuffix(seg, ".service")
}

// containerMarked says whether a cgroup path is a container's or a pod's
// (as a runtime or the kubelet names it), or a session scope.
func containerMarked(path string) bool {
	for _, m := range []string{"kubepods", "docker", "libpod", "crio", "containerd", ".scope"} {
		if strings.Contains(path, m) {
			return true
		}
	}
	return false
}

// scopeSubmatch is scopeRE's submatches in s.
func scopeSubmatch(s string) []string {
	if !strings.HasSuffix(s, ".scope") {
		return nil
	}
	return scopeRE.FindStringSubmatch(s)
}

func runtimeName(prefix string) string {
	switch prefix {
	case "cri-containerd", "containerd":
		return "containerd"
	case "crio", "cri-o":
		return "crio"
	case "docker":
		return "docker"
	case "libpod":
		return "podman"
	}
	return prefix
}

// normalizeUID turns a systemd-escaped pod UID (underscores) into the API
// form (dashes), lower case.
func normalizeUID(u string) string {
	u = strings.ToLower(strings.ReplaceAll(u, "_", "-"))
	return u
}

// ParseProcCgroup reads the contents of /proc/PID/cgroup (cgroup v1, v2,
// or both on a hybrid host) and returns the path that best identifies the
// process: the one that names its pod, else its container, else any; among
// equals the unified (v2) hierarchy's, then the v1 hierarchy of memory,
// cpu or pids, then name=systemd, then the first. On a hybrid host the
// unified line need not name the pod its v1 lines name: a runtime that
// manages v1 controllers may leave the process in its own unified cgroup
// ("0::/system.slice/containerd.service", "0::/") or name it there in a
// form of its own ("...slice:cri-containerd:<id>"). A file
// cgroupfile.Lines refuses (a line forged by a cgroup name with a line
// break in it) is an error.
func ParseProcCgroup(data []byte) (string, error) {
	lines, err := cgroupfile.Lines(data)
	if err != nil {
		return "", err
	}
	return bestPath(lines)
}

// ProcCgroup is what one read of a process's /proc/PID/cgroup says of it.
type ProcCgroup struct {
	Path string // the path that best identifies it (ParseProcCgroup's)
	Unit string // the system manager's service it runs in (SystemdUnit's)
	// NoPod: no line names a pod, and systemd's own line (SystemdUnit's)
	// names a place that is no pod's (NamesNoPod): a login session's or a
	// host service's process on a cgroup v1 host, whose memory, cpu or
	// pids line (Path) reads "/" where the unit's accounting is off.
	NoPod bool
}

// ReadProcCgroup is ParseProcCgroup and SystemdUnit of the contents of
// /proc/PID/cgroup, and whether they name no pod's place, from one parse;
// host (nil: none) refuses a file whose hierarchies the kernel lists for
// no process (cgroupfile.Host).
func ReadProcCgroup(data []byte, host *cgroupfile.Host) (ProcCgroup, error) {
	lines, err := host.Lines(data)
	if err != nil {
		return ProcCgroup{}, err
	}
	path, err := bestPath(lines)
	if err != nil {
		return ProcCgroup{}, err
	}
	noPod := ParseCgroupPath(path).PodUID == "" && NamesNoPod(systemdPath(lines))
	return ProcCgroup{Path: path, Unit: systemdUnit(lines), NoPod: noPod}, nil
}

// bestPath is ParseProcCgroup's path of the file's lines.
func bestPath(lines []cgroupfile.Line) (string, error) {
	if len(lines) == 0 {
		return "", fmt.Errorf("no cgroup entries")
	}
	best, bestScore := lines[0].Path, -1
	for _, e := range lines {
		score := 100 * ParseCgroupPath(e.Path).Rank()
		if e.Unified() {
			score += 50 // cgroup v2 unified hierarchy
		}
		ctrl := 0
		for _, c := range strings.Split(e.Controllers, ",") {
			switch c {
			case "memory", "cpu", "pids":
				ctrl = 3
			case "name=systemd":
				ctrl = max(ctrl, 1)
			}
		}
		if score += ctrl; score > bestScore {
			best, bestScore = e.Path, score
		}
	}
	return best, nil
}
