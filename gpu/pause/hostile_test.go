package pause

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A tenant with a delegated cgroup subtree names its cgroups as it likes,
// line breaks included, and the kernel writes the name into
// /proc/PID/cgroup unescaped. A forged line never makes the pauser freeze
// a cgroup that is not the tenant's (another pod, a system service, a
// container): the process is paused by its own process group instead.
func TestResolveForgedCgroupLines(t *testing.T) {
	h := newHost(t)
	victimPod := "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + hex64 + ".scope"
	h.cgroupV2Dir(podPath)
	h.cgroupV2Dir(victimPod)
	h.cgroupV2Dir("/system.slice/kubelet.service")
	h.cgroupV2Dir("/system.slice/tenant.service/sshd.service")
	h.cgroupV1Dir("/docker/" + hex64)
	// a directory whose name holds a line break, found by a path relative
	// to a private cgroup namespace
	h.cgroupV2Dir("/a\nfreeze v2 /etc 1s/evil.service")
	userApp := "/user.slice/user-1000.slice/user@1000.service/app.slice"
	for _, c := range []struct {
		name   string
		pid    int
		cgroup string
	}{
		{"a system service", 40, "0::" + userApp + "/x\n0::/system.slice/kubelet.service\n"},
		{"another pod", 41, "0::" + podPath + "/x\n0::" + victimPod + "\n"},
		{"a v1 freezer cgroup", 42, "6:freezer:/user.slice/x\n7:freezer:/docker/" + hex64 + "\n0::/\n"},
		{"a line break found under the root", 43, "0::/../../evil.service\n"},
		// a service's own cgroup (Delegate=yes) named like a unit of the
		// system's is no unit (kube.SystemdService): its process is
		// paused by its process group
		{"a service's own cgroup named like a unit", 44, "0::/system.slice/tenant.service/sshd.service\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.process(c.pid, "/", "", c.pid)
			must(t, os.WriteFile(filepath.Join(h.proc, strconv.Itoa(c.pid), "cgroup"), []byte(c.cgroup), 0o644))
			p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
			g, err := p.r.resolve(uint32(c.pid))
			if err != nil {
				t.Fatal(err)
			}
			if want := "pgid:" + strconv.Itoa(c.pid); g.Key() != want {
				t.Errorf("%q: group %q, want %s", c.cgroup, g.Key(), want)
			}
		})
	}
}

// A freeze or thaw writes a freezer's control file only where it is: a
// directory that is no cgroup (one a line to the watchdog named, a cgroup
// removed since) gets no file made by root.
func TestControlFilesNeverMade(t *testing.T) {
	for _, g := range []group{cgroupV2{dir: t.TempDir()}, cgroupV1{dir: t.TempDir()}} {
		dir := g.Key()
		if err := g.Thaw(); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: thaw: %v, want a missing file", g.Spec(), err)
		}
		if err := g.Freeze(time.Now()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: freeze: %v, want a missing file", g.Spec(), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: files made: %v", g.Spec(), ents)
		}
	}
}
