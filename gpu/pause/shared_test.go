package pause

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A group a pause freezes that holds another tenant's GPU process is
// named, with that tenant and PID: a process group (a launcher script's
// background jobs), a unit whose sub-cgroups hold both tenants (cgroup v2
// and the v1 freezer), a unit the other's sub-cgroup is below. Separate
// groups, and another tenant's process gone, are no error.
func TestCheckPauseGroups(t *testing.T) {
	const jobs = "/system.slice/jobs.service"
	for _, c := range []struct {
		name  string
		setup func(h *host)
		want  []string // in the error; none: no error
	}{
		{"one process group", func(h *host) {
			h.process(20, "/", "", 20)
			h.process(21, "/", "", 20)
		}, []string{"process group 20", "PID 20 of tenant trainer", "PID 21 of tenant chat"}},
		{"process groups of their own", func(h *host) {
			h.process(20, "/", "", 20)
			h.process(21, "/", "", 21)
		}, nil},
		{"one unit's sub-cgroups", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.process(20, jobs+"/train", "", 20)
			h.process(21, jobs+"/serve", "", 21)
		}, []string{"/v2" + jobs + ",", "PID 21 of tenant chat"}},
		{"a sub-cgroup of the unit", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.process(20, jobs, "", 20)
			h.process(21, jobs+"/serve", "", 21)
		}, []string{"/v2" + jobs + ",", "PID 21 of tenant chat"}},
		{"one unit's v1 freezer sub-cgroups", func(h *host) {
			h.cgroupV1Dir(jobs)
			h.process(20, "/", jobs+"/train", 20)
			h.process(21, "/", jobs+"/serve", 21)
		}, []string{"freezer cgroup ", "/freezer" + jobs + ",", "PID 21 of tenant chat"}},
		{"units of their own", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.cgroupV2Dir("/system.slice/web.service")
			h.process(20, jobs, "", 20)
			h.process(21, "/system.slice/web.service", "", 20)
		}, nil},
		{"pods of their own", func(h *host) {
			h.cgroupV2Dir(podPath)
			h.process(20, podPath, "", 20)
			h.process(21, "/kubepods.slice/kubepods-pod1.slice/cri-containerd-"+strings.Repeat("e", 64)+".scope", "", 21)
		}, nil},
		{"the other tenant's process gone", func(h *host) {
			h.process(20, "/", "", 20)
		}, nil},
		{"the other's cgroup file forged", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.process(20, jobs, "", 20)
			h.process(21, "/", "", 21)
			// a cgroup named "x\n0::/" under the unit: the unified
			// hierarchy listed twice, the second line forged
			must(h.t, os.WriteFile(filepath.Join(h.proc, "21", "cgroup"), []byte("0::"+jobs+"/x\n0::/\n"), 0o644))
		}, []string{"/v2" + jobs + ",", "may hold PID 21 of tenant chat", "its cgroup file"}},
		{"the other's cgroup file forged on a legacy host", func(h *host) {
			// no cgroup2 mounted: the other's "0::" line, listed last as
			// the kernel lists the unified one, is a cgroup name's
			h.self("6:freezer:/\n1:name=systemd:/system.slice/vgpu-exporter.service\n")
			h.cgroupV1Dir(jobs)
			h.process(20, "/", jobs+"/train", 20)
			must(h.t, os.WriteFile(filepath.Join(h.proc, "20", "cgroup"), []byte("6:freezer:"+jobs+"/train\n1:name=systemd:"+jobs+"\n"), 0o644))
			h.process(21, "/", "/", 21)
			must(h.t, os.WriteFile(filepath.Join(h.proc, "21", "cgroup"), []byte("6:freezer:/\n1:name=systemd:/user.slice/x\n0::"+jobs+"/serve\n"), 0o644))
		}, []string{"/freezer" + jobs + ",", "may hold PID 21 of tenant chat", "its cgroup file", "where the kernel lists none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			c.setup(h)
			p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
			err := p.CheckPauseGroups("trainer", []uint32{20}, map[uint32]string{21: "chat"})
			t.Logf("%v", err)
			if (err != nil) != (len(c.want) > 0) {
				t.Fatalf("error %v, want one: %v", err, len(c.want) > 0)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Two real processes a script started in the background share its
// process group: a pause of one would stop the other, which is said.
func TestCheckPauseGroupsRealProcessGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $! ; sleep 300 & echo $! ; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var pids []uint32
	buf := make([]byte, 64)
	for len(pids) < 2 {
		n, err := out.Read(buf)
		must(t, err)
		for _, f := range strings.Fields(string(buf[:n])) {
			p, err := strconv.Atoi(f)
			must(t, err)
			pids = append(pids, uint32(p))
		}
	}
	p, err := New(Options{Clock: gpu.NewManualClock(time.Unix(0, 0)), ProcRoot: "/proc"}) // signals only
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	err = p.CheckPauseGroups("trainer", pids[:1], map[uint32]string{pids[1]: "chat"})
	want := fmt.Sprintf("process group %d, which PID %d of tenant trainer is paused by, holds PID %d of tenant chat", cmd.Process.Pid, pids[0], pids[1])
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one saying %q", err, want)
	}
}

// Two processes of a tenant in one process group: the group is stopped
// while either is in it (the first exits: the second is stopped still),
// and is gone, no failure, once both are.
func TestProcessGroupMembers(t *testing.T) {
	stop := fmt.Sprintf("-50 %s", syscall.SIGSTOP)
	for _, c := range []struct {
		name     string
		exit     []int
		stopped  bool
		failures uint64
	}{
		{"the first exits", []int{50}, true, 0},
		{"the second exits", []int{51}, true, 0},
		{"both exit", []int{50, 51}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			h.process(50, "/", "", 50)
			h.process(51, "/", "", 50)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{50, 51}, 0.5))
			waitBlocked(t, clock, 1)
			clock.Advance(250 * time.Millisecond) // thaw
			waitBlocked(t, clock, 1)
			for _, pid := range c.exit {
				must(t, os.RemoveAll(filepath.Join(h.proc, strconv.Itoa(pid))))
			}
			h.mu.Lock()
			h.signals = nil
			h.mu.Unlock()
			clock.Advance(250 * time.Millisecond) // the next period's freeze
			waitBlocked(t, clock, 1)
			h.mu.Lock()
			sigs := slices.Clone(h.signals)
			h.mu.Unlock()
			if got := slices.Contains(sigs, stop); got != c.stopped {
				t.Errorf("signals %q at the next period: stopped %v, want %v", sigs, got, c.stopped)
			}
			if got := p.PauseFreezeFailures()["trainer"]; got != c.failures {
				t.Errorf("%d freeze failures, want %d", got, c.failures)
			}
		})
	}
}

// The groups a pause in force freezes are checked with those the tenant's
// PIDs are in now: a PID a reload gave to another tenant counts as the
// other's (its process group, which the pause stops, holds it), and the
// unit of the tenant's process that exited, frozen still, holds a process
// another tenant started there. A process group none of whose paused
// processes is left is stopped no more, and holds no one.
func TestCheckPauseGroupsInForce(t *testing.T) {
	const jobs = "/system.slice/jobs.service"
	exits := func(h *host) { // train's process 20 exits
		must(h.t, os.RemoveAll(filepath.Join(h.proc, "20")))
		delete(h.pgids, 20)
	}
	for _, c := range []struct {
		name   string
		before func(h *host) // before train's pause of paused
		after  func(h *host) // after it; chat's process is 21
		paused []uint32
		pids   []uint32 // the check's
		want   []string // in the error; none: no error
	}{
		{"a paused PID the other's since a reload", func(h *host) {
			h.process(20, "/", "", 20)
			h.process(21, "/", "", 20)
		}, func(*host) {}, []uint32{20, 21}, []uint32{20, 21},
			[]string{"process group 20, which PID 20 of tenant trainer is paused by, holds PID 21 of tenant chat"}},
		{"the unit of its exited process holds the other's", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.process(20, jobs, "", 20)
		}, func(h *host) {
			exits(h)
			h.process(21, jobs, "", 21)
		}, []uint32{20}, []uint32{20},
			[]string{"/v2" + jobs + ", which the pause of tenant trainer in force freezes, holds PID 21 of tenant chat"}},
		{"the unit of its exited process, no PIDs checked", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.process(20, jobs, "", 20)
		}, func(h *host) {
			exits(h)
			h.process(21, jobs, "", 21)
		}, []uint32{20}, nil,
			[]string{"/v2" + jobs + ", which the pause of tenant trainer in force freezes, holds PID 21 of tenant chat"}},
		{"a unit of its own", func(h *host) {
			h.cgroupV2Dir(jobs)
			h.cgroupV2Dir("/system.slice/web.service")
			h.process(20, jobs, "", 20)
		}, func(h *host) {
			exits(h)
			h.process(21, "/system.slice/web.service", "", 21)
		}, []uint32{20}, []uint32{20}, nil},
		{"the process group of its exited process", func(h *host) {
			h.process(20, "/", "", 20)
		}, func(h *host) {
			exits(h)
			h.process(21, "/", "", 20)
		}, []uint32{20}, []uint32{20}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			c.before(h)
			p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", c.paused, 0.5))
			c.after(h)
			err := p.CheckPauseGroups("trainer", c.pids, map[uint32]string{21: "chat"})
			t.Logf("%v", err)
			if (err != nil) != (len(c.want) > 0) {
				t.Fatalf("error %v, want one: %v", err, len(c.want) > 0)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Each other tenant's process is read once a check, however many groups
// the tenant's pause freezes: its process group (and cgroup) read once,
// not once per group.
func TestCheckPauseGroupsReadsEachOnce(t *testing.T) {
	h := newHost(t)
	pids := []uint32{20, 21, 22}
	for _, pid := range pids {
		h.process(int(pid), "/", "", int(pid))
	}
	others := map[uint32]string{}
	for pid := 30; pid < 35; pid++ {
		h.process(pid, "/", "", pid)
		others[uint32(pid)] = "chat"
	}
	reads := map[int]int{}
	h.pgidHook = func(pid int) (int, bool) {
		reads[pid]++
		return 0, false
	}
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
	must(t, p.CheckPauseGroups("trainer", pids, others))
	for pid := range others {
		if n := reads[int(pid)]; n != 1 {
			t.Errorf("PID %d of chat: process group read %d times for %d groups, want once", pid, n, len(pids))
		}
	}
}
