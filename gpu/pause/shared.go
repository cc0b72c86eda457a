package pause

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A pause freezes more than the processes it is given: a process's cgroup
// (its pod's or container's, its VM's scope, its systemd unit's) or, where
// it has none of its own, its process group. Tenants told apart by
// executable or user can share either (a launcher script that starts a
// trainer and a server in the background, one delegated unit running both):
// pausing one would stop the other. The pauser knows only the processes of
// the tenant it pauses; CheckPauseGroups tells the tuner, which knows every
// tenant's GPU processes, where a pause would reach another's, and the
// tuner then does not pause (or thaws) the tenant.

var _ gpu.PauseGroupChecker = (*Pauser)(nil)

// CheckPauseGroups implements gpu.PauseGroupChecker: an error naming each
// group a pause of the tenant's pids freezes that holds one of others (a
// process of another tenant, by PID), with that tenant and PID. A PID of
// pids with no group (gone) is passed over: the pause itself refuses it;
// so is one of others that is gone. One of others whose group cannot be
// read counts as held: the pause is refused where it cannot be told apart.
func (p *Pauser) CheckPauseGroups(tenant string, pids []uint32, others map[uint32]string) error {
	var errs []error
	var seen []string
	for _, pid := range pids {
		if _, ok := others[pid]; ok {
			continue // (another's now: a PID taken again, not this tenant's)
		}
		g, err := p.r.resolve(pid)
		if err != nil || slices.Contains(seen, g.Key()) {
			continue
		}
		seen = append(seen, g.Key())
		for _, o := range slices.Sorted(maps.Keys(others)) {
			if slices.Contains(pids, o) {
				continue
			}
			held, err := p.r.holdsProcess(g, o)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s, which PID %d of tenant %s is paused by, may hold PID %d of tenant %s: %w", groupText(g), pid, tenant, o, others[o], err))
				break
			}
			if held {
				errs = append(errs, fmt.Errorf("%s, which PID %d of tenant %s is paused by, holds PID %d of tenant %s, which it would pause too", groupText(g), pid, tenant, o, others[o]))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// groupText names a group in an error: its cgroup's directory, or its
// process group.
func groupText(g group) string {
	switch g := g.(type) {
	case cgroupV2:
		return "cgroup " + g.dir
	case cgroupV1:
		return "freezer cgroup " + g.dir
	case procGroup:
		return fmt.Sprintf("process group %d", g.pgid)
	}
	return g.Key()
}

// holdsProcess says whether freezing (or stopping) g would reach process
// pid: pid is in g's cgroup or below it (a freeze holds the cgroups
// below), or in g's process group; false where pid is gone.
func (r resolver) holdsProcess(g group, pid uint32) (bool, error) {
	var dir, root string
	v1 := false
	switch g := g.(type) {
	case procGroup:
		pgid, err := r.getpgid(int(pid))
		return err == nil && pgid == g.pgid, nil // (an error: no such process)
	case cgroupV2:
		dir, root = g.dir, r.v2
	case cgroupV1:
		dir, root, v1 = g.dir, r.v1, true
	default:
		return false, nil
	}
	data, err := kube.NewProcReader(r.proc).CgroupFile(pid)
	if err != nil {
		if kube.ProcessGone(err) {
			return false, nil
		}
		return false, err
	}
	p2, p1 := cgroupPaths(data)
	path := p2
	if v1 {
		path = p1
	}
	if path == "" {
		return false, nil // (in no cgroup of that hierarchy: none of g's)
	}
	in := filepath.Join(root, filepath.FromSlash(path))
	if strings.HasPrefix(path, "/../") {
		var ok bool
		if in, ok = outsideNamespace(root, path); !ok {
			return false, fmt.Errorf("PID %d: its cgroup %s is not found under %s", pid, path, root)
		}
	}
	return holds(dir, in), nil
}
