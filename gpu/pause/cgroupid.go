package pause

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A cgroup the pause froze holds more than the processes it was found
// from: a pod's other processes, a unit's. One of them killed while frozen
// (cgroup v2 lets SIGKILL through; the OOM killer) leaves the rest frozen,
// and no PID names the cgroup any more. So the tuner journals, with a
// pause, the cgroups it froze (Cgroups), and a thaw after a crash thaws
// those still there (ThawCgroups). A cgroup's ID is the inode number of
// its directory: on kernfs (cgroup v2, and the v1 hierarchies since Linux
// 3.16) a new one for each cgroup, taken from a 64-bit counter since Linux
// 5.5 and cyclically before, so never another cgroup's within a boot as
// far as a host runs; a cgroup created later under the same path (a
// systemd unit restarted) has another.

var _ gpu.ProcessIdentifier = (*Pauser)(nil)

// Cgroups implements gpu.ProcessIdentifier: the cgroups a pause of pids
// freezes, each once. A process gone, or paused by its process group,
// adds none.
func (p *Pauser) Cgroups(pids []uint32) ([]gpu.Cgroup, error) {
	var out []gpu.Cgroup
	for _, pid := range pids {
		g, err := p.r.resolve(pid)
		if err != nil {
			continue // gone, or no group: it names no cgroup
		}
		cg, ok, err := p.cgroupOf(g)
		if err != nil {
			return nil, err
		}
		if ok && !slices.Contains(out, cg) {
			out = append(out, cg)
		}
	}
	return out, nil
}

// cgroupOf names the group g where it is a cgroup.
func (p *Pauser) cgroupOf(g group) (gpu.Cgroup, bool, error) {
	var dir, root string
	v1 := false
	switch g := g.(type) {
	case cgroupV2:
		dir, root = g.dir, p.r.v2
	case cgroupV1:
		dir, root, v1 = g.dir, p.r.v1, true
	default:
		return gpu.Cgroup{}, false, nil
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || !strictlyUnder(root, dir) {
		return gpu.Cgroup{}, false, nil
	}
	ino, err := inodeOf(dir)
	if err != nil {
		if kube.ProcessGone(err) {
			return gpu.Cgroup{}, false, nil
		}
		return gpu.Cgroup{}, false, fmt.Errorf("pause: cgroup %s: %w", dir, err)
	}
	return gpu.Cgroup{V1: v1, Path: "/" + filepath.ToSlash(rel), ID: ino}, true, nil
}

// inodeOf is the inode number of dir.
func inodeOf(dir string) (uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	ino, ok := statIno(fi)
	if !ok {
		return 0, fmt.Errorf("%s: no inode number", dir)
	}
	return ino, nil
}

// statIno is the inode number fi was stated with, where the file system
// gave one.
func statIno(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}

// ThawCgroups implements gpu.ProcessIdentifier: it thaws those of cgs,
// the cgroups a pause of tenant froze on this boot, that are still
// there with the same ID, and returns them. One gone, recreated (another
// ID), on a hierarchy this host does not have, holding this process, or
// held by a pause now (the tenant's on another GPU, another tenant's: it
// thaws it when its pause ends) is passed over.
func (p *Pauser) ThawCgroups(ctx context.Context, tenant string, cgs []gpu.Cgroup) ([]gpu.Cgroup, error) {
	held := p.held()
	var thawed []gpu.Cgroup
	var errs []error
	for _, cg := range cgs {
		if err := ctx.Err(); err != nil {
			return thawed, err
		}
		root, control, thaw := p.r.v2, "cgroup.freeze", "0"
		if cg.V1 {
			root, control, thaw = p.r.v1, "freezer.state", "THAWED"
		}
		dir := filepath.Join(root, filepath.FromSlash(cg.Path))
		switch {
		case root == "" || !strings.HasPrefix(cg.Path, "/") || !strictlyUnder(root, dir):
			continue // not a cgroup of this host's freezer
		case holds(dir, p.r.selfV2) || holds(dir, p.r.selfV1) || held[dir]:
			continue
		}
		ok, err := thawIfSame(dir, cg.ID, control, thaw)
		switch {
		case err != nil && !kube.ProcessGone(err):
			errs = append(errs, fmt.Errorf("thaw %s: %w", dir, err))
		case ok:
			thawed = append(thawed, cg)
		case err == nil:
			level.Warn(p.o.Logger).Log("msg", "pause: a cgroup a pause froze is there under another ID (recreated, another's): not thawed", "tenant", tenant, "cgroup", dir, "id", cg.ID)
		}
	}
	return thawed, errors.Join(errs...)
}

// held are the cgroup directories pauses hold now (a tenant's on
// another GPU, another tenant's).
func (p *Pauser) held() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for _, pl := range p.tenants {
		for _, g := range pl.snapshot() {
			out[g.Key()] = true
		}
	}
	return out
}

// thawIfSame writes thaw to the control file of cgroup directory dir
// where the directory's inode number is id, through the directory opened
// (a cgroup removed and created again under the path meanwhile is
// another directory): false, nil where the ID differs.
func thawIfSame(dir string, id uint64, control, thaw string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return false, err
	}
	if ino, ok := statIno(fi); !ok || ino != id {
		return false, nil
	}
	fd, err := syscall.Openat(int(d.Fd()), control, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false, &os.PathError{Op: "open", Path: filepath.Join(dir, control), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, control))
	_, err = f.Write([]byte(thaw))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}
