package pause

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// group is what is frozen for one or more processes of a tenant: a cgroup
// (v2 or v1 freezer) or a process group.
type group interface {
	// Key names the group (a cgroup directory, or "pgid:N").
	Key() string
	// Spec is how the group is named to the watchdog.
	Spec() string
	// Freeze freezes the group for a pause that ends at until: a cgroup
	// whose freeze has not settled by then (or within its timeout, the
	// earlier) fails, since its tasks frozen from the write on would stay
	// stopped past the pause's end while the rest settle.
	Freeze(until time.Time) error
	Thaw() error
	// Check says, without freezing it, whether the group can be frozen
	// as far as can be told (its cgroup still the one found, its control
	// files there and writable; its process group still the tenant's).
	Check() error
}

// cgroupV2 freezes a cgroup v2 directory: cgroup.freeze 1, then
// cgroup.events reads "frozen 1" (within timeout of the write).
type cgroupV2 struct {
	dir string
	// id is the directory's inode number when the group was found (0:
	// not known, as for a group the watchdog is named): a cgroup removed
	// and created again under dir is another's, and counts as gone
	// (errRecreated), neither frozen nor thawed
	id      uint64
	clock   gpu.Clock
	timeout time.Duration
}

func (g cgroupV2) Key() string { return g.dir }

func (g cgroupV2) Spec() string { return "v2 " + g.dir }

func (g cgroupV2) Freeze(until time.Time) error {
	d, err := openCgroup(g.dir, g.id)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := writeAt(d, "cgroup.freeze", "1"); err != nil {
		return err
	}
	start := g.clock.Now()
	return waitFor(g.clock, start, g.timeout, until, func() (bool, error) {
		ev, err := readAt(d, "cgroup.events")
		if err != nil {
			return false, err
		}
		return bytes.Contains(ev, []byte("frozen 1")), nil
	}, g.dir)
}

func (g cgroupV2) Check() error {
	d, err := openCgroup(g.dir, g.id)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := readAt(d, "cgroup.events"); err != nil {
		return err
	}
	return writableAt(d, "cgroup.freeze")
}

func (g cgroupV2) Thaw() error { return thawAt(g.dir, g.id, "cgroup.freeze", "0") }

// cgroupV1 freezes a cgroup v1 freezer directory: freezer.state FROZEN
// (FREEZING while in progress, within timeout of the write), THAWED.
type cgroupV1 struct {
	dir     string
	id      uint64 // as cgroupV2's
	clock   gpu.Clock
	timeout time.Duration
}

func (g cgroupV1) Key() string { return g.dir }

func (g cgroupV1) Spec() string { return "v1 " + g.dir }

func (g cgroupV1) Freeze(until time.Time) error {
	d, err := openCgroup(g.dir, g.id)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := writeAt(d, "freezer.state", "FROZEN"); err != nil {
		return err
	}
	start := g.clock.Now()
	return waitFor(g.clock, start, g.timeout, until, func() (bool, error) {
		s, err := readAt(d, "freezer.state")
		if err != nil {
			return false, err
		}
		if v := strings.TrimSpace(string(s)); v != "FREEZING" {
			return v == "FROZEN", nil
		}
		// A task forked while the freeze went on can miss it and keep
		// the cgroup FREEZING: writing FROZEN again freezes it.
		return false, writeAt(d, "freezer.state", "FROZEN")
	}, g.dir)
}

func (g cgroupV1) Check() error {
	d, err := openCgroup(g.dir, g.id)
	if err != nil {
		return err
	}
	defer d.Close()
	return writableAt(d, "freezer.state")
}

func (g cgroupV1) Thaw() error { return thawAt(g.dir, g.id, "freezer.state", "THAWED") }

// thawAt writes thaw to the control file of cgroup directory dir where it
// is still the cgroup of ID id (openCgroup).
func thawAt(dir string, id uint64, control, thaw string) error {
	d, err := openCgroup(dir, id)
	if err != nil {
		return err
	}
	defer d.Close()
	return writeAt(d, control, thaw)
}

// procGroup stops and continues a process group with signals. A group
// is stopped only while a process it was found from (its members, each
// started at its start, in clock ticks since boot) is still in it: a
// process group's number is taken again once its processes exit, and
// another's group must never be stopped. It is continued unless its
// number is known to be another's (Thaw): continuing a running process
// does nothing, and a group found gone at a freeze leaves the pulse.
type procGroup struct {
	pgid int
	kill func(pid int, sig syscall.Signal) error
	// members are the tenant's processes the group was found from (all
	// of those in it: one that exits leaves the others paused); proc is
	// the procfs root and getpgid the system call (none in a group the
	// watchdog names: it only continues)
	members []member
	proc    string
	getpgid func(pid int) (int, error)
}

// member is a process a process group was found from.
type member struct {
	pid   uint32
	start string
}

func (g procGroup) Key() string { return "pgid:" + strconv.Itoa(g.pgid) }

func (g procGroup) Spec() string { return "pgid " + strconv.Itoa(g.pgid) }

func (g procGroup) Freeze(time.Time) error {
	if err := g.Check(); err != nil {
		return err
	}
	return g.kill(-g.pgid, syscall.SIGSTOP)
}

// Thaw continues the group, but where its number is known to be
// another's now: its leader, one of its members, has exited and another
// process runs under its PID (taken).
func (g procGroup) Thaw() error {
	if g.taken() {
		return fmt.Errorf("process group %d: its number is another's now (process %d, its leader, exited and the PID was taken again): %w", g.pgid, g.pgid, syscall.ESRCH)
	}
	return g.kill(-g.pgid, syscall.SIGCONT)
}

// taken says whether the group's leader (the process of its number) is
// one of its members that no longer runs, another process running under
// its PID. The kernel gives a number again only once no process has it
// as its PID nor as its group: none of the group stopped is left then to
// be continued, and a SIGCONT would reach the new group (one that someone
// stopped on purpose). Where the leader is not known, or runs no more and
// its PID is not taken, the group's other processes may be stopped still
// and hold its number: it is continued, a last time (Check finds it gone
// at the next freeze, and the pulse drops it).
func (g procGroup) taken() bool {
	for _, m := range g.members {
		if int(m.pid) == g.pgid {
			start, err := startTimeOf(g.proc, m.pid)
			return err == nil && start != m.start
		}
	}
	return false
}

// Check fails where a process the group was found from is in another
// group now (an error: the tenant's process runs, unpaused), or where none
// of them is left (the same processes no longer run: an error that counts
// as the group gone).
func (g procGroup) Check() error {
	if g.getpgid == nil || len(g.members) == 0 {
		return fmt.Errorf("process group %d: no process to tell it by", g.pgid)
	}
	in := 0
	for _, m := range g.members {
		start, err := startTimeOf(g.proc, m.pid)
		if err != nil || start != m.start {
			continue // gone
		}
		pgid, err := g.getpgid(int(m.pid))
		if err != nil {
			continue // gone since
		}
		if pgid != g.pgid {
			return fmt.Errorf("process group %d: process %d, which it was found from, is in group %d now", g.pgid, m.pid, pgid)
		}
		in++
	}
	if in == 0 {
		return fmt.Errorf("process group %d: processes %s, which it was found from, are gone: %w", g.pgid, memberPIDs(g.members), syscall.ESRCH)
	}
	return nil
}

// memberPIDs lists the PIDs of ms as "1, 2".
func memberPIDs(ms []member) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = strconv.FormatUint(uint64(m.pid), 10)
	}
	return strings.Join(s, ", ")
}

// merged is g with the members of h where both are the same process
// group (each member once); g otherwise.
func merged(g, h group) group {
	pg, ok1 := g.(procGroup)
	ph, ok2 := h.(procGroup)
	if !ok1 || !ok2 || pg.pgid != ph.pgid {
		return g
	}
	ms := slices.Clone(pg.members)
	for _, m := range ph.members {
		if !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	pg.members = ms
	return pg
}

// checkAll checks every group of gs.
func checkAll(gs []group) error {
	var errs []error
	for _, g := range gs {
		if err := g.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", g.Key(), err))
		}
	}
	return errors.Join(errs...)
}

// startTimeOf reads the start time of process pid under the procfs root.
func startTimeOf(proc string, pid uint32) (string, error) {
	return kube.NewProcReader(proc).StartTime(pid)
}

// pollEvery is how often a freeze in progress is looked at.
const pollEvery = time.Millisecond

// waitFor polls done, from start (the write of a freeze), until it is
// true, an error, or the freeze's deadline on clock: within timeout of
// start, and by the end of its pause (until). Past the deadline it is
// unsettled.
func waitFor(clock gpu.Clock, start time.Time, timeout time.Duration, until time.Time, done func() (bool, error), what string) error {
	deadline, ended := start.Add(timeout), false
	if !deadline.Before(until) {
		deadline, ended = until, true
	}
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		now := clock.Now()
		if !now.Before(deadline) {
			return unsettled{what: what, after: max(deadline.Sub(start), 0), ended: ended}
		}
		<-clock.After(min(pollEvery, deadline.Sub(now)))
	}
}

// unsettled is a freeze not settled by its deadline; ended: the deadline
// was the end of its pause, not its timeout.
type unsettled struct {
	what  string
	after time.Duration
	ended bool
}

func (e unsettled) Error() string { return fmt.Sprintf("%s not frozen after %v", e.what, e.after) }

// resolver finds the group a process is paused by.
type resolver struct {
	proc   string // procfs root
	v2, v1 string // cgroup v2 root, cgroup v1 freezer root ("" when absent)
	// host refuses a process's cgroup file whose hierarchies are not those
	// of proc's self/cgroup (cgroupfile.Host): a forged line's
	host     *cgroupfile.Host
	clock    gpu.Clock
	timeout  time.Duration
	kill     func(pid int, sig syscall.Signal) error
	getpgid  func(pid int) (int, error)
	selfPgid int
	// selfV2 and selfV1 are the pauser's own cgroup directories ("" where
	// unknown): a group that holds them is never frozen (the exporter
	// and its watchdog would freeze with the tenant, and nothing would
	// thaw it).
	selfV2, selfV1 string
}

// ownDirs returns the cgroup directories of process pid under the v2 and
// v1 freezer roots ("" where unknown).
func (r resolver) ownDirs(pid int) (v2, v1 string) {
	if pid <= 0 {
		return "", ""
	}
	data, err := kube.NewProcReader(r.proc).CgroupFile(uint32(pid))
	if err != nil {
		return "", ""
	}
	p2, p1, _ := cgroupPaths(data, r.host) // (a refused file: neither)
	if r.v2 != "" && p2 != "" && !strings.HasPrefix(p2, "/../") {
		v2 = filepath.Join(r.v2, filepath.FromSlash(p2))
	}
	if r.v1 != "" && p1 != "" && !strings.HasPrefix(p1, "/../") {
		v1 = filepath.Join(r.v1, filepath.FromSlash(p1))
	}
	return v2, v1
}

// holds says whether cgroup directory dir is self or above it.
func holds(dir, self string) bool {
	return self != "" && (self == dir || strings.HasPrefix(self, dir+string(filepath.Separator)))
}

// errNoGroup: a process has no group the pauser may freeze.
var errNoGroup = errors.New("no cgroup or process group of its own")

// resolve returns the group of pid: its cgroup v2 directory when the
// process runs in a pod, container or systemd unit of its own and the
// directory has cgroup.freeze; else its v1 freezer cgroup on the same
// terms; else its process group (never the pauser's own, nor init's). A
// cgroup that holds the pauser's own is not the process's own.
func (r resolver) resolve(pid uint32) (group, error) {
	data, err := kube.NewProcReader(r.proc).CgroupFile(pid)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", pid, err)
	}
	v2path, v1path, _ := cgroupPaths(data, r.host) // (a refused file: its process group)
	// On a hybrid host a runtime that manages the v1 controllers may leave
	// a container's process in its own unified cgroup, its service's
	// ("/system.slice/k3s-agent.service", which holds the kubelet, the
	// runtime and every container there), or name only the container
	// there: where the v1 freezer's path names the workload better (its
	// pod, or a container where the unified one names none), as kube
	// ranks them (CgroupInfo.Rank), the v1 freezer's is the process's own.
	v1Own := kube.ParseCgroupPath(v1path).Rank() > kube.ParseCgroupPath(v2path).Rank()
	// A cgroup is told by its ID (the inode number of its directory) as
	// well as its path: one removed and created again under the path is
	// another's, which the pause leaves alone.
	if dir, ok := ownCgroup(r.v2, v2path, "cgroup.freeze"); ok && !v1Own && !holds(dir, r.selfV2) {
		id, err := inodeOf(dir)
		if err != nil {
			return nil, fmt.Errorf("PID %d: cgroup %s: %w", pid, dir, err)
		}
		return cgroupV2{dir: dir, id: id, clock: r.clock, timeout: r.timeout}, nil
	}
	if dir, ok := ownCgroup(r.v1, v1path, "freezer.state"); ok && !holds(dir, r.selfV1) {
		id, err := inodeOf(dir)
		if err != nil {
			return nil, fmt.Errorf("PID %d: freezer cgroup %s: %w", pid, dir, err)
		}
		return cgroupV1{dir: dir, id: id, clock: r.clock, timeout: r.timeout}, nil
	}
	pgid, err := r.getpgid(int(pid))
	if err != nil {
		return nil, fmt.Errorf("PID %d: process group: %w", pid, err)
	}
	if pgid <= 1 || pgid == r.selfPgid {
		return nil, fmt.Errorf("PID %d (process group %d): %w", pid, pgid, errNoGroup)
	}
	start, err := startTimeOf(r.proc, pid)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", pid, err)
	}
	return procGroup{pgid: pgid, kill: r.kill, members: []member{{pid, start}}, proc: r.proc, getpgid: r.getpgid}, nil
}

// cgroupPaths returns a process's cgroup v2 path and its v1 freezer path
// from /proc/PID/cgroup ("" where absent). A file that cgroupfile.Lines
// refuses (a hierarchy or a controller listed twice: a line forged by a
// cgroup name with a line break in it), or host (nil: none) does (its
// hierarchies not those the kernel lists for every process: a "0::" line
// where no cgroup2 is mounted, a freezer hierarchy the host lacks, forged
// the same way), gives neither, and its error: the process is then paused
// by its process group, never by the cgroup a forged line names.
func cgroupPaths(data []byte, host *cgroupfile.Host) (v2, v1 string, err error) {
	lines, err := host.Lines(data)
	if err != nil {
		return "", "", err
	}
	for _, l := range lines {
		if l.Unified() {
			v2 = l.Path
		}
		for _, c := range strings.Split(l.Controllers, ",") {
			if c == "freezer" {
				v1 = l.Path
			}
		}
	}
	return v2, v1, nil
}

// ownCgroup returns the directory to freeze for a process of cgroup path
// under root: the path itself when it is a pod's or a container's, the
// scope's when it is (under) a virtual machine's (kube.MachineScope), the
// unit's when it is (under) a systemd service (a path relative to the
// reader's cgroup namespace found under root: outsideNamespace); false for
// anything else
// (the root, a session, a slice: freezing those would pause processes of
// other tenants) or where the control file is missing.
func ownCgroup(root, path, control string) (string, bool) {
	if root == "" || path == "" || path == "/" {
		return "", false
	}
	rel := path
	info := kube.ParseCgroupPath(path)
	if info.PodUID != "" || info.ContainerID != "" {
		// a pod's or a container's own, even inside a machine's scope
	} else if scope := kube.MachineScope(path); scope != "" {
		rel = scope // a VM's (or a registered container's) scope, as a whole
	} else {
		unit := kube.SystemdService(path)
		if unit == "" {
			return "", false
		}
		i := strings.Index(path, "/"+unit)
		rel = path[:i+1+len(unit)]
	}
	dir := filepath.Join(root, filepath.FromSlash(rel))
	if strings.HasPrefix(rel, "/../") {
		var ok bool
		if dir, ok = outsideNamespace(root, rel); !ok {
			return "", false
		}
	}
	if !strictlyUnder(root, dir) {
		return "", false // a path that climbs out (".."), which no kernel gives
	}
	if strings.ContainsFunc(dir, unicode.IsControl) {
		// a directory (found under root by outsideNamespace) whose name
		// holds a line break would be a line of its own to the watchdog
		return "", false
	}
	if _, err := os.Stat(filepath.Join(dir, control)); err != nil {
		return "", false
	}
	return dir, true
}

// strictlyUnder says whether dir is a directory below root (not root).
func strictlyUnder(root, dir string) bool {
	r, err := filepath.Rel(root, dir)
	return err == nil && r != "." && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// maxNamespaceDepth is how deep under root outsideNamespace looks.
const maxNamespaceDepth = 8

// outsideNamespace finds under root (the host's hierarchy) the cgroup of a
// path that /proc/PID/cgroup gives relative to the reader's own cgroup
// namespace ("/../../kubepods-besteffort.slice/...", as a container with a
// private cgroup namespace reads another pod's): the one directory, at the
// shallowest depth that has any, whose path ends with the part after the
// "..". None when two match.
func outsideNamespace(root, rel string) (string, bool) {
	rest := rel
	for strings.HasPrefix(rest, "/../") {
		rest = rest[len("/.."):]
	}
	if rest == "/" || strings.Contains(rest, "/../") {
		return "", false
	}
	pattern := escapeGlob(filepath.FromSlash(rest))
	for depth := range maxNamespaceDepth {
		m, _ := filepath.Glob(escapeGlob(root) + strings.Repeat(string(filepath.Separator)+"*", depth) + pattern)
		switch len(m) {
		case 0:
			continue
		case 1:
			return m[0], true
		}
		return "", false
	}
	return "", false
}

// escapeGlob quotes the characters filepath.Match treats as special.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
