package rebalance

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// hookUnit is the unit systemd-move.sh finds for PID 7 of cgroup file
// file (a dry run, a move by PID alone), "" for none.
func hookUnit(t *testing.T, file string) string {
	t.Helper()
	root := fakeProcRoot(t, map[int]string{7: file})
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
	} {
		goUnit, shUnit := kube.SystemdUnit([]byte(tc.file)), hookUnit(t, tc.file)
		if goUnit != tc.want || shUnit != tc.want {
			t.Errorf("%s: the attribution's unit %q, the hook's %q; want %q", tc.name, goUnit, shUnit, tc.want)
		}
	}
}
