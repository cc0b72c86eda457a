package tenant

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-kit/log"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// Devices of NVIDIA's resources that the pod mapping cannot tie to a GPU
// (MIG devices under deviceIDStrategy=index) are logged once per
// resource, with their IDs, however many samples and refreshes see them.
func TestUnmappedDevicesLogged(t *testing.T) {
	mapping := func(resources ...string) *kube.Mapping {
		var prs []*podresourcesv1.PodResources
		for i, res := range resources {
			prs = append(prs, &podresourcesv1.PodResources{Namespace: "llm", Name: "p" + string(rune('a'+i)), Containers: []*podresourcesv1.ContainerResources{{
				Name: "c", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: res, DeviceIds: []string{"0:1", "0:2"}}}}}})
		}
		return kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: prs})
	}
	var logs bytes.Buffer
	pods := &fixedPods{}
	b, err := NewBuilder(nil, BuilderOptions{Pods: pods, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true}}}
	for _, m := range []*kube.Mapping{mapping("nvidia.com/mig-1g.10gb"), mapping("nvidia.com/mig-1g.10gb"), mapping("nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb")} {
		pods.m = m
		b.Build(r, gpu.SamplerStats{})
		b.Build(r, gpu.SamplerStats{})
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "resource=nvidia.com/mig-1g.10gb device_ids=0:1,0:2") ||
		!strings.Contains(lines[1], "resource=nvidia.com/mig-3g.40gb") || !strings.Contains(lines[0], "deviceIDStrategy=uuid") {
		t.Errorf("want one warning per resource naming its IDs and the fix, got:\n%s", logs.String())
	}
}

// Containers and device IDs the kubelet names longer than Kubernetes
// allows are left out of the mapping and logged once, the first named,
// clipped.
func TestOversizedPodNamesLogged(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	m := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: long,
		Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}})
	var logs bytes.Buffer
	b, err := NewBuilder(nil, BuilderOptions{Pods: &fixedPods{m: m}, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true}}}
	b.Build(r, gpu.SamplerStats{})
	b.Build(r, gpu.SamplerStats{})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "longer than Kubernetes allows") || !strings.Contains(lines[0], "left_out=1") ||
		!strings.Contains(lines[0], "container llm/xxx") || len(lines[0]) > 1024 {
		t.Errorf("want one short warning naming the container, got %d lines: %.300s", len(lines), logs.String())
	}
}
