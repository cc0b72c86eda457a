package rebalance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// hookUnit is the unit systemd-move.sh finds for PID 7 of cgroup file
// file (a dry run, a move by PID alone), "" for none.
func hookUnit(t *testing.T, file string) string {
	t.Helper()
	return hookUnitIn(t, fakeProcRoot(t, map[int]string{7: file}))
}

// hookUnitIn is the unit systemd-move.sh finds for PID 7 under the procfs
// root root.
func hookUnitIn(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("sh", hookPath(t, "systemd-move.sh"))
	cmd.Env = append(os.Environ(), "PROC_ROOT="+root, "SYSTEMCTL=/bin/true")
	cmd.Stdin = strings.NewReader(`{"dry_run":true,"moves":[{"tenant":"t","pid":7,"to_uuid":"GPU-1"}]}`)
	out, _ := cmd.Output()
	s, ok := strings.CutPrefix(string(out), "would restart ")
	if !ok {
		return ""
	}
	return strings.Fields(s)[0]
}

// The unit a plan's move names (the attribution's, kube.SystemdUnit of
// /proc/PID/cgroup) and the one systemd-move.sh finds for a move by PID
// alone are the same, from the same file: the planner keeps a move from
// restarting a unit that runs another tenant's process only if it sees
// the unit the hook restarts. Before, the attribution took the unit from
// the path ParseProcCgroup ranks first, a v1 controller's before
// name=systemd's: on cgroup v1 with the unit's memory accounting off
// (the process at the memory hierarchy's root) it saw no unit, and the
// hook restarted the service; for a Slurm job it saw none, and the hook
// restarted slurmd.service.
func TestSystemdUnitAgreesWithHook(t *testing.T) {
	pod := "/kubepods/burstable/pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5/" + strings.Repeat("ab", 32)
	for _, tc := range []struct{ name, file, want string }{
		{"v2", "0::/system.slice/llm.service\n", "llm.service"},
		{"v2, a subgroup", "0::/system.slice/llm.service/worker\n", "llm.service"},
		{"hybrid", "4:memory:/\n1:name=systemd:/system.slice/llm.service\n0::/system.slice/llm.service\n", "llm.service"},
		{"v1, no memory accounting", "11:hugetlb:/\n10:memory:/\n9:devices:/system.slice/llm.service\n7:freezer:/\n6:pids:/system.slice/llm.service\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/llm.service\n", "llm.service"},
		{"v1, a Slurm job", "10:memory:/slurm/uid_1000/job_42/step_0/task_0\n7:freezer:/slurm/uid_1000/job_42/step_0\n5:cpuset:/slurm/uid_1000/job_42/step_0\n1:name=systemd:/system.slice/slurmd.service\n", "slurmd.service"},
		{"v1, a template unit", "12:memory:/system.slice/system-llm.slice/llm-b@2.service\n1:name=systemd:/system.slice/system-llm.slice/llm-b@2.service\n", "llm-b@2.service"},
		{"through a cgroup namespace", `0::/../../system-train.slice/train@gpu\x2d0.service/worker` + "\n", `train@gpu\x2d0.service`},
		{"a session", "0::/user.slice/user-1000.slice/session-3.scope\n", ""},
		{"a container's", "12:memory:" + pod + "\n1:name=systemd:/system.slice/containerd.service\n", ""},
		{"a user manager's", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/trainer.service\n", ""},
		{"a forged unified line", "1:name=systemd:/system.slice/tenant.service/x\n0::/system.slice/victim.service\n0::/system.slice/tenant.service\n", ""},
		{"a forged named hierarchy", "4:memory:/system.slice/tenant.service/x\n9:name=systemd:/system.slice/victim.service\n1:name=systemd:/system.slice/tenant.service\n", ""},
		{"a delegated subtree's", "0::/system.slice/tenant.service/x.slice/sshd.service\n", ""},
		{"no systemd hierarchy", "10:memory:/system.slice/llm.service\n", ""},
		// a container's cgroup, as runc names one in a delegated subtree
		{"a subgroup of 64 hex digits", "0::/system.slice/llm.service/" + strings.Repeat("ab", 32) + "\n", ""},
	} {
		goUnit, shUnit := kube.SystemdUnit([]byte(tc.file)), hookUnit(t, tc.file)
		if goUnit != tc.want || shUnit != tc.want {
			t.Errorf("%s: the attribution's unit %q, the hook's %q; want %q", tc.name, goUnit, shUnit, tc.want)
		}
	}
}

// TestHookRefusesUnifiedLineOnLegacyHost: on a cgroup v1 host with no
// cgroup2 mounted (PID 1's file, and the exporter's own, list no unified
// hierarchy), a tenant's service with a delegated name=systemd subtree
// names a cgroup "x\n0::" with system.slice/victim.service below it (a
// kernel before 4.13 takes it): the forged line comes last, as a unified
// line would, and no hierarchy is listed twice. Neither the attribution
// nor the hook takes a unit from it; before, both took victim.service.
// The hook compares the hierarchies with PID 1's, the attribution the
// unified line with its own file's; a file of the host's hierarchies
// keeps its unit.
func TestHookRefusesUnifiedLineOnLegacyHost(t *testing.T) {
	legacy := "11:memory:/system.slice/vgpu.service\n6:pids:/system.slice/vgpu.service\n2:cpu,cpuacct:/system.slice/vgpu.service\n1:name=systemd:/system.slice/vgpu.service\n"
	hybrid := legacy + "0::/system.slice/vgpu.service\n"
	for _, tc := range []struct{ name, host, file, want string }{
		{"a forged unified line", legacy, "11:memory:/system.slice/tenant.service\n6:pids:/system.slice/tenant.service\n2:cpu,cpuacct:/system.slice/tenant.service\n" +
			"1:name=systemd:/system.slice/tenant.service/x\n0::/system.slice/victim.service\n", ""},
		{"a legacy host's service", legacy, "11:memory:/\n6:pids:/system.slice/llm.service\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/llm.service\n", "llm.service"},
		{"a hybrid host's service", hybrid, "11:memory:/\n6:pids:/system.slice/llm.service\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/llm.service\n0::/system.slice/llm.service\n", "llm.service"},
	} {
		root := fakeProcRoot(t, map[int]string{1: tc.host, 7: tc.file})
		if err := os.Symlink("1", filepath.Join(root, "self")); err != nil {
			t.Fatal(err)
		}
		cg, err := kube.NewProcReader(root).Cgroup(7)
		if goUnit, shUnit := cg.Unit, hookUnitIn(t, root); goUnit != tc.want || shUnit != tc.want {
			t.Errorf("%s: the attribution's unit %q (%v), the hook's %q; want %q", tc.name, goUnit, err, shUnit, tc.want)
		}
	}
}
