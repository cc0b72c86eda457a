package pause

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A group of a tenant's can go while its pause runs: its processes exit,
// its cgroup is removed. What is left under its name is then someone
// else's: a process group's number is taken again once its processes
// exit (a new session's leader, which someone may stop on purpose: Ctrl-Z,
// kill -STOP), and a cgroup created again under the same path (a unit
// restarted) may run another's work. So a group found gone at a freeze is
// dropped from the tenant's pulse and from the watchdog's leases: nothing
// is frozen nor thawed under its name again. It was thawed at the end of
// the pause before (a process group once more where its leader's PID is
// not known to be taken: procGroup.Thaw). A period that finds none of the
// tenant's groups left pauses nothing, and is reported so (PausesInForce).

// goneGroup is a group found gone at a freeze, and how.
type goneGroup struct {
	g   group
	err error
}

// freezeAll freezes every group or none, for a pause that ends at until:
// when one fails (or has not settled by until), those frozen before it
// are thawed (stuck: those whose thaw failed). A group that no longer
// exists (its processes exited, its cgroup removed or another's now) is
// passed over (gone): the tenant's other processes are the whole of it
// now. None left, or none to freeze, is an error (errNoneLeft).
func freezeAll(gs []group, until time.Time) (gone []goneGroup, stuck []group, err error) {
	left := 0
	for _, g := range gs {
		err := g.Freeze(until)
		if err != nil && kube.ProcessGone(err) {
			gone = append(gone, goneGroup{g, err})
			continue
		}
		left++
		if err != nil {
			// every group thawed, not only those before: one after it
			// may be frozen still (its last thaw failed)
			errs := []error{fmt.Errorf("freeze %s: %w", g.Key(), err)}
			for _, h := range gs {
				if terr := h.Thaw(); terr != nil && !kube.ProcessGone(terr) {
					errs = append(errs, fmt.Errorf("thaw %s: %w", h.Key(), terr))
					stuck = append(stuck, h)
				}
			}
			return gone, stuck, errors.Join(errs...)
		}
	}
	if left == 0 {
		return gone, nil, errNoneLeft
	}
	return gone, nil, nil
}

// errNoneLeft: none of the groups to freeze exists any more.
var errNoneLeft = errors.New("none of the tenant's process groups and cgroups exists any more")

// dropGone drops the groups gone from every GPU's set of the tenant's
// pulse, and says so: a cgroup created again under its path at warn (the
// pause would have frozen another's), the rest (processes exited) at
// debug. A call of the tenant naming their processes again resolves them
// anew.
func (p *Pauser) dropGone(tenant string, pl *pulse, gone []goneGroup) {
	if len(gone) == 0 {
		return
	}
	pl.mu.Lock()
	for uuid, gs := range pl.groups {
		gs = slices.DeleteFunc(slices.Clone(gs), func(h group) bool {
			return slices.ContainsFunc(gone, func(g goneGroup) bool { return sameGroup(g.g, h) })
		})
		if len(gs) == 0 {
			delete(pl.groups, uuid)
			continue
		}
		pl.groups[uuid] = gs
	}
	pl.mu.Unlock()
	for _, g := range gone {
		lvl := level.Debug
		if errors.Is(g.err, errRecreated) {
			lvl = level.Warn
		}
		lvl(p.o.Logger).Log("msg", "pause: a group of the tenant is gone; dropped from its pause, nothing frozen or thawed there again", "tenant", tenant, "group", g.g.Key(), "err", g.err)
	}
}

// groupsOfGone are the groups of gone.
func groupsOfGone(gone []goneGroup) []group {
	out := make([]group, len(gone))
	for i, g := range gone {
		out[i] = g.g
	}
	return out
}

// sameGroup says whether g and h are the same group: of one key and, for
// cgroups, of one ID (a cgroup created again under the path is another).
func sameGroup(g, h group) bool {
	return g.Key() == h.Key() && cgroupID(g) == cgroupID(h)
}

// cgroupID is the ID g was found with where it is a cgroup; 0 otherwise.
func cgroupID(g group) uint64 {
	switch g := g.(type) {
	case cgroupV2:
		return g.id
	case cgroupV1:
		return g.id
	}
	return 0
}
