package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestMappingGPUDevices: the mapping holds the devices that are GPUs or
// MIG devices, counts the pods holding one and leaves the others out:
// another vendor's devices (a NIC, an FPGA numbered like a GPU) hold no
// GPU.
func TestMappingGPUDevices(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pods   []*podresourcesv1.PodResources
		query  []string
		on     string // the containers on query
		mapped int
	}{
		{"GPU by UUID", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a")}, []string{"GPU-a"}, "[llm/a/c]", 1},
		{"GPU by UUID of another resource name", []*podresourcesv1.PodResources{pod("llm", "a", "c", "example.com/gpu", "GPU-a::2")}, []string{"GPU-a"}, "[llm/a/c]", 1},
		{"a NIC", []*podresourcesv1.PodResources{pod("net", "r", "c", "intel.com/sriov_netdevice", "0000:3b:00.1")}, []string{"0000:3b:00.1"}, "[]", 0},
		{"an FPGA numbered 0", []*podresourcesv1.PodResources{pod("fpga", "f", "c", "xilinx.com/fpga", "0")}, []string{"0"}, "[]", 0},
		{"a GPU pod beside a NIC pod and an FPGA pod", []*podresourcesv1.PodResources{
			pod("net", "r", "c", "intel.com/sriov_netdevice", "0000:3b:00.1"),
			pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a::0"),
			pod("fpga", "f", "c", "xilinx.com/fpga", "0"),
		}, []string{"GPU-a"}, "[llm/a/c]", 1},
		// NVIDIA's device plugin under deviceIDStrategy=index: a GPU by
		// its index, its replicas "<index>::<n>"; its MIG devices
		// "<GPU index>:<MIG index>" are not tied to a GPU
		{"GPU by index", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "0")}, []string{kube.GPUIndexID(0)}, "[llm/a/c]", 1},
		{"replicas by index", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu.shared", "3::0", "3::7")}, []string{kube.GPUIndexID(3)}, "[llm/a/c]", 1},
		{"replicas by index and by UUID of one GPU", []*podresourcesv1.PodResources{
			pod("llm", "a", "c", "nvidia.com/gpu.shared", "3::0"),
			pod("llm", "b", "c", "nvidia.com/gpu.shared", "GPU-d::1"),
		}, []string{"GPU-d", kube.GPUIndexID(3)}, "[llm/a/c llm/b/c]", 2},
		{"MIG device by index", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/mig-1g.10gb", "0:1")}, []string{"0:1", kube.GPUIndexID(0)}, "[]", 0},
		{"index spelt otherwise", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "01", "+1", "-1", " 1")}, []string{kube.GPUIndexID(1)}, "[]", 0},
		{"a pod of a GPU and a NIC", []*podresourcesv1.PodResources{{Namespace: "llm", Name: "a", Containers: []*podresourcesv1.ContainerResources{
			{Name: "c", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "intel.com/sriov_netdevice", DeviceIds: []string{"0000:3b:00.1"}},
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}, []string{"GPU-a"}, "[llm/a/c]", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: tc.pods})
			var got []string
			for _, r := range m.PodsOn(tc.query...) {
				got = append(got, r.Namespace+"/"+r.Name+"/"+r.Container)
			}
			if s := fmt.Sprint(got); s != tc.on {
				t.Errorf("containers on %v: %s, want %s", tc.query, s, tc.on)
			}
			if m.Pods() != tc.mapped {
				t.Errorf("%d pods mapped, want %d", m.Pods(), tc.mapped)
			}
		})
	}
}

// The mapper's status counts the pods holding a GPU, as the mapping does.
func TestMapperCountsGPUPods(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(
		pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"),
		pod("net", "router-0", "router", "intel.com/sriov_netdevice", "0000:3b:00.1", "0000:3b:00.2"),
		pod("fpga", "acc-0", "acc", "xilinx.com/fpga", "0"),
	)
	socket, _ := serveKubelet(t, fk)
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket})
	if err != nil {
		t.Fatal(err)
	}
	m.Refresh(context.Background())
	if st := m.Status(); !st.Up || st.PodsMapped != 1 {
		t.Errorf("status %+v, want up with 1 pod mapped", st)
	}
}

// The devices of NVIDIA's resources that the mapping cannot tie to a GPU
// are listed by resource, a few IDs each, for the log; other vendors'
// devices are not.
func TestMappingUnmapped(t *testing.T) {
	m := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("llm", "a", "c", "nvidia.com/mig-1g.10gb", "0:1", "0:2"),
		pod("llm", "b", "c", "nvidia.com/mig-1g.10gb", "0:2", "1:0", "1:1", "1:2"),
		pod("llm", "c", "c", "nvidia.com/gpu", "0", "GPU-a"),
		pod("llm", "d", "c", "nvidia.com/mig-3g.40gb", "2:0::1"),
		pod("net", "r", "c", "intel.com/sriov_netdevice", "0000:3b:00.1"),
	}})
	if got, want := fmt.Sprint(m.Unmapped()), "[{nvidia.com/mig-1g.10gb [0:1 0:2 1:0 1:1]} {nvidia.com/mig-3g.40gb [2:0::1]}]"; got != want {
		t.Errorf("unmapped %s, want %s", got, want)
	}
	if (*kube.Mapping)(nil).Unmapped() != nil {
		t.Error("a nil mapping has unmapped devices")
	}
}

// ResolvePod places a process on a GPU that the containers of one pod
// share in that pod, its container unknown; Holders lists the containers
// it may be in, where its container is unknown: those of its pod, or any
// holder whose pod the metadata does not know by another UID.
func TestResolvePodHolders(t *testing.T) {
	const uidA, uidB, uidC = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57", "e5b3c8a1-9f2d-4e6b-8c7a-3d1f5b0e9c42", "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d"
	two := func(ns, name, c1, c2 string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{
			{Name: c1, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a::0"}}}},
			{Name: c2, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a::1"}}}}}}
	}
	meta := `{"items":[{"metadata":{"name":"a","namespace":"llm","uid":"` + uidA + `"}},{"metadata":{"name":"b","namespace":"llm","uid":"` + uidB + `"}}]}`
	name := func(r *kube.PodRef) string {
		if r == nil {
			return "<nil>"
		}
		return r.Namespace + "/" + r.Name + "/" + r.Container + " " + r.UID
	}
	for _, tc := range []struct {
		name    string
		pods    []*podresourcesv1.PodResources
		meta    bool
		uid     string // the process's cgroup pod UID
		max     int
		pod     string
		holders string
	}{
		{"one container", []*podresourcesv1.PodResources{pod("llm", "a", "c1", "nvidia.com/gpu", "GPU-a")}, false, "", 8, "llm/a/c1 ", "[]"},
		{"two containers of one pod", []*podresourcesv1.PodResources{two("llm", "a", "c1", "c2")}, false, "", 8, "llm/a/ ", "[llm/a/c1  llm/a/c2 ]"},
		{"two containers of one pod, a cgroup UID", []*podresourcesv1.PodResources{two("llm", "a", "c1", "c2")}, false, uidC, 8, "llm/a/ " + uidC, "[llm/a/c1 " + uidC + " llm/a/c2 " + uidC + "]"},
		{"two pods", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a::0"), pod("llm", "b", "c", "nvidia.com/gpu", "GPU-a::1")}, false, "", 8, "<nil>", "[llm/a/c  llm/b/c ]"},
		{"two pods, more than max", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a::0"), pod("llm", "b", "c", "nvidia.com/gpu", "GPU-a::1")}, false, "", 1, "<nil>", "[]"},
		{"two pods, metadata knows the process's", []*podresourcesv1.PodResources{two("llm", "a", "c1", "c2"), pod("llm", "b", "c", "nvidia.com/gpu", "GPU-a::2")}, true, uidA, 8, "llm/a/ " + uidA, "[llm/a/c1 " + uidA + " llm/a/c2 " + uidA + "]"},
		// a process in a pod the metadata does not know, on a GPU of a pod
		// it knows by another UID: in none of that pod's containers
		{"one container, metadata knows its pod by another UID", []*podresourcesv1.PodResources{pod("llm", "a", "c1", "nvidia.com/gpu", "GPU-a")}, true, uidC, 8, "// " + uidC, "[]"},
		{"two containers of one pod, metadata knows it by another UID", []*podresourcesv1.PodResources{two("llm", "a", "c1", "c2")}, true, uidC, 8, "// " + uidC, "[]"},
		{"one container of a pod the metadata does not know", []*podresourcesv1.PodResources{pod("llm", "x", "c", "nvidia.com/gpu", "GPU-a")}, true, uidC, 8, "llm/x/c " + uidC, "[]"},
		{"one container, metadata knows the process's", []*podresourcesv1.PodResources{pod("llm", "a", "c1", "nvidia.com/gpu", "GPU-a")}, true, uidA, 8, "llm/a/c1 " + uidA, "[]"},
		{"two pods, one the metadata knows by another UID", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a::0"), pod("llm", "x", "c", "nvidia.com/gpu", "GPU-a::1")}, true, uidC, 8, "llm/x/c " + uidC, "[]"},
		{"two pods, metadata knows neither as the process's", []*podresourcesv1.PodResources{pod("llm", "a", "c", "nvidia.com/gpu", "GPU-a::0"), pod("llm", "b", "c", "nvidia.com/gpu", "GPU-a::1")}, true, uidC, 8, "// " + uidC, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &podresourcesv1.ListPodResourcesResponse{PodResources: tc.pods}
			m := kube.NewMapping(resp)
			if tc.meta {
				var err error
				if m, err = kube.NewMappingWithMetadata(resp, "pods.json", []byte(meta)); err != nil {
					t.Fatal(err)
				}
			}
			cg := kube.CgroupInfo{PodUID: tc.uid}
			ref, _ := m.ResolvePod(cg, "GPU-a")
			if got := name(ref); got != tc.pod {
				t.Errorf("pod %q, want %q", got, tc.pod)
			}
			var hs []string
			for _, h := range m.Holders(cg, ref, tc.max, "GPU-a") {
				hs = append(hs, name(&h))
			}
			if got := fmt.Sprint(hs); got != tc.holders {
				t.Errorf("holders %s, want %s", got, tc.holders)
			}
		})
	}
}

// A pod-resources answer naming a namespace, pod, container or device ID
// longer than Kubernetes allows (only a broken kubelet can) has that
// container or device left out, counted and the first named, clipped: each
// name went whole into a pod info series' labels and log lines (1 MB each
// here, 16 MiB an answer).
func TestMappingOversizedNamesLeftOut(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	gpuDev := func(ids ...string) []*podresourcesv1.ContainerDevices {
		return []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}
	}
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Namespace: "ok", Name: "p", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: gpuDev("GPU-a", "GPU-"+long)}}},
		{Namespace: long, Name: "p", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: gpuDev("GPU-b")}}},
		{Namespace: "ok", Name: long, Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: gpuDev("GPU-b")}}},
		{Namespace: "ok", Name: "q", Containers: []*podresourcesv1.ContainerResources{{Name: long, Devices: gpuDev("GPU-b")}}},
		{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("p", 253), Containers: []*podresourcesv1.ContainerResources{{Name: strings.Repeat("c", 63), Devices: gpuDev("GPU-c")}}},
		// device IDs at the limit (256 bytes) and one past it
		{Namespace: "at", Name: "p", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: gpuDev("GPU-"+strings.Repeat("d", 252), "GPU-"+strings.Repeat("e", 253))}}},
	}}
	m := kube.NewMapping(resp)
	var got []string
	for _, a := range m.Allocations() {
		got = append(got, a.Device+" "+a.Pod.Namespace[:min(len(a.Pod.Namespace), 3)])
	}
	if want := []string{"GPU-a ok", "GPU-c nnn", "GPU-" + strings.Repeat("d", 252) + " at"}; !slices.Equal(got, want) {
		t.Errorf("allocations %q, want %q", got, want)
	}
	n, first := m.Oversized()
	if n != 5 || !strings.HasPrefix(first, "device ID GPU-xxx") || len(first) > 200 {
		t.Errorf("oversized %d, first %.200q (%d bytes); want 5, the device ID clipped", n, first, len(first))
	}
}

// A host user's GPU process, on a GPU no pod holds, in a kubepods/pod<UID>
// cgroup it made in its own user manager's subtree, is no pod's. Before, it
// was resolved to the pod it named, with that pod's namespace and labels
// (its tenant: a latency tenant's class, the victim charged).
func TestResolvePodKubepodsInUserSubtree(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	meta := `{"items":[{"metadata":{"name":"victim","namespace":"llm","uid":"` + uid + `","labels":{"team":"search"}},"status":{"containerStatuses":[{"name":"app","containerID":"containerd://aaaa01"}]}}]}`
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: "victim",
		Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods/pod" + uid,
		"/system.slice/tenant.service/kubepods/burstable/pod" + uid,
	} {
		if ref, _ := m.ResolvePod(kube.ParseCgroupPath(path), "GPU-b"); ref != nil {
			t.Errorf("%s on GPU-b resolved to pod %s/%s (labels %v)", path, ref.Namespace, ref.Name, ref.Labels)
		}
	}
	// the pod's own process, in the kubelet's cgroup, still is
	if ref, _ := m.ResolvePod(kube.ParseCgroupPath("/kubepods/burstable/pod"+uid+"/aaaa01"), "GPU-a"); ref == nil || ref.Name != "victim" {
		t.Errorf("the pod's own process resolved to %+v", ref)
	}
}

// The device rule (the one pod that holds the device) gives no pod to a
// process whose cgroup names a place that is no pod's: a host user's
// login session or user manager, a system service. The NVIDIA device
// files are open to every user by default: a host user picks any GPU
// with CUDA_VISIBLE_DEVICES, and was given the pod that holds it, its
// namespace and labels (its tenant under namespace pod tenancy), nor is
// it in any of the device's holders. A path not read, or one the rule
// does not recognise, still gets the device's pod.
func TestResolvePodDeviceRuleSparesHostPlaces(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	meta := `{"items":[{"metadata":{"name":"victim","namespace":"llm","uid":"` + uid + `","labels":{"team":"search"}},"status":{"containerStatuses":[{"name":"app","containerID":"containerd://aaaa01"}]}}]}`
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: "victim",
		Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		pod  string // "" for none
	}{
		{"/user.slice/user-1000.slice/session-3.scope", ""},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods/pod" + uid, ""},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope", ""},
		{"/system.slice/tenant.service", ""},
		{"/system.slice/tenant.service/worker", ""},
		// not read, the root, a place not recognised: the device's pod
		{"", "victim"},
		{"/", "victim"},
		{"/batch/job-7", "victim"},
		// the pod's own process
		{"/kubepods/burstable/pod" + uid + "/aaaa01", "victim"},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + strings.Repeat("a", 64) + ".scope", "victim"},
	} {
		cg := kube.ParseCgroupPath(tc.path)
		ref, _ := m.ResolvePod(cg, "GPU-a")
		got := ""
		if ref != nil {
			got = ref.Name
		}
		if got != tc.pod {
			t.Errorf("%q on GPU-a resolved to pod %q (%+v), want %q", tc.path, got, ref, tc.pod)
		}
		if hs := m.Holders(cg, ref, 8, "GPU-a"); tc.pod == "" && len(hs) > 0 {
			t.Errorf("%q on GPU-a may be in holders %+v", tc.path, hs)
		}
	}
}
