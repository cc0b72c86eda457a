package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestKubeletDeviceIDs scrapes the pod info, the tenants' processes and
// the pods mapped of a time-sliced GPU (index 1) that one pod of namespace
// llm holds, as NVIDIA's device plugin names it: by UUID, by index
// (deviceIDStrategy=index), by replicas of either; beside pods holding
// other vendors' devices, which hold no GPU. A MIG device named by index
// is tied to no GPU: the processes stay unassigned.
func TestKubeletDeviceIDs(t *testing.T) {
	holder := func(resource string, ids ...string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: "llm", Name: "chat-0", Containers: []*podresourcesv1.ContainerResources{{
			Name: "server", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}}}}}
	}
	other := func(ns, resource, id string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: ns, Name: ns + "-0", Containers: []*podresourcesv1.ContainerResources{{
			Name: "main", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: []string{id}}}}}}
	}
	const (
		procsHeader  = "# HELP vgpu_tenant_processes The tenant's processes with a context on the GPU (or MIG instance).\n# TYPE vgpu_tenant_processes gauge\n"
		mappedHeader = "# HELP vgpu_kubelet_pods_mapped Pods with GPUs in the mapping from the kubelet.\n# TYPE vgpu_kubelet_pods_mapped gauge\n"
		held         = podInfoHeader + `vgpu_tenant_pod_info{container="server",gpu="1",gpu_instance="",namespace="llm",pod="chat-0",tenant="llm",uuid="GPU-1111"} 1` + "\n" +
			podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n" +
			procsHeader + `vgpu_tenant_processes{class="best-effort",gpu="1",gpu_instance="",tenant="llm",uuid="GPU-1111"} 3` + "\n" +
			mappedHeader + "vgpu_kubelet_pods_mapped 1\n"
	)
	for _, tc := range []struct {
		name string
		pods []*podresourcesv1.PodResources
		want string
	}{
		{"by UUID", []*podresourcesv1.PodResources{holder("nvidia.com/gpu", "GPU-1111")}, held},
		{"by index", []*podresourcesv1.PodResources{holder("nvidia.com/gpu", "1")}, held},
		{"replicas by index", []*podresourcesv1.PodResources{holder("nvidia.com/gpu.shared", "1::0", "1::3")}, held},
		{"by index, beside a NIC and an FPGA numbered alike", []*podresourcesv1.PodResources{
			other("net", "intel.com/sriov_netdevice", "0000:3b:00.1"),
			holder("nvidia.com/gpu", "1"),
			other("fpga", "xilinx.com/fpga", "1"),
		}, held},
		{"a MIG device by index", []*podresourcesv1.PodResources{holder("nvidia.com/mig-1g.10gb", "1:0")},
			podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n" +
				procsHeader + `vgpu_tenant_processes{class="",gpu="1",gpu_instance="",tenant="unassigned",uuid="GPU-1111"} 3` + "\n" +
				mappedHeader + "vgpu_kubelet_pods_mapped 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &podsOf{kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: tc.pods})}
			b, err := tenant.NewBuilder(nil, tenant.BuilderOptions{Pods: pods, PodTenancy: tenant.PodTenancy{ByNamespace: true},
				PodInfo: tenant.PodInfoOptions{On: true}})
			if err != nil {
				t.Fatal(err)
			}
			r := &gpu.Readings{Time: t0, Devices: []gpu.Device{timeSlicedDevice()}}
			e := newExporter(t, b.Build(r, gpu.SamplerStats{}))
			if err := testutil.CollectAndCompare(e, strings.NewReader(tc.want),
				"vgpu_tenant_pod_info", "vgpu_tenant_pod_info_dropped_total", "vgpu_tenant_processes", "vgpu_kubelet_pods_mapped"); err != nil {
				t.Error(err)
			}
		})
	}
}
