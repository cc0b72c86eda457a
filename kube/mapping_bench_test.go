package kube

import (
	"fmt"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// manyPods is a pod-resources answer of n pods, each with one container
// holding a replica of the same GPU (time-slicing's replicas, or a
// kubelet's answer grown without bound).
func manyPods(n int) *podresourcesv1.ListPodResourcesResponse {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for i := range n {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{
			Name: fmt.Sprintf("p%d", i), Namespace: "n",
			Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("GPU-a::%d", i)}},
			}}},
		})
	}
	return resp
}

// BenchmarkNewMappingManyPods builds the device map of 20,000 pods on one
// GPU: its cost grows with the pods, not their square.
func BenchmarkNewMappingManyPods(b *testing.B) {
	resp := manyPods(20000)
	b.ReportAllocs()
	for b.Loop() {
		if m := NewMapping(resp); len(m.PodsOn("GPU-a")) != 20000 {
			b.Fatal("pods lost")
		}
	}
}

// A mapping's allocations are listed once: pod info asks for them at every
// sample, and a node of a device plugin that advertises a device per MiB
// of GPU memory (655,360 for 8 GPUs of 80 GiB) took seconds each time to
// list and sort them again, while the mapping changes only at a refresh.
func TestAllocationsListedOnce(t *testing.T) {
	m := NewMapping(manyPods(2000))
	if n := len(m.Allocations()); n != 2000 { // one per container on the GPU
		t.Fatalf("%d allocations, want 2000", n)
	}
	if allocs := testing.AllocsPerRun(10, func() { _ = m.Allocations() }); allocs != 0 {
		t.Errorf("listing the allocations again made %v allocations, want none", allocs)
	}
	var nilMap *Mapping
	if got := nilMap.Allocations(); got != nil {
		t.Errorf("a nil mapping's allocations: %v", got)
	}
}
