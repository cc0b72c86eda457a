package kube_test

import (
	"context"
	"fmt"
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
