package kube_test

import (
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A Delegate=yes service (or a docker container) running INSIDE a
// machinectl node (below systemd-nspawn@NAME.service/payload) names a
// cgroup after ml/trainer's container on a GPU time-sliced between two
// pods. TestContainerIDInDelegatedSubtreeOnSharedGPU says such a process
// gets no pod; below a node root nodeRootAt >= 0 lets the ID choose.
// Below a node's root (machinectl's payload) as elsewhere, a delegated
// subtree's cgroup named after a pod's container does not choose among
// the pods sharing a GPU. Before, the node's root let the ID through.
func TestDelegatedSubtreeInsideNspawnNodeOnSharedGPU(t *testing.T) {
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
	const node = "/machine.slice/systemd-nspawn@node1.service/payload"
	forged := "cri-containerd-" + cid + ".scope"
	for _, path := range []string{
		node + "/system.slice/tenant.service/" + forged,
		node + "/system.slice/docker-" + strings.Repeat("cd", 32) + ".scope/x.service/" + forged,
	} {
		cg := kube.ParseCgroupPath(path)
		if ref := m.ResolvePod(cg, "GPU-a"); ref != nil {
			t.Errorf("%s\n  NamesNoPod %v, given %s/%s, want no pod (a delegated subtree chose among the GPU's pods)", path, kube.NamesNoPod(path), ref.Namespace, ref.Name)
		}
	}
}
