package kube_test

import (
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestNodeInServiceKeepsDeviceRule: a Kubernetes node run inside a systemd
// service, read from the host. machinectl's systemd-nspawn@NAME.service
// in machine.slice runs its container in the service's "payload"
// subgroup: that is the node's root, as a machine's scope is, and its
// pods are found as at the host's. A service of another kind (a podman
// Quadlet's libpod-payload-<id>) is a service's subtree: a path there
// names no pod, and the device rule gives none, but a container ID that
// the pod metadata lists for the pod holding the device is the pod's
// (outside a user's slice, where any user may name a cgroup after it).
// Before, every one of them was given no pod.
func TestNodeInServiceKeepsDeviceRule(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	cid, other := strings.Repeat("ab", 32), strings.Repeat("ef", 32)
	meta := `{"items":[{"metadata":{"name":"trainer","namespace":"ml","uid":"` + uid + `"},"status":{"containerStatuses":[{"name":"app","containerID":"containerd://` + cid + `"}]}}]}`
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "ml", Name: "trainer",
		Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	const nspawn = "/machine.slice/systemd-nspawn@node1.service/payload"
	cgroupfs := "/kubepods/burstable/pod" + uid + "/" + cid
	systemd := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + cid + ".scope"
	quadlet := "/system.slice/k8s-node.service/libpod-payload-" + strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name, path string
		want       bool // given ml/trainer
	}{
		{"machinectl's, cgroupfs", nspawn + cgroupfs, true},
		{"machinectl's, systemd", nspawn + systemd, true},
		{"machinectl's, through a cgroup namespace", "/../.." + nspawn + cgroupfs, true},
		{"a Quadlet's, systemd: the container ID the metadata lists", quadlet + systemd, true},
		{"a Quadlet's, cgroupfs: no container ID read", quadlet + cgroupfs, false},
		{"a session in the node", nspawn + "/user.slice/user-1000.slice/session-3.scope", false},
		{"a service in the node", nspawn + "/system.slice/job.service", false},
		{"a container ID no pod lists", quadlet + "/cri-containerd-" + other + ".scope", false},
		{"a user's cgroup named like the pod's container", "/user.slice/user-1000.slice/user@1000.service/cri-containerd-" + cid + ".scope", false},
		{"a session in the node named like the pod's container", nspawn + "/user.slice/user-1000.slice/session-3.scope/cri-containerd-" + cid + ".scope", false},
		{"machinectl's service inside a service's subtree", "/system.slice/tenant.service/machine.slice/systemd-nspawn@x.service/payload" + cgroupfs, false},
		{"machinectl's service outside machine.slice", "/system.slice/systemd-nspawn@x.service/payload" + cgroupfs, false},
	} {
		cg := kube.ParseCgroupPath(tc.path)
		ref, _ := m.ResolvePod(cg, "GPU-a")
		if got := ref != nil && ref.Name == "trainer"; got != tc.want {
			t.Errorf("%s: %s\n  ParseCgroupPath %+v, ResolvePod %+v (NamesNoPod %v), want ml/trainer %v", tc.name, tc.path, cg, ref, kube.NamesNoPod(tc.path), tc.want)
		}
		if holders := m.Holders(cg, ref, 8, "GPU-a"); !tc.want && len(holders) > 0 {
			t.Errorf("%s: holders %+v, want none", tc.name, holders)
		}
	}
}
