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
// group a pause of the tenant freezes that holds one of others (a process
// of another tenant, by PID), with that tenant and PID. The groups are
// those pids are in now and those the tenant's pause in force freezes (set
// by the last SetPauseDuty: the group of a process of the tenant's that
// exited since is frozen still, and another's process may have started
// there). A PID of pids that is one of others counts as the other's (a
// tenants reload gave it to another tenant); one with no group (gone) is
// passed over: the pause itself refuses it; so is one of others that is
// gone. One of others whose group cannot be read counts as held: the pause
// is refused where it cannot be told apart. Each of others is read once,
// whatever the number of groups.
func (p *Pauser) CheckPauseGroups(tenant string, pids []uint32, others map[uint32]string) error {
	if len(others) == 0 {
		return nil
	}
	gs := p.frozenFor(tenant, pids, others)
	if len(gs) == 0 {
		return nil
	}
	var cgroups, pgroups bool
	for _, g := range gs {
		_, pg := g.group.(procGroup)
		pgroups = pgroups || pg
		cgroups = cgroups || !pg
	}
	places := make([]place, 0, len(others))
	for _, o := range slices.Sorted(maps.Keys(others)) {
		places = append(places, p.r.placeOf(o, cgroups, pgroups))
	}
	var errs []error
	for _, g := range gs {
		for _, pl := range places {
			held, err := pl.in(g.group)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s, which %s, may hold PID %d of tenant %s: %w", groupText(g.group), g.by, pl.pid, others[pl.pid], err))
				break
			}
			if held {
				errs = append(errs, fmt.Errorf("%s, which %s, holds PID %d of tenant %s, which it would pause too", groupText(g.group), g.by, pl.pid, others[pl.pid]))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// frozenGroup is a group a pause of a tenant freezes, and by what (said in
// an error).
type frozenGroup struct {
	group group
	by    string
}

// frozenFor are the groups a pause of tenant freezes, each once: those of
// pids that are none of others', and those its pause in force freezes (a
// process group only while a process it was found from is in it: the
// pulse stops none other).
func (p *Pauser) frozenFor(tenant string, pids []uint32, others map[uint32]string) []frozenGroup {
	var out []frozenGroup
	seen := func(g group) bool {
		return slices.ContainsFunc(out, func(f frozenGroup) bool { return f.group.Key() == g.Key() })
	}
	for _, pid := range pids {
		if _, ok := others[pid]; ok {
			continue // (another's now)
		}
		g, err := p.r.resolve(pid)
		if err != nil || seen(g) {
			continue
		}
		out = append(out, frozenGroup{g, fmt.Sprintf("PID %d of tenant %s is paused by", pid, tenant)})
	}
	for _, g := range p.inForce(tenant) {
		if _, ok := g.(procGroup); (ok && g.Check() != nil) || seen(g) {
			continue
		}
		out = append(out, frozenGroup{g, "the pause of tenant " + tenant + " in force freezes"})
	}
	return out
}

// inForce are the groups the tenant's pause in force freezes (none where
// it is not paused).
func (p *Pauser) inForce(tenant string) []group {
	p.mu.Lock()
	pl := p.tenants[tenant]
	p.mu.Unlock()
	if pl == nil {
		return nil
	}
	return pl.snapshot()
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

// place is where another tenant's process is, as a freeze would reach it:
// its cgroup directories and its process group.
type place struct {
	pid  uint32
	gone bool
	// v2 and v1 are its cgroup directories under the v2 root and the v1
	// freezer root ("" where in none of that hierarchy); v2Err and v1Err
	// say why one cannot be told
	v2, v1       string
	v2Err, v1Err error
	pgid         int // 0: none (gone)
}

// placeOf reads where process pid is: its cgroups where cgroups is set,
// its process group where pgroups is. A /proc/PID/cgroup that cgroupPaths
// refuses (a line forged by a cgroup name with a line break in it, or
// hierarchies the kernel lists for no process) tells no cgroup: an error
// for either hierarchy.
func (r resolver) placeOf(pid uint32, cgroups, pgroups bool) place {
	pl := place{pid: pid}
	if pgroups {
		if pgid, err := r.getpgid(int(pid)); err == nil {
			pl.pgid = pgid
		}
	}
	if !cgroups {
		return pl
	}
	data, err := kube.NewProcReader(r.proc).CgroupFile(pid)
	if err != nil {
		pl.gone = kube.ProcessGone(err)
		pl.v2Err, pl.v1Err = err, err
		return pl
	}
	p2, p1, err := cgroupPaths(data, r.host)
	if err != nil {
		pl.v2Err = fmt.Errorf("its cgroup file: %w", err)
		pl.v1Err = pl.v2Err
		return pl
	}
	pl.v2, pl.v2Err = dirUnder(r.v2, p2)
	pl.v1, pl.v1Err = dirUnder(r.v1, p1)
	return pl
}

// dirUnder is the directory of cgroup path under root, found as
// outsideNamespace finds it for a path relative to the reader's cgroup
// namespace; "" for no path.
func dirUnder(root, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if !strings.HasPrefix(path, "/../") {
		return filepath.Join(root, filepath.FromSlash(path)), nil
	}
	if dir, ok := outsideNamespace(root, path); ok {
		return dir, nil
	}
	return "", fmt.Errorf("its cgroup %s is not found under %s", path, root)
}

// in says whether freezing (or stopping) g would reach the process: it is
// in g's cgroup or below it (a freeze holds the cgroups below), or in g's
// process group; false where it is gone.
func (pl place) in(g group) (bool, error) {
	var dir, in string
	var err error
	switch g := g.(type) {
	case procGroup:
		return pl.pgid != 0 && pl.pgid == g.pgid, nil
	case cgroupV2:
		dir, in, err = g.dir, pl.v2, pl.v2Err
	case cgroupV1:
		dir, in, err = g.dir, pl.v1, pl.v1Err
	default:
		return false, nil
	}
	switch {
	case pl.gone:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("PID %d: %w", pl.pid, err)
	}
	return holds(dir, in), nil
}
