package kube

import (
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestParsePodListErrors(t *testing.T) {
	if _, _, err := parsePodList("x.json", []byte("{not json")); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Errorf("err = %v", err)
	}
}

// A process of an init container (a restartable one, a sidecar, included)
// or of an ephemeral container is named by its own container, not by the
// one container of its pod that holds the GPU.
func TestResolvePodInitAndEphemeralContainers(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	const app, warm, side, debug = "aaaa01", "bbbb02", "cccc03", "dddd04"
	meta := `{"items":[{"metadata":{"name":"p","namespace":"llm","uid":"` + uid + `"},"status":{` +
		`"containerStatuses":[{"name":"app","containerID":"containerd://` + app + `"}],` +
		`"initContainerStatuses":[{"name":"warmup","containerID":"containerd://` + warm + `"},{"name":"proxy","containerID":"cri-o://` + side + `"}],` +
		`"ephemeralContainerStatuses":[{"name":"debugger","containerID":"containerd://` + debug + `"}]}}]}`
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: "p",
		Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}}
	m, err := NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, want string }{{app, "app"}, {warm, "warmup"}, {side, "proxy"}, {debug, "debugger"}} {
		ref := m.ResolvePod(CgroupInfo{PodUID: uid, ContainerID: tc.id}, "GPU-a")
		if ref == nil || ref.Container != tc.want {
			t.Errorf("container %s: got %+v, want container %q", tc.id, ref, tc.want)
		}
	}
}
