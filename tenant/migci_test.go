package tenant

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestMIGComputeInstancesOfPods: a GPU instance split in two compute
// instances is one MIG instance whose MIG devices a device plugin hands
// out apart (by UUID or by the older ID): each process goes to the pod
// holding its own compute instance's device, and each pod's allocation is
// the GPU instance's, named by its device's UUID.
func TestMIGComputeInstancesOfPods(t *testing.T) {
	ctr := func(id string) []*podresourcesv1.ContainerResources {
		return []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}}}
	}
	pods := []*podresourcesv1.PodResources{
		{Namespace: "a", Name: "pa", Containers: ctr("MIG-d0")},
		{Namespace: "b", Name: "pb", Containers: ctr("MIG-GPU-d/1/1")},
	}
	const list = `{"kind":"PodList","items":[
 {"metadata":{"name":"pa","namespace":"a","uid":"aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"}},
 {"metadata":{"name":"pb","namespace":"b","uid":"bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"}}
]}`
	m, err := kube.NewMappingWithMetadata(&podresourcesv1.ListPodResourcesResponse{PodResources: pods}, "pods.json", []byte(list))
	if err != nil {
		t.Fatal(err)
	}
	const file = `tenants:
  - name: second
    selectors: [{mig_uuid: MIG-d1}]
`
	for _, tc := range []struct {
		name, file string
		want       string // tenant, GPU instance, PIDs of each usage
	}{
		{"by namespace", "", "a 1 [201]\nb 1 [202]\n"},
		{"a selector naming the second compute instance's MIG device", file, "a 1 [201]\nsecond 1 [202]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := EmptyConfig()
			if tc.file != "" {
				if cfg, err = ParseConfig("t.yaml", []byte(tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := NewBuilder(cfg, BuilderOptions{Pods: fixedPods{m}, PodTenancy: PodTenancy{ByNamespace: true}, PodInfo: PodInfoOptions{On: true}, Proc: fakeProc{}})
			if err != nil {
				t.Fatal(err)
			}
			p0, p1 := testutil.Proc(201, "python"), testutil.Proc(202, "python")
			p0.GPUInstanceID, p0.ComputeInstanceID = 1, 0
			p1.GPUInstanceID, p1.ComputeInstanceID = 1, 1
			r := &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{{Index: 0, UUID: "GPU-d", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
				MIG: []gpu.MIGInstance{{UUID: "MIG-d0", GPUInstanceID: 1, ComputeInstanceID: 0,
					OtherComputeInstances: []gpu.MIGComputeInstance{{UUID: "MIG-d1", ID: 1}}}},
				Processes: []gpu.Process{p0, p1}}}}
			snap := b.Build(r, gpu.SamplerStats{})
			var got strings.Builder
			for _, u := range snap.Usage {
				fmt.Fprintf(&got, "%s %s %v\n", u.Tenant, u.GPUInstance, u.PIDs)
			}
			if got.String() != tc.want {
				t.Errorf("usage:\n%s\nwant:\n%s", got.String(), tc.want)
			}
			var gis []string
			for _, a := range snap.PodInfo.Allocations {
				gis = append(gis, a.Namespace+"/"+a.Pod+" gi="+a.GPUInstance)
			}
			if want := []string{"a/pa gi=1", "b/pb gi=1"}; !slices.Equal(gis, want) {
				t.Errorf("pod allocations %q, want %q", gis, want)
			}
		})
	}
}
