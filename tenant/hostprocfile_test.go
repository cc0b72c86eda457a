package tenant

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// procRootOf is a procfs root with the cgroup file of each PID: its
// contents, or a directory in its place for "<dir>" (a file that cannot
// be read, not a process that is gone); "self" is the exporter's own.
func procRootOf(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, f := range files {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if f == "<dir>" {
			if err := os.Mkdir(filepath.Join(dir, "cgroup"), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// onChatsGPU builds a sample of llm/chat's GPU (namespace pod tenancy)
// with the pod's own process, 10, and pids, whose cgroup is read from
// their /proc/PID/cgroup under root: each one's tenant and workload.
func onChatsGPU(t *testing.T, root string, pids ...uint32) (tenants, work map[uint32]string) {
	t.Helper()
	return onChatsGPUWith(t, kube.NewProcReader(root), pids...)
}

// onChatsGPUWith is onChatsGPU with pids' cgroup read from proc.
func onChatsGPUWith(t *testing.T, proc ProcFacts, pids ...uint32) (tenants, work map[uint32]string) {
	t.Helper()
	procs := []gpu.Process{podProc(10, "chat", 0.4)}
	for _, pid := range pids {
		p := testutil.MIGProc(pid, "python", -1)
		p.SMUtil = gpu.Float(0.1)
		procs = append(procs, p)
	}
	d0 := testutil.Device(0, "GPU-0", procs...)
	d0.Activity.SMActive = gpu.Float(0.7)
	b := mustBuilder(t, "", BuilderOptions{Pods: fixedPods{podsOn(t, "llm/chat=GPU-0")}, PodTenancy: PodTenancy{ByNamespace: true}, Proc: proc})
	s := b.Build(&gpu.Readings{Devices: []gpu.Device{d0}}, gpu.SamplerStats{})
	tenants, work = map[uint32]string{}, map[uint32]string{}
	for _, u := range s.Usage {
		for _, pid := range u.PIDs {
			tenants[pid] = u.Tenant
		}
		for _, w := range u.Workloads {
			work[w.PID] = fmt.Sprintf("pod=%v unit=%q", w.Pod, w.Unit)
		}
	}
	if tenants[10] != "llm" {
		t.Errorf("the pod's own process went to %q", tenants[10])
	}
	return tenants, work
}

// TestHostProcessFromProcFileGetsNoPod: processes on llm/chat's GPU whose
// cgroup is read from their /proc/PID/cgroup. A host user's login session
// or a host service on a cgroup v1 host (memory accounting off: the
// memory line, the one ranked first, reads "/"; systemd's own line names
// the session or the service) is no pod's; so is a process whose file is
// refused (a cgroup named with a line break in it) or cannot be read (a
// path too long: here a directory in the file's place). Before, each was
// given the pod that holds the GPU. A process that is gone keeps the
// device rule.
func TestHostProcessFromProcFileGetsNoPod(t *testing.T) {
	files := map[string]string{
		"20": "11:cpuset:/\n10:memory:/\n9:devices:/user.slice\n5:pids:/user.slice/user-1000.slice/session-3.scope\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n",
		"21": "11:hugetlb:/\n10:memory:/\n9:devices:/system.slice/job.service\n6:pids:/system.slice/job.service\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/job.service\n",
		// a cgroup of its user manager's delegated subtree named "x\n0::/"
		"22": "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x\n0::/\n",
		"23": "<dir>",
	}
	tenants, work := onChatsGPU(t, procRootOf(t, files), 20, 21, 22, 23, 24)
	for _, pid := range []uint32{20, 21, 22, 23} {
		if tenants[pid] != Unassigned {
			t.Errorf("pid %d (a host process, %q) went to tenant %q, want %s; workload %s", pid, files[strconv.Itoa(int(pid))], tenants[pid], Unassigned, work[pid])
		}
	}
	if tenants[24] != "llm" {
		t.Errorf("pid 24 (gone, its place unknown) went to tenant %q, want the pod's, llm", tenants[24])
	}
}

// TestForgedUnifiedLineOnLegacyHost: on a cgroup v1 host with no cgroup2
// mounted (the exporter's own file has no "0::" line), a tenant's service
// with a delegated name=systemd subtree names a cgroup "x\n0::/<path>"
// (a kernel before 4.13 takes it): listed last, as a unified line is.
// Before, the forged line was the process's: a pod's path gave it the
// pod, a service's the service as its workload's unit.
func TestForgedUnifiedLineOnLegacyHost(t *testing.T) {
	legacy := "11:memory:/system.slice/tenant.service\n2:cpu,cpuacct:/system.slice/tenant.service\n1:name=systemd:/system.slice/tenant.service"
	files := map[string]string{
		"self": "11:memory:/system.slice/vgpu.service\n2:cpu,cpuacct:/system.slice/vgpu.service\n1:name=systemd:/system.slice/vgpu.service\n",
		"30":   legacy + "/x\n0::/kubepods/burstable/pod" + podUID("chat") + "/0123456789abcdef\n",
		"31":   legacy + "/x\n0::/system.slice/victim.service\n",
	}
	tenants, work := onChatsGPU(t, procRootOf(t, files), 30, 31)
	if tenants[30] != Unassigned {
		t.Errorf("pid 30 (a forged pod's path) went to tenant %q, want %s; workload %s", tenants[30], Unassigned, work[30])
	}
	if w, ok := work[31]; ok {
		t.Errorf("pid 31 (a forged service's path): workload %s, want none", w)
	}
}
