package tenant

import (
	"fmt"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestSharedGPUHolders: processes on a GPU that several containers hold
// by replicas, which neither their cgroup nor pod metadata places in one
// of them, go to the tenant every one of those containers would give
// them, when they all give the same; else they stay unassigned. The pod
// info names, for a pod its processes were placed in, the tenant they
// went to.
func TestSharedGPUHolders(t *testing.T) {
	const (
		uidA, uidB, uidC = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57", "e5b3c8a1-9f2d-4e6b-8c7a-3d1f5b0e9c42", "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d"
		llmTenant        = "tenants:\n  - name: llm\n    selectors: [{kubernetes: {namespace: llm}}]\n"
		byContainer      = "tenants:\n  - name: one\n    selectors: [{kubernetes: {namespace: llm, container: c1}}]\n  - name: two\n    selectors: [{kubernetes: {namespace: llm, container: c2}}]\n"
		conflicting      = "tenants:\n  - name: llm\n    selectors: [{kubernetes: {namespace: llm}}]\n  - name: py\n    selectors: [{executable: python}]\n"
	)
	mono := func(ids1, ids2 string) []*podresourcesv1.PodResources {
		return []*podresourcesv1.PodResources{{Namespace: "llm", Name: "mono", Containers: []*podresourcesv1.ContainerResources{
			{Name: "c1", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{ids1}}}},
			{Name: "c2", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{ids2}}}},
		}}}
	}
	pod := func(ns, name, id string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{
			{Name: "main", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}}}}
	}
	podList := func(items ...string) string { return `{"items":[` + strings.Join(items, ",") + `]}` }
	item := func(ns, name, uid string) string {
		return `{"metadata":{"name":"` + name + `","namespace":"` + ns + `","uid":"` + uid + `"}}`
	}
	cgroupOf := func(uid string) string { return "/kubepods/burstable/pod" + uid + "/" + strings.Repeat("f", 64) }
	for _, tc := range []struct {
		name    string
		pods    []*podresourcesv1.PodResources
		meta    string // pod metadata; "" none
		file    string
		tenancy PodTenancy
		cgroups []string // the processes', "" none
		want    string   // usage, then pod info and the conflicts
	}{
		{"two containers of one pod, a file's namespace tenant", mono("GPU-a::0", "GPU-a::1"), "", llmTenant, PodTenancy{}, []string{"", "", ""},
			"llm 3\n-\nllm llm/mono/c1\nllm llm/mono/c2\nconflicts=0\n"},
		{"two containers of one pod, namespace tenancy", mono("GPU-a::0", "GPU-a::1"), "", "", PodTenancy{ByNamespace: true}, []string{cgroupOf(uidA), ""},
			"llm 2\n-\nllm llm/mono/c1\nllm llm/mono/c2\nconflicts=0\n"},
		{"two containers of one pod by index", mono("0::0", "0::1"), "", llmTenant, PodTenancy{}, []string{""},
			"llm 1\n-\nllm llm/mono/c1\nllm llm/mono/c2\nconflicts=0\n"},
		{"two pods of one namespace", []*podresourcesv1.PodResources{pod("llm", "a", "GPU-a::0"), pod("llm", "b", "GPU-a::1")}, "", "", PodTenancy{ByNamespace: true}, []string{"", ""},
			"llm 2\n-\nllm llm/a/main\nllm llm/b/main\nconflicts=0\n"},
		// which container is whose the file tells apart, the process's
		// path not: unassigned, and so say its pod's series
		{"two containers of one pod, a tenant each", mono("GPU-a::0", "GPU-a::1"), "", byContainer, PodTenancy{}, []string{"", ""},
			"unassigned 2\n-\nunassigned llm/mono/c1\nunassigned llm/mono/c2\nconflicts=0\n"},
		{"two containers of one pod, a tenant each, namespace tenancy", mono("GPU-a::0", "GPU-a::1"), "", byContainer, PodTenancy{ByNamespace: true}, []string{""},
			"unassigned 1\n-\nunassigned llm/mono/c1\nunassigned llm/mono/c2\nconflicts=0\n"},
		// which pod is whose nothing tells: unassigned, each pod's series
		// names its own tenant (pod metadata would place them)
		{"two pods of two namespaces", []*podresourcesv1.PodResources{pod("llm", "a", "GPU-a::0"), pod("research", "b", "GPU-a::1")}, "", "", PodTenancy{ByNamespace: true}, []string{"", ""},
			"unassigned 2\n-\nllm llm/a/main\nresearch research/b/main\nconflicts=0\n"},
		{"two pods of two namespaces, pod metadata", []*podresourcesv1.PodResources{pod("llm", "a", "GPU-a::0"), pod("research", "b", "GPU-a::1")},
			podList(item("llm", "a", uidA), item("research", "b", uidB)), "", PodTenancy{ByNamespace: true}, []string{cgroupOf(uidA), cgroupOf(uidB)},
			"llm 1\nresearch 1\n-\nllm llm/a/main\nresearch research/b/main\nconflicts=0\n"},
		// the metadata knows both holders, by UIDs other than the
		// process's: it is in neither
		{"a process of neither holder", []*podresourcesv1.PodResources{pod("llm", "a", "GPU-a::0"), pod("llm", "b", "GPU-a::1")},
			podList(item("llm", "a", uidA), item("llm", "b", uidB)), llmTenant, PodTenancy{}, []string{cgroupOf(uidC)},
			"unassigned 1\n-\nllm llm/a/main\nllm llm/b/main\nconflicts=0\n"},
		// the process is in mono, whichever container: both tenants
		// match it, a conflict
		{"a conflict in a holder", mono("GPU-a::0", "GPU-a::1"), "", conflicting, PodTenancy{}, []string{""},
			"unassigned 1\n-\nunassigned llm/mono/c1\nunassigned llm/mono/c2\nconflicts=1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &podresourcesv1.ListPodResourcesResponse{PodResources: tc.pods}
			m := kube.NewMapping(resp)
			if tc.meta != "" {
				var err error
				if m, err = kube.NewMappingWithMetadata(resp, "pods.json", []byte(tc.meta)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := EmptyConfig()
			if tc.file != "" {
				var err error
				if cfg, err = ParseConfig("t.yaml", []byte(tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := NewBuilder(cfg, BuilderOptions{Pods: fixedPods{m}, PodTenancy: tc.tenancy, PodInfo: PodInfoOptions{On: true}, AllowEmpty: true})
			if err != nil {
				t.Fatal(err)
			}
			d := gpu.Device{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingTimeSlice}
			for i, cg := range tc.cgroups {
				p := testutil.Proc(uint32(100+i), "python")
				p.Cgroup = cg
				d.Processes = append(d.Processes, p)
			}
			s := b.Build(&gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{d}}, gpu.SamplerStats{})
			var got strings.Builder
			for _, u := range s.Usage {
				fmt.Fprintf(&got, "%s %d\n", u.Tenant, u.Processes)
			}
			got.WriteString("-\n")
			for _, a := range s.PodInfo.Allocations {
				fmt.Fprintf(&got, "%s %s/%s/%s\n", a.Tenant, a.Namespace, a.Pod, a.Container)
			}
			fmt.Fprintf(&got, "conflicts=%d\n", s.Attribution.Conflicts)
			if got.String() != tc.want {
				t.Errorf("got:\n%swant:\n%s", got.String(), tc.want)
			}
		})
	}
}

// A MIG instance that two containers of one pod hold by replicas, idle
// and without processes, is its namespace tenant's, as an instance one
// container holds is.
func TestSharedMIGInstanceHolders(t *testing.T) {
	m := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: "mono", Containers: []*podresourcesv1.ContainerResources{
		{Name: "c1", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: []string{"MIG-c1::0"}}}},
		{Name: "c2", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: []string{"MIG-c1::1"}}}},
	}}}})
	b, err := NewBuilder(nil, BuilderOptions{Pods: fixedPods{m}, PodTenancy: PodTenancy{ByNamespace: true}})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{{Index: 0, UUID: "GPU-c", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		MIG: []gpu.MIGInstance{{UUID: "MIG-c1", GPUInstanceID: 1}}}}}
	var got []string
	for _, u := range b.Build(r, gpu.SamplerStats{}).Usage {
		got = append(got, u.Tenant+"/"+u.GPUInstance)
	}
	if fmt.Sprint(got) != "[llm/1]" {
		t.Errorf("usage %v, want the instance llm's", got)
	}
}
