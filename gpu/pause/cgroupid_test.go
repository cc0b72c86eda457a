package pause

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// inode is the inode number of dir.
func inode(t *testing.T, dir string) uint64 {
	t.Helper()
	fi, err := os.Stat(dir)
	must(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// The pauser names the cgroups a pause of its processes freezes (a
// pod's v2 cgroup once for its two processes, a unit's v1 freezer
// cgroup), by path under their hierarchy and ID; a process paused by
// its process group, or gone, names none.
func TestCgroupsOfAPause(t *testing.T) {
	h := newHost(t)
	pod := h.cgroupV2Dir(podPath)
	unit := h.cgroupV1Dir(unitPath)
	h.process(7, podPath, "", 70)
	h.process(8, podPath, "", 80)
	h.process(9, "/", unitPath, 90)
	h.process(10, "/user.slice/user-1000.slice/session-1.scope", "", 100)
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
	got, err := p.Cgroups([]uint32{7, 8, 9, 10, 11})
	want := []gpu.Cgroup{{Path: podPath, ID: inode(t, pod)}, {V1: true, Path: unitPath, ID: inode(t, unit)}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Cgroups = %v, %v; want %v", got, err, want)
	}
}

// A thaw of the cgroups a pause froze (after a crash) thaws each that is
// still there under the same ID; one whose ID differs (made again under
// the path: another's) or that is gone is passed over, no error.
func TestThawCgroups(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, h *host, c gpu.Cgroup) gpu.Cgroup // the cgroup as journaled
		thawed bool
	}{
		{"still there", func(_ *testing.T, _ *host, c gpu.Cgroup) gpu.Cgroup { return c }, true},
		{"another ID", func(_ *testing.T, _ *host, c gpu.Cgroup) gpu.Cgroup { c.ID++; return c }, false},
		{"gone", func(t *testing.T, h *host, c gpu.Cgroup) gpu.Cgroup {
			must(t, os.RemoveAll(h.v2+podPath))
			must(t, os.RemoveAll(h.v1+unitPath))
			return c
		}, false},
		{"outside the hierarchy", func(_ *testing.T, _ *host, c gpu.Cgroup) gpu.Cgroup { c.Path = "/../../" + c.Path; return c }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			pod := h.cgroupV2Dir(podPath)
			unit := h.cgroupV1Dir(unitPath)
			must(t, os.WriteFile(pod+"/cgroup.freeze", []byte("1"), 0o644))
			must(t, os.WriteFile(unit+"/freezer.state", []byte("FROZEN"), 0o644))
			p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
			cgs := []gpu.Cgroup{{Path: podPath, ID: inode(t, pod)}, {V1: true, Path: unitPath, ID: inode(t, unit)}}
			for i := range cgs {
				cgs[i] = c.change(t, h, cgs[i])
			}
			got, err := p.ThawCgroups(context.Background(), "train", cgs)
			if err != nil {
				t.Fatal(err)
			}
			if c.thawed != (len(got) == 2) || !c.thawed && len(got) > 0 {
				t.Errorf("thawed %v, want all of %v: %v", got, cgs, c.thawed)
			}
			if c.name == "gone" {
				return
			}
			if v2, v1 := read(t, pod+"/cgroup.freeze"), read(t, unit+"/freezer.state"); (v2 == "0" && v1 == "THAWED") != c.thawed || (v2 == "1" && v1 == "FROZEN") == c.thawed {
				t.Errorf("cgroup.freeze %s, freezer.state %s; thawed: %v", v2, v1, c.thawed)
			}
		})
	}
}

// A journaled cgroup that a live pause holds now (the same tenant's on
// another GPU, another tenant's) is left to that pause, which thaws it
// when it ends: the thaw of a pause an earlier run set does not let go of
// one running now.
func TestThawCgroupsLeavesOneHeld(t *testing.T) {
	h := newHost(t)
	pod := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{Period: 500 * time.Millisecond})
	must(t, p.SetPauseDuty(context.Background(), "GPU-b", "other", []uint32{10}, 0.5))
	defer func() { must(t, p.SetPauseDuty(context.Background(), "GPU-b", "other", []uint32{10}, 0)) }()
	if got := read(t, pod+"/cgroup.freeze"); got != "1" {
		t.Fatalf("the live pause: cgroup.freeze %s, want 1", got)
	}
	got, err := p.ThawCgroups(context.Background(), "train", []gpu.Cgroup{{Path: podPath, ID: inode(t, pod)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || read(t, pod+"/cgroup.freeze") != "1" {
		t.Errorf("thawed %v, cgroup.freeze %s: want the cgroup a live pause holds left frozen", got, read(t, pod+"/cgroup.freeze"))
	}
}
