package kube_test

import (
	"fmt"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestStaticPodByMirror: a static pod's cgroup names its manifest's hash;
// the API server lists its mirror pod under a UID of its own, with the
// hash in kubernetes.io/config.mirror. Pod metadata from the API server
// knows the pod by the hash too, as the kubelet's /pods does: its
// processes get the pod, its labels and container (it lost them, and its
// GPU too, to a pod the metadata knew by another UID), under the hash,
// which an eviction refuses as a static pod's. A hash of the wrong shape,
// or one two pods claim, is not taken.
func TestStaticPodByMirror(t *testing.T) {
	const (
		hash      = "0123456789abcdef0123456789abcdef"
		mirrorUID = "11111111-2222-4333-8444-555555555555"
		otherUID  = "66666666-7777-4888-9999-000000000000"
		cid       = "cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34"
	)
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("kube-system", "infer-node1", "server", "nvidia.com/gpu", "GPU-a"),
	}}
	cg := kube.ParseCgroupPath("/kubepods/besteffort/pod" + hash + "/" + cid)
	item := func(name, uid, mirror string) string {
		ann := ""
		if mirror != "" {
			ann = `,"annotations":{"kubernetes.io/config.hash":"` + hash + `","kubernetes.io/config.mirror":"` + mirror + `"}`
		}
		return `{"metadata":{"name":"` + name + `","namespace":"kube-system","uid":"` + uid + `","labels":{"app":"infer"}` + ann + `},` +
			`"status":{"containerStatuses":[{"name":"server","containerID":"containerd://` + cid + `"}]}}`
	}
	for _, tc := range []struct {
		name, list, want string
	}{
		{"the API server's mirror pod", item("infer-node1", mirrorUID, hash), "kube-system/infer-node1/server " + hash + " app=infer static=true"},
		{"the hash in capitals", item("infer-node1", mirrorUID, "0123456789ABCDEF0123456789ABCDEF"), "kube-system/infer-node1/server " + hash + " app=infer static=true"},
		{"the kubelet's static pod", item("infer-node1", hash, ""), "kube-system/infer-node1/server " + hash + " app=infer static=true"},
		{"a hash of the wrong shape", item("infer-node1", mirrorUID, hash[:31]), "// " + hash + " app= static=true"},
		{"two pods claim the hash", item("infer-node1", mirrorUID, hash) + "," + item("forged", otherUID, hash), "// " + hash + " app= static=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := kube.NewMappingWithMetadata(resp, "apiserver", []byte(`{"items":[`+tc.list+`]}`))
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := m.ResolvePod(cg, "GPU-a")
			if ref == nil {
				t.Fatal("no pod")
			}
			got := fmt.Sprintf("%s/%s/%s %s app=%s static=%v", ref.Namespace, ref.Name, ref.Container, ref.UID, ref.Labels["app"], poduid.Static(ref.UID))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
