package pause

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// A forged line of a hierarchy the host lacks (a unified one where no
// cgroup2 is mounted, a freezer one where no v1 freezer is), listed last
// as the kernel lists the unified one (a kernel before 4.13 takes a line
// break in a cgroup's name, a delegated name=systemd subtree lets a tenant
// name one), is one cgroupfile.Lines takes: the pauser's own self/cgroup
// under the procfs root tells it, and the process is paused by its process
// group, never by the cgroup the forged line names (the test's v2 and v1
// roots stand whatever the own file lists). A hybrid host's honest file is
// frozen by its cgroup still.
func TestResolveForgedLinesOnHost(t *testing.T) {
	const (
		legacy = "4:memory:/\n1:name=systemd:/system.slice/vgpu-exporter.service\n"
		hybrid = "6:freezer:/\n4:memory:/\n1:name=systemd:/system.slice/vgpu-exporter.service\n0::/system.slice/vgpu-exporter.service\n"
		// the tenant's service, whose delegated name=systemd subtree names
		// a cgroup "x\n99:freezer:/kubepods/..." or "x\n0::/kubepods..."
		tenant = "4:memory:/system.slice/t.service\n1:name=systemd:/system.slice/t.service/x\n"
		agent  = "/system.slice/k3s-agent.service"
	)
	fsPod := "/kubepods/burstable/pod0f2c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b/" + hex64
	for _, c := range []struct {
		name, self, cgroup, want string
	}{
		{"a unified line on a legacy host", legacy, tenant + "0::" + podPath + "\n", "pgid:40"},
		{"a freezer hierarchy on a legacy host", legacy, tenant + "99:freezer:" + fsPod + "\n", "pgid:40"},
		{"both on a legacy host", legacy, tenant + "99:freezer:" + fsPod + "\n0::" + podPath + "\n", "pgid:40"},
		{"a hybrid host's honest file", hybrid, "6:freezer:/\n4:memory:" + podPath + "\n1:name=systemd:" + podPath + "\n0::" + podPath + "\n", "v2" + podPath},
		{"a hybrid host's honest file, its pod in the v1 freezer", hybrid, "6:freezer:" + fsPod + "\n4:memory:" + fsPod + "\n1:name=systemd:" + agent + "\n0::" + agent + "\n", "freezer" + fsPod},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			h.cgroupV2Dir(podPath)
			h.cgroupV2Dir(agent)
			h.cgroupV1Dir(fsPod)
			h.self(c.self)
			h.process(40, "/", "", 40)
			must(t, os.WriteFile(filepath.Join(h.proc, "40", "cgroup"), []byte(c.cgroup), 0o644))
			p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
			g, err := p.r.resolve(40)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if !strings.HasPrefix(want, "pgid:") {
				want = filepath.Join(filepath.Dir(h.proc), want)
			}
			if g.Key() != want {
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
