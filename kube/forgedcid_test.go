package kube_test

import (
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestContainerIDInDelegatedSubtreeOnSharedGPU: GPU-a is time-sliced
// between two pods, ml/trainer and ns/other, so the device rule alone
// gives a process on it no pod. A process in a cgroup subtree delegated to
// it (a Delegate=yes service, a docker container's, an nspawn container
// that runs no node, or any of these inside a node machinectl runs)
// names a cgroup after ml/trainer's container (its ID is world-readable):
// it is given no pod, the container ID not taken to
// choose among the GPU's pods. Before, it was given ml/trainer. A
// process of the other pod's container that names a cgroup so keeps its
// own pod.
func TestContainerIDInDelegatedSubtreeOnSharedGPU(t *testing.T) {
	const uid, otherUID = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57", "1d9e3f7a-82c6-4b0e-9f4a-3b7c0d5e2f68"
	cid, ocid := strings.Repeat("ab", 32), strings.Repeat("12", 32)
	meta := `{"items":[` +
		`{"metadata":{"name":"trainer","namespace":"ml","uid":"` + uid + `"},"status":{"containerStatuses":[{"name":"app","containerID":"containerd://` + cid + `"}]}},` +
		`{"metadata":{"name":"other","namespace":"ns","uid":"` + otherUID + `"},"status":{"containerStatuses":[{"name":"main","containerID":"containerd://` + ocid + `"}]}}]}`
	dev := func(id string) []*podresourcesv1.ContainerDevices {
		return []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}
	}
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Namespace: "ml", Name: "trainer", Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: dev("GPU-a::0")}}},
		{Namespace: "ns", Name: "other", Containers: []*podresourcesv1.ContainerResources{{Name: "main", Devices: dev("GPU-a::1")}}},
	}}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	forged := "cri-containerd-" + cid + ".scope"
	for _, tc := range []struct {
		name, path string
		want       string // pod given, "" none
	}{
		{"baseline: an unrecognised place on the shared GPU", "/system.slice/docker-" + strings.Repeat("cd", 32) + ".scope", ""},
		{"a Delegate=yes service", "/system.slice/tenant.service/" + forged, ""},
		{"a Delegate=yes service, podman's prefix", "/system.slice/tenant.service/libpod-" + cid + ".scope", ""},
		{"a docker container's delegated subtree", "/system.slice/docker-" + strings.Repeat("cd", 32) + ".scope/x.service/" + forged, ""},
		{"an nspawn container (no node) in machine-NAME.scope", "/machine.slice/machine-box.scope/payload/system.slice/x.service/" + forged, ""},
		// below a node's root as elsewhere (before, the root let it through)
		{"a Delegate=yes service inside a machinectl node", "/machine.slice/systemd-nspawn@node1.service/payload/system.slice/tenant.service/" + forged, ""},
		{"a docker subtree inside a machinectl node", "/machine.slice/systemd-nspawn@node1.service/payload/system.slice/docker-" + strings.Repeat("cd", 32) + ".scope/x.service/" + forged, ""},
		// the other pod nests a cgroup named after the victim's container
		{"the other pod's container, cgroupfs", "/kubepods/burstable/pod" + otherUID + "/" + ocid + "/" + forged, "other"},
		{"the other pod's container, systemd", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(otherUID, "-", "_") + ".slice/cri-containerd-" + ocid + ".scope/" + forged, "other"},
	} {
		cg := kube.ParseCgroupPath(tc.path)
		ref, _ := m.ResolvePod(cg, "GPU-a")
		got := ""
		if ref != nil {
			got = ref.Name
		}
		if got != tc.want {
			t.Errorf("%s: %s\n  given %+v, want pod %q", tc.name, tc.path, ref, tc.want)
		}
	}
}
