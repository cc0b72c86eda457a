package kube

import (
	"fmt"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// TestMappingDRA: devices that dynamic resource allocation gave a
// container are mapped when the answer names them by UUID (the driver's
// device name or a CDI device's name), and left out when nothing in it
// ties them to a GPU (NVIDIA's driver names devices gpu-<index>).
func TestMappingDRA(t *testing.T) {
	claim := func(device string, cdi ...string) *podresourcesv1.DynamicResource {
		cr := &podresourcesv1.ClaimResource{DriverName: "gpu.example.com", PoolName: "node-a", DeviceName: device}
		for _, n := range cdi {
			cr.CdiDevices = append(cr.CdiDevices, &podresourcesv1.CDIDevice{Name: n})
		}
		return &podresourcesv1.DynamicResource{ClaimName: "gpu", ClaimNamespace: "ml", ClaimResources: []*podresourcesv1.ClaimResource{cr}}
	}
	for _, tc := range []struct {
		name  string
		dr    *podresourcesv1.DynamicResource
		query string
		want  string
	}{
		{"device named by UUID", claim("GPU-1234abcd"), "GPU-1234abcd", "[ml/trainer/main]"},
		{"MIG device named by UUID", claim("MIG-5678"), "MIG-5678", "[ml/trainer/main]"},
		{"CDI device named by UUID", claim("gpu-0", "k8s.gpu.example.com/gpu=GPU-1234abcd"), "GPU-1234abcd", "[ml/trainer/main]"},
		{"NVIDIA driver's index name", claim("gpu-0", "k8s.gpu.nvidia.com/device=gpu-0"), "gpu-0", "[]"},
		{"bare prefix", claim("GPU-"), "GPU-", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
				Name: "trainer", Namespace: "ml",
				Containers: []*podresourcesv1.ContainerResources{{Name: "main", DynamicResources: []*podresourcesv1.DynamicResource{tc.dr}}},
			}}})
			var got []string
			for _, r := range m.PodsOn(tc.query) {
				got = append(got, r.Namespace+"/"+r.Name+"/"+r.Container)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("pods on %s: %s, want %s", tc.query, s, tc.want)
			}
			if wantPods := map[bool]int{true: 1, false: 0}[tc.want != "[]"]; m.Pods() != wantPods {
				t.Errorf("%d pods mapped, want %d", m.Pods(), wantPods)
			}
		})
	}
}

// manyClaims is a pod-resources answer of one container given n devices
// by dynamic resource allocation, each named by a UUID of its own (about
// 12 bytes of the answer each).
func manyClaims(n int) *podresourcesv1.ListPodResourcesResponse {
	cr := make([]*podresourcesv1.ClaimResource, n)
	for i := range cr {
		cr[i] = &podresourcesv1.ClaimResource{DeviceName: fmt.Sprintf("GPU-%d", i)}
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
		Name: "p", Namespace: "n", Containers: []*podresourcesv1.ContainerResources{{Name: "c",
			DynamicResources: []*podresourcesv1.DynamicResource{{ClaimResources: cr}}}}}}}
}

// A container's DRA devices are mapped in time that grows with their
// number, not its square: 200,000 of them (2.4 MB of an answer the
// kubelet may send up to 16 MiB of) took minutes when each name was
// looked for among those before it. The guard only catches that.
func TestMappingManyDRAClaims(t *testing.T) {
	resp := manyClaims(200_000)
	done := make(chan *Mapping, 1)
	go func() { done <- NewMapping(resp) }()
	select {
	case m := <-done:
		if got := m.PodsOn("GPU-199999"); len(got) != 1 || got[0].Name != "p" {
			t.Errorf("pods on the last device: %+v", got)
		}
		if len(m.Allocations()) != 200_000 {
			t.Errorf("%d allocations, want 200000", len(m.Allocations()))
		}
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatal("mapping 200,000 DRA devices still running after 60 s")
	}
}

func BenchmarkNewMappingManyDRAClaims(b *testing.B) {
	resp := manyClaims(20000)
	b.ReportAllocs()
	for b.Loop() {
		if m := NewMapping(resp); len(m.PodsOn("GPU-19999")) != 1 {
			b.Fatal("device lost")
		}
	}
}
