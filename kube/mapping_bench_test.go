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
