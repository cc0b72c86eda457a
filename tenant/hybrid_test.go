package tenant

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// On a hybrid cgroup host (v1 controllers, a unified hierarchy with none)
// a pod's GPU process read from /proc goes to the tenant of its pod, where
// the unified line is the root or the runtime's service and only the v1
// lines name the pod (the kubelet's cgroupfs driver with a runtime that
// leaves the unified hierarchy alone).
func TestAttributionHybridCgroups(t *testing.T) {
	const uid = "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
	pod := "/kubepods/burstable/pod" + uid + "/5b8f9c1e2d3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e"
	v1 := "12:pids:" + pod + "\n7:freezer:" + pod + "\n4:memory:" + pod + "\n3:cpu,cpuacct:" + pod + "\n1:name=systemd:" + pod + "\n"
	root := t.TempDir()
	for pid, unified := range map[int]string{70: "/", 71: "/system.slice/containerd.service", 72: pod} {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(v1+"0::"+unified+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const yaml = `tenants:
  - name: chat
    selectors: [{kubernetes: {pod_uid: ` + uid + `}}]
`
	b := mustBuilder(t, yaml, BuilderOptions{Proc: kube.NewProcReader(root)})
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Up: true, Processes: []gpu.Process{
		testutil.MIGProc(70, "", -1), testutil.MIGProc(71, "", -1), testutil.MIGProc(72, "", -1),
	}}}}
	s := b.Build(r, gpu.SamplerStats{})
	if u := usageOf(t, s, "chat", ""); u.Processes != 3 {
		t.Errorf("chat: %d processes %v, want 70, 71 and 72", u.Processes, u.PIDs)
	}
}
