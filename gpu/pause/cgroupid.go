package pause

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	err := thawAt(dir, id, control, thaw)
	if errors.Is(err, errRecreated) {
		return false, nil
	}
	return err == nil, err
}

// errRecreated: a cgroup's directory is another cgroup's now, created
// under the same path after the one found was removed (a unit restarted,
// perhaps running another's work). It counts as the cgroup gone
// (kube.ProcessGone): nothing is frozen or thawed there.
var errRecreated = fmt.Errorf("another cgroup under the same path (the one found was removed): %w", os.ErrNotExist)

// openCgroup opens cgroup directory dir where its inode number is id (0:
// whatever it is, as for a group the watchdog is named by its path);
// errRecreated where it is another's. Its control files are then opened
// through it (readAt, writeAt): a cgroup removed after it was opened
// fails them, and one created again under the path is never reached.
func openCgroup(dir string, id uint64) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil || id == 0 {
		return d, err
	}
	fi, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, err
	}
	if ino, ok := statIno(fi); !ok || ino != id {
		d.Close()
		return nil, fmt.Errorf("cgroup %s: ID %d, not %d: %w", dir, ino, id, errRecreated)
	}
	return d, nil
}

// openAt opens the file name in the opened directory d.
func openAt(d *os.File, name string, flag int) (*os.File, error) {
	path := filepath.Join(d.Name(), name)
	fd, err := syscall.Openat(int(d.Fd()), name, flag|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// writeAt writes s to the control file name of the opened cgroup
// directory d, which must be there: a freezer's file is never made (a
// directory that is no cgroup, named to the watchdog or left by a cgroup
// removed, gets no file of root's).
func writeAt(d *os.File, name, s string) error {
	f, err := openAt(d, name, syscall.O_WRONLY|syscall.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readAt reads the control file name of the opened cgroup directory d.
func readAt(d *os.File, name string) ([]byte, error) {
	f, err := openAt(d, name, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writableAt opens the control file name of the opened directory d for
// writing, and writes nothing: an error where it is not a file this
// process may write.
func writableAt(d *os.File, name string) error {
	f, err := openAt(d, name, syscall.O_WRONLY)
	if err != nil {
		return err
	}
	return f.Close()
}
