package kube

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	cid  = "5b8f9c1e2d3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e"
	puid = "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
)

func TestParseCgroupPath(t *testing.T) {
	otherCID := strings.Repeat("ab", 32)
	tests := []struct {
		name, path      string
		pod, ctr, rtime string
	}{
		{"containerd systemd v2", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		{"containerd guaranteed systemd", "/kubepods.slice/kubepods-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		{"besteffort systemd", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		// the kubelet's cgroupRoot set (kind, nvkind: "/kubelet"): the
		// systemd driver names each slice by the whole path of names
		{"systemd with a cgroup root", "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		{"systemd with a cgroup root, guaranteed", "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		{"cgroupfs with a cgroup root", "/kubelet/kubepods/burstable/pod" + puid + "/" + cid, puid, cid, ""},
		{"a slice named like a pod outside kubepods is no pod", "/user.slice/user-1000.slice/app-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", "", cid, "containerd"},
		{"cgroupfs burstable", "/kubepods/burstable/pod" + puid + "/" + cid, puid, cid, ""},
		{"cgroupfs guaranteed", "/kubepods/pod" + puid + "/" + cid, puid, cid, ""},
		{"cgroupfs besteffort", "/kubepods/besteffort/pod" + puid + "/" + cid, puid, cid, ""},
		{"crio systemd", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/crio-" + cid + ".scope", puid, cid, "crio"},
		{"crio cgroupfs", "/kubepods/burstable/pod" + puid + "/crio-" + cid, puid, cid, "crio"},
		{"crio cgroupfs conmon is not the container", "/kubepods/burstable/pod" + puid + "/crio-conmon-" + cid, puid, "", ""},
		{"crio conmon is not the container", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/crio-conmon-" + cid + ".scope", puid, "", ""},
		{"docker in kubernetes (dockershim)", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/docker-" + cid + ".scope", puid, cid, "docker"},
		{"plain docker cgroupfs", "/docker/" + cid, "", cid, "docker"},
		{"plain docker systemd", "/system.slice/docker-" + cid + ".scope", "", cid, "docker"},
		{"podman", "/machine.slice/libpod-" + cid + ".scope", "", cid, "podman"},
		{"nested init (v2 with subgroup)", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope/init", puid, cid, "containerd"},
		{"static pod 32-hex uid", "/kubepods/burstable/pod6c2e6b2d0d3f4a1b8c9d0e1f2a3b4c5d/" + cid, "6c2e6b2d0d3f4a1b8c9d0e1f2a3b4c5d", cid, ""},
		// read from a pod's own cgroup namespace: the path climbs to the
		// common ancestor (kubepods, or its QoS class) and comes down
		{"cgroupfs from a namespace, other QoS class", "/../../../burstable/pod" + puid + "/" + cid, puid, cid, ""},
		{"cgroupfs from a namespace, besteffort", "/../../../besteffort/pod" + puid + "/" + cid, puid, cid, ""},
		{"cgroupfs from a namespace, same QoS class or guaranteed", "/../../pod" + puid + "/" + cid, puid, cid, ""},
		{"cgroupfs from a namespace, a subgroup of the container", "/../../pod" + puid + "/" + cid + "/init", puid, cid, ""},
		{"cgroupfs from a namespace, underscores", "/../../pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5/" + cid, puid, cid, ""},
		{"cgroupfs from a namespace, static pod", "/../../../burstable/pod6c2e6b2d0d3f4a1b8c9d0e1f2a3b4c5d/" + cid, "6c2e6b2d0d3f4a1b8c9d0e1f2a3b4c5d", cid, ""},
		{"crio cgroupfs from a namespace", "/../../../burstable/pod" + puid + "/crio-" + cid, puid, cid, "crio"},
		{"crio cgroupfs conmon from a namespace", "/../../../burstable/pod" + puid + "/crio-conmon-" + cid, puid, "", ""},
		{"systemd from a namespace", "/../../kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		// a cgroup named like a pod outside kubepods is no pod's
		{"pod-named cgroup in a user's manager", "/user.slice/user-1000.slice/user@1000.service/pod" + puid + "/" + cid, "", "", ""},
		{"pod-named cgroup in a service", "/system.slice/runner.service/pod" + puid + "/" + cid, "", "", ""},
		{"pod-named cgroup at the root", "/pod" + puid + "/" + cid, "", "", ""},
		{"pod-named cgroup in a user's manager, from a namespace", "/../../../../user.slice/user-1000.slice/user@1000.service/pod" + puid + "/" + cid, "", "", ""},
		{"pod-named cgroup under another slice, from a namespace", "/../../../build.slice/pod" + puid + "/" + cid, "", "", ""},
		{"pod-named cgroup in a container, from a namespace", "/../../../../system.slice/docker-" + cid + ".scope/pod" + puid + "/" + cid, "", cid, "docker"},
		{"pod segment with more than the uid, from a namespace", "/../../xpod" + puid + "/" + cid, "", "", ""},
		// a kubepods cgroup made below a user's slice or a service (a user
		// manager's, every login user's, or any Delegate=yes service) with
		// another pod's name below it: its owner's, no pod's (pod UIDs are
		// in every pod process's world-readable /proc/PID/cgroup)
		{"kubepods in a user's manager", "/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods/pod" + puid + "/" + cid, "", "", ""},
		{"kubepods slices in a user's manager", "/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods.slice/kubepods-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", "", cid, "containerd"},
		{"kubepods in a user's slice", "/user.slice/kubepods/pod" + puid + "/" + cid, "", "", ""},
		{"kubepods in a service", "/system.slice/tenant.service/kubepods/burstable/pod" + puid + "/" + cid, "", "", ""},
		{"kubepods in a service, from a namespace", "/../../../system.slice/tenant.service/kubepods/pod" + puid + "/" + cid, "", "", ""},
		{"kubepods in a user's manager, from a namespace", "/../../../../user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice", "", "", ""},
		// a node in a container's or a machine's scope (kind, a
		// systemd-nspawn machine) is a node: its kubepods names pods
		{"a kind node in a container's scope", "/system.slice/docker-" + strings.Repeat("ab", 32) + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", puid, cid, "containerd"},
		{"a node in a machine's scope", "/machine.slice/machine-node1.scope/payload/kubepods/burstable/pod" + puid + "/" + cid, puid, cid, ""},
		{"user session", "/user.slice/user-1000.slice/session-3.scope", "", "", ""},
		{"root", "/", "", "", ""},
		{"empty", "", "", "", ""},
		{"hex outside containers ignored", "/system.slice/" + cid, "", "", ""},
		// A container that may make cgroups of its own (nested containers,
		// a delegated subtree) names them as it likes: a pod's name or
		// another container's ID below its own scope is its own, never the
		// pod it names. The outermost pod and its container are the kubelet's.
		{"another pod's name inside a container, systemd", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope/kubepods-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + otherCID + ".scope", puid, cid, "containerd"},
		{"another pod's name inside a container, cgroupfs", "/kubepods/besteffort/pod" + puid + "/" + cid + "/kubepods/pod11111111-2222-3333-4444-555555555555/" + otherCID, puid, cid, ""},
		{"another container's ID inside a container", "/kubepods/pod" + puid + "/" + cid + "/docker-" + otherCID + ".scope", puid, cid, ""},
		{"another pod's name between the pod and its container", "/kubepods/pod" + puid + "/pod11111111-2222-3333-4444-555555555555/" + cid, puid, "", ""},
		{"a node in a container: the pod's container, not the node's", "/docker/" + otherCID + "/kubepods/burstable/pod" + puid + "/" + cid, puid, cid, "docker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseCgroupPath(tc.path)
			if got.PodUID != tc.pod || got.ContainerID != tc.ctr || got.Runtime != tc.rtime || got.Path != tc.path {
				t.Errorf("ParseCgroupPath(%q) = %+v, want pod %q container %q runtime %q", tc.path, got, tc.pod, tc.ctr, tc.rtime)
			}
		})
	}
}

// v1 lines as runc writes them for a container: every controller's
// hierarchy (cpu,cpuacct and net_cls,net_prio co-mounted) at path, and
// name=systemd at sd.
func v1Lines(path, sd string) string {
	return "12:pids:" + path + "\n11:hugetlb:" + path + "\n10:net_cls,net_prio:" + path + "\n9:perf_event:" + path +
		"\n8:devices:" + path + "\n7:freezer:" + path + "\n6:blkio:" + path + "\n5:cpuset:" + path +
		"\n4:memory:" + path + "\n3:cpu,cpuacct:" + path + "\n2:rdma:/\n1:name=systemd:" + sd + "\n"
}

func TestParseProcCgroup(t *testing.T) {
	const otherUID = "11111111-2222-3333-4444-555555555555"
	fsPath := "/kubepods/burstable/pod" + puid + "/" + cid
	sdPath := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope"
	otherPod := "/kubepods/besteffort/pod6c2e6b2d0d3f4a1b8c9d0e1f2a3b4c5d/" + cid
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"v2, systemd driver", "0::" + sdPath + "\n", sdPath, false},
		{"v2, cgroupfs driver", "0::" + fsPath + "\n", fsPath, false},
		{"v2, a cgroup removed under a zombie", "0::" + sdPath + " (deleted)\n", sdPath, false},
		{"v2, no pod", "0::/kubepods.slice/kubepods-burstable.slice/x.scope\n", "/kubepods.slice/kubepods-burstable.slice/x.scope", false},
		{"v1, cgroupfs driver", v1Lines(fsPath, fsPath), fsPath, false},
		{"v1, systemd driver", v1Lines(sdPath, sdPath), sdPath, false},
		{"v1, name=systemd left in the runtime's service", v1Lines(fsPath, "/system.slice/containerd.service"), fsPath, false},
		{"v1 prefers the hierarchy naming the pod", "3:name=systemd:/user.slice\n2:memory:" + fsPath + "\n", fsPath, false},
		{"v1 no pod picks memory", "7:freezer:/\n2:memory:/user.slice\n", "/user.slice", false},
		// hybrid: v1 controllers and a unified hierarchy with none
		{"hybrid, systemd driver: the pod in both", v1Lines(sdPath, sdPath) + "0::" + sdPath + "\n", sdPath, false},
		{"hybrid, cgroupfs driver: the pod in both", v1Lines(fsPath, fsPath) + "0::" + fsPath + "\n", fsPath, false},
		{"hybrid, cgroupfs driver: unified left in the runtime's service", v1Lines(fsPath, fsPath) + "0::/system.slice/containerd.service\n", fsPath, false},
		{"hybrid: unified at the root", v1Lines(fsPath, fsPath) + "0::/\n", fsPath, false},
		{"hybrid, systemd driver: unified in the runtime's own form", v1Lines(sdPath, sdPath) +
			"0::/system.slice/containerd.service/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice:cri-containerd:" + cid + "\n", sdPath, false},
		{"hybrid: the pod in memory only", "7:freezer:/\n4:memory:" + fsPath + "\n1:name=systemd:/\n0::/\n", fsPath, false},
		{"hybrid: unified names a pod, v1 another: unified", v1Lines(otherPod, otherPod) + "0::" + fsPath + "\n", fsPath, false},
		{"hybrid: a pod over a container alone", "4:memory:" + fsPath + "\n0::/docker/" + cid + "\n", fsPath, false},
		{"hybrid, no pod: unified", "4:memory:/user.slice\n1:name=systemd:/system.slice/llm-a.service\n0::/system.slice/llm-a.service\n", "/system.slice/llm-a.service", false},
		{"hybrid, a VM: unified", "4:memory:/machine.slice\n1:name=systemd:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope\n0::/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope/libvirt\n", "/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope/libvirt", false},
		{"garbage", "not a cgroup file\n", "", true},
		{"bad id", "x::/a\n", "", true},
		{"empty", "", "", true},
		// A tenant that names a cgroup of its delegated subtree with a
		// line break in it forges a line after its own: the file is
		// refused, never read as another pod's process.
		{"v2 forged unified line", "0::/kubepods/pod" + puid + "/x\n0::/kubepods/pod" + otherUID + "/" + cid + "\n", "", true},
		{"v1 forged line naming another pod", "4:memory:/user.slice/x\n9:memory,cpu,pids:/kubepods/pod" + otherUID + "/" + cid + "\n1:name=systemd:/user.slice\n", "", true},
		{"v1 forged hierarchy ID", "4:memory:/a\n4:pids:/kubepods/pod" + otherUID + "\n", "", true},
		{"hybrid, a forged v1 line naming another pod", "4:memory:/user.slice/x\n4:memory:/kubepods/pod" + otherUID + "/" + cid + "\n0::/user.slice/x\n", "", true},
		{"forged line without a hierarchy ID", "0::/a/x\nevil\n", "", true},
		// on a host with the unified hierarchy alone, a line of another
		// (one the host has not) after it, naming another pod
		{"v2 forged line of a hierarchy without controllers", "0::/system.slice/t.service/x\n5::/kubepods/pod" + otherUID + "/" + cid + "\n", "", true},
		{"v2 forged line of a v1 hierarchy", "0::/system.slice/t.service/x\n5:freezer:/kubepods/pod" + otherUID + "/" + cid + "\n", "", true},
		{"v1 forged hierarchy ID written otherwise", "4:memory:/a\n04:pids:/kubepods/pod" + otherUID + "\n", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcCgroup([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// WriteProc writes a fake /proc/PID directory (exported for the tests of
// package kube_test).
func WriteProc(t *testing.T, root string, pid int, cgroup, comm, status string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"cgroup": cgroup, "comm": comm, "status": status} {
		if data == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProcReader(t *testing.T) {
	root := t.TempDir()
	WriteProc(t, root, 42, "0::/kubepods/pod"+puid+"/"+cid+"\n", "vllm\n", "Name:\tvllm\nUid:\t1000\t1000\t1000\t1000\n")
	p := NewProcReader(root)
	if cg, err := p.Cgroup(42); err != nil || ParseCgroupPath(cg.Path).PodUID != puid || cg.Unit != "" || cg.NoPod {
		t.Errorf("cgroup = %+v, %v", cg, err)
	}
	WriteProc(t, root, 44, "10:memory:/\n1:name=systemd:/system.slice/llm.service\n", "", "")
	if cg, err := p.Cgroup(44); err != nil || cg.Path != "/" || cg.Unit != "llm.service" || !cg.NoPod {
		t.Errorf("cgroup = %+v, %v; want /, llm.service, no pod's", cg, err)
	}
	if c := p.Comm(42); c != "vllm" {
		t.Errorf("comm = %q", c)
	}
	if u := p.UID(42); u != 1000 {
		t.Errorf("uid = %d", u)
	}
	if _, err := p.Cgroup(43); err == nil {
		t.Error("missing pid: no error")
	}
	if u := p.UID(43); u != -1 {
		t.Errorf("missing uid = %d", u)
	}
}

func TestSystemdService(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/system.slice/llm-a.service", "llm-a.service"},
		{"/system.slice/llm-a.service/worker", "llm-a.service"},
		{"/system.slice/system-llm.slice/llm@2.service", "llm@2.service"},
		{"/system.slice/llm-a.service/a/b", ""}, // deeper than a plain subgroup
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/trainer.service", ""},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope", ""},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope", ""},
		{"/system.slice/containerd.service/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice:cri-containerd:" + cid, ""},
		{"/system.slice/containerd.service", ""},
		{"/system.slice/docker-" + cid + ".scope", ""},
		{"/system.slice/runner.service/" + cid, ""},
		{"/system.slice/.service", ""},
		// a service's own cgroups, named like units of the system's (a
		// subtree delegated to it): no unit
		{"/system.slice/tenant.service/sshd.service", ""},
		{"/system.slice/tenant.service/sshd.service/worker", ""},
		{"/system.slice/tenant.service/a/sshd.service", ""},
		{"/../../tenant.service/sshd.service", ""},
		// nor below a slice it made: every cgroup above the unit must be a slice
		{"/system.slice/tenant.service/x.slice/sshd.service", ""},
		{"/system.slice/tenant.service/x.slice/sshd.service/worker", ""},
		{"/system.slice/tenant.service/x.slice/y.slice/sshd.service", ""},
		{"/../../tenant.service/x.slice/sshd.service", ""},
		{"/system.slice/docker-" + cid + ".scope/x.slice/sshd.service", ""},
		{"/../../a.slice/b.slice/trainer.service", "trainer.service"},
		// at the root, and relative to the reader's cgroup namespace
		{"/trainer.service", "trainer.service"},
		{"/../../trainer.service/worker", "trainer.service"},
		{"/", ""},
		{"", ""},
	} {
		if got := SystemdService(tc.path); got != tc.want {
			t.Errorf("SystemdService(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// SystemdUnit takes the service from systemd's own hierarchy, the unified
// line's, else name=systemd's, as systemd-move.sh does: on cgroup v1 the
// memory and cpu hierarchies that ParseProcCgroup ranks first hold a
// process at the root where its unit's accounting is off, and a Slurm
// job's in the job's cgroup (its name=systemd one slurmd's). Before, the
// unit was taken from the ranked path: none for the first (a move by PID
// alone, the hook restarting the unit the planner never saw), none for
// the second where the hook restarts slurmd.service.
func TestSystemdUnit(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"v2", "0::/system.slice/llm.service\n", "llm.service"},
		{"v2, a plain subgroup", "0::/system.slice/llm.service/worker\n", "llm.service"},
		{"hybrid", "4:memory:/\n1:name=systemd:/system.slice/llm.service\n0::/system.slice/llm.service\n", "llm.service"},
		{"hybrid, unified and name=systemd differ", "1:name=systemd:/system.slice/b.service\n0::/system.slice/a.service\n", "a.service"},
		{"a line after the unified one (refused)", "0::/system.slice/a.service\n1:name=systemd:/system.slice/b.service\n", ""},
		{"v1, no memory accounting", "11:hugetlb:/\n10:memory:/\n9:devices:/system.slice/llm.service\n6:pids:/system.slice/llm.service\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/llm.service\n", "llm.service"},
		{"v1, a Slurm job", "10:memory:/slurm/uid_1000/job_42/step_0/task_0\n7:freezer:/slurm/uid_1000/job_42/step_0\n1:name=systemd:/system.slice/slurmd.service\n", "slurmd.service"},
		{"v1, memory names a service, systemd's none", "10:memory:/system.slice/llm.service\n1:name=systemd:/\n", ""},
		{"v1, no systemd hierarchy", "10:memory:/system.slice/llm.service\n", ""},
		// a process any line places in a pod, a container, a scope or a
		// user manager: its unit, if any, is not its own
		{"hybrid, the pod in v1", v1Lines("/kubepods/burstable/pod"+puid+"/"+cid, "/system.slice/containerd.service") + "0::/system.slice/containerd.service\n", ""},
		{"v1, a session scope", "10:memory:/system.slice/llm.service\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n", ""},
		{"v2, a user manager's", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/llm.service\n", ""},
		{"v2, a delegated subtree's", "0::/system.slice/tenant.service/x.slice/sshd.service\n", ""},
		{"forged", "0::/system.slice/t.service/x\n5::/system.slice/sshd.service\n", ""},
		{"empty", "", ""},
	} {
		if got := SystemdUnit([]byte(tc.file)); got != tc.want {
			t.Errorf("%s: SystemdUnit = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMachineScope(t *testing.T) {
	const vm = `/machine.slice/machine-qemu\x2d1\x2dtrain.scope`
	for _, tc := range []struct{ path, want string }{
		{vm + "/libvirt/emulator", vm},
		{vm + "/libvirt/vcpu0", vm},
		{vm, vm},
		{"/../.." + vm + "/libvirt/emulator", "/../.." + vm},
		{vm + `/payload/system.slice/machine.slice/machine-qemu\x2d9\x2dinner.scope/libvirt`, vm + `/payload/system.slice/machine.slice/machine-qemu\x2d9\x2dinner.scope`},
		{"/machine.slice/machine-.scope", ""},
		{"/machine.slice/libvirtd.service", ""},
		{"/machine.slice", ""},
		{"/user.slice/user-1000.slice/session-4.scope", ""},
		// Proxmox VE's VM: the scope of its VMID in qemu.slice at the
		// root, under cgroup v2 and each v1 controller alike
		{"/qemu.slice/100.scope", "/qemu.slice/100.scope"},
		{"/qemu.slice/999999999.scope", "/qemu.slice/999999999.scope"},
		{"/../../qemu.slice/100.scope", "/../../qemu.slice/100.scope"},
		{"/qemu.slice/100.scope/worker", "/qemu.slice/100.scope"},
		// and nowhere else: a user's slice or manager, a nested slice, a
		// scope not named by a VMID
		{"/user.slice/user-1000.slice/user@1000.service/qemu.slice/100.scope", ""},
		{"/user.slice/qemu.slice/100.scope", ""},
		{"/system.slice/qemu.slice/100.scope", ""},
		{"/../../user.slice/user-1000.slice/user@1000.service/qemu.slice/100.scope", ""},
		{"/qemu.slice/qemu.slice/100.scope", ""},
		{"/qemu.slice/0100.scope", ""},
		{"/qemu.slice/vm100.scope", ""},
		{"/qemu.slice/100.service", ""},
		{"/qemu.slice/.scope", ""},
		{"/qemu.slice", ""},
		{"/", ""},
		{"", ""},
	} {
		if got := MachineScope(tc.path); got != tc.want {
			t.Errorf("MachineScope(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestReadProcCgroupNoPod: a file none of whose lines names a pod is in no
// pod's place where systemd's own line (the unified one, else
// name=systemd's) names a session, a user's slice or a service, whatever
// the line ranked first (a v1 controller's at the root, the unit's
// accounting off) says. Before, only the line ranked first was read, and
// "/" is not known to be no pod's.
func TestReadProcCgroupNoPod(t *testing.T) {
	pod := "/kubepods/burstable/pod" + puid + "/" + cid
	for _, tc := range []struct {
		name, file string
		noPod      bool
	}{
		{"v1, a session", "10:memory:/\n5:pids:/user.slice/user-1000.slice/session-3.scope\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n", true},
		{"v1, a service", "10:memory:/\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/job.service\n", true},
		{"hybrid, a service", "10:memory:/\n1:name=systemd:/\n0::/system.slice/job.service\n", true},
		{"v1, a pod's", "10:memory:" + pod + "\n1:name=systemd:/system.slice/containerd.service\n", false},
		{"hybrid, a pod's in v1", "10:memory:" + pod + "\n0::/system.slice/containerd.service\n", false},
		{"v1, the root", "10:memory:/\n1:name=systemd:/\n", false},
		{"v1, no systemd hierarchy", "10:memory:/\n", false},
		{"v2, a pod's", "0::" + pod + "\n", false},
	} {
		cg, err := ReadProcCgroup([]byte(tc.file), nil)
		if err != nil || cg.NoPod != tc.noPod || cg.NoPod && ParseCgroupPath(cg.Path).PodUID != "" {
			t.Errorf("%s: %+v, %v; want no pod's %v", tc.name, cg, err, tc.noPod)
		}
	}
}

// TestProcReaderRefusesUnifiedLineOnLegacyHost: where the reader's own
// file (the root's self/cgroup) has no unified line, no cgroup2 is
// mounted and a process's "0::" line is forged (a cgroup named "x\n0::/..."
// in a delegated name=systemd subtree, which a kernel before 4.13 takes):
// its file is refused, naming it. With cgroup2 mounted, or the own file
// not read, it is taken.
func TestProcReaderRefusesUnifiedLineOnLegacyHost(t *testing.T) {
	forged := "10:memory:/system.slice/tenant.service\n1:name=systemd:/system.slice/tenant.service/x\n0::/kubepods/burstable/pod" + puid + "/" + cid + "\n"
	for _, tc := range []struct {
		name, self string
		refused    bool
	}{
		{"a legacy host", "10:memory:/\n1:name=systemd:/system.slice/vgpu.service\n", true},
		{"a hybrid host", "10:memory:/\n1:name=systemd:/system.slice/vgpu.service\n0::/system.slice/vgpu.service\n", false},
		{"its own file unread", "", false},
	} {
		root := t.TempDir()
		WriteProc(t, root, 42, forged, "", "")
		if tc.self != "" {
			if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "self", "cgroup"), []byte(tc.self), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cg, err := NewProcReader(root).Cgroup(42)
		if tc.refused != (err != nil) || err != nil && !strings.Contains(err.Error(), filepath.Join(root, "42", "cgroup")) {
			t.Errorf("%s: %+v, %v; want refused %v, naming the file", tc.name, cg, err, tc.refused)
		}
	}
}
