package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Two containers of one pod share a GPU by replicas; pod metadata ties
// each container ID to its name, so that each container's process goes to
// the tenant its container selector names, whichever form its cgroup path
// has: absolute, or read from inside a pod's own cgroup namespace.
func TestContainerOfCgroupPath(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	c1, c2 := strings.Repeat("a", 64), strings.Repeat("b", 64)
	under := strings.ReplaceAll(uid, "-", "_")
	fk := &fakeKubelet{}
	fk.set(&podresourcesv1.PodResources{Namespace: "llm", Name: "mono", Containers: []*podresourcesv1.ContainerResources{
		{Name: "c1", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-b::0"}}}},
		{Name: "c2", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-b::1"}}}},
	}})
	socket, _ := serveKubelet(t, fk)
	metaFile := filepath.Join(t.TempDir(), "pods.json")
	meta := `{"items":[{"metadata":{"name":"mono","namespace":"llm","uid":"` + uid + `"},
	 "status":{"containerStatuses":[{"name":"c1","containerID":"containerd://` + c1 + `"},{"name":"c2","containerID":"containerd://` + c2 + `"}]}}]}`
	if err := os.WriteFile(metaFile, []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.ParseConfig("k.yaml", []byte(`tenants:
  - name: one
    selectors: [{kubernetes: {namespace: llm, container: c1}}]
  - name: two
    selectors: [{kubernetes: {namespace: llm, container: c2}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cg1, cg2 string }{
		{"systemd", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice/cri-containerd-" + c1 + ".scope",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice/cri-containerd-" + c2 + ".scope"},
		{"cgroupfs", "/kubepods/burstable/pod" + uid + "/" + c1, "/kubepods/burstable/pod" + uid + "/" + c2},
		{"systemd from a namespace", "/../../kubepods-burstable-pod" + under + ".slice/cri-containerd-" + c1 + ".scope",
			"/../../../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice/cri-containerd-" + c2 + ".scope"},
		{"cgroupfs from a namespace", "/../../../burstable/pod" + uid + "/" + c1, "/../../pod" + uid + "/" + c2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: metaFile})
			b.Refresh(context.Background())
			p1, p2 := testutil.Proc(201, ""), testutil.Proc(202, "")
			p1.Cgroup, p2.Cgroup = tc.cg1, tc.cg2
			r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-b", Up: true, Mode: gpu.SharingTimeSlice, Processes: []gpu.Process{p1, p2}}}}
			got := map[string]int{}
			for _, u := range b.Build(r, gpu.SamplerStats{}).Usage {
				got[u.Tenant] += u.Processes
			}
			if got["one"] != 1 || got["two"] != 1 || len(got) != 2 {
				t.Errorf("processes by tenant %v, want one each of one and two", got)
			}
		})
	}
}
