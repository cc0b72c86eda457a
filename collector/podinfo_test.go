package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

const (
	podInfoHeader = `# HELP vgpu_tenant_pod_info A container that the kubelet's pod-resources API assigns the GPU (or MIG instance), with the tenant of its pod; always 1. Join on tenant, gpu, uuid and gpu_instance to name a tenant's pods.
# TYPE vgpu_tenant_pod_info gauge
`
	podDroppedHeader = `# HELP vgpu_tenant_pod_info_dropped_total Container GPU allocations left without a vgpu_tenant_pod_info series since the exporter started because --kubernetes.pod-info.max-series was reached, each counted once when first left out.
# TYPE vgpu_tenant_pod_info_dropped_total counter
`
)

// TestPodInfoSeries renders the snapshot's pod info: nothing while it is
// off, one series per allocation and the dropped counter while it is on,
// a copy listed twice skipped (the collector fails).
func TestPodInfoSeries(t *testing.T) {
	chat := tenant.PodAllocation{Tenant: "llm", GPU: 0, UUID: "GPU-0", Namespace: "llm", Pod: "chat-7d9f8-x2x1q", Container: "server"}
	train := tenant.PodAllocation{Tenant: "research", GPU: 1, UUID: "GPU-1", GPUInstance: "3", Namespace: "research", Pod: "train-0", Container: "trainer"}
	for _, tc := range []struct {
		name    string
		pi      *tenant.PodInfo
		want    string
		success float64
	}{
		{"off", nil, "", 1},
		{"on, no pods yet", &tenant.PodInfo{MaxSeries: 512}, podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n", 1},
		{"on", &tenant.PodInfo{MaxSeries: 512, Allocations: []tenant.PodAllocation{chat, train}}, podInfoHeader +
			`vgpu_tenant_pod_info{container="server",gpu="0",gpu_instance="",namespace="llm",pod="chat-7d9f8-x2x1q",tenant="llm",uuid="GPU-0"} 1
vgpu_tenant_pod_info{container="trainer",gpu="1",gpu_instance="3",namespace="research",pod="train-0",tenant="research",uuid="GPU-1"} 1
` + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n", 1},
		{"bound reached", &tenant.PodInfo{MaxSeries: 1, DroppedTotal: 3, Allocations: []tenant.PodAllocation{train}}, podInfoHeader +
			`vgpu_tenant_pod_info{container="trainer",gpu="1",gpu_instance="3",namespace="research",pod="train-0",tenant="research",uuid="GPU-1"} 1
` + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 3\n", 1},
		{"listed twice", &tenant.PodInfo{MaxSeries: 512, Allocations: []tenant.PodAllocation{chat, chat}}, podInfoHeader +
			`vgpu_tenant_pod_info{container="server",gpu="0",gpu_instance="",namespace="llm",pod="chat-7d9f8-x2x1q",tenant="llm",uuid="GPU-0"} 1
` + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExporter(t, &tenant.Snapshot{Time: t0, PodInfo: tc.pi}, "tenant")
			if err := testutil.CollectAndCompare(e, strings.NewReader(tc.want), "vgpu_tenant_pod_info", "vgpu_tenant_pod_info_dropped_total"); err != nil {
				t.Error(err)
			}
			ok := "# HELP vgpu_scrape_collector_success 1 if the collector rendered the snapshot served without error, 0 if it failed or no snapshot exists yet.\n# TYPE vgpu_scrape_collector_success gauge\n" +
				`vgpu_scrape_collector_success{collector="tenant"} ` + map[float64]string{0: "0", 1: "1"}[tc.success] + "\n"
			if err := testutil.CollectAndCompare(e, strings.NewReader(ok), "vgpu_scrape_collector_success"); err != nil {
				t.Error(err)
			}
		})
	}
}

// podsOf is a tenant.PodMapper whose mapping the test sets; its status
// counts the mapping's pods, as kube.Mapper's does.
type podsOf struct{ m *kube.Mapping }

func (p *podsOf) Start(context.Context)   {}
func (p *podsOf) Wait()                   {}
func (p *podsOf) Refresh(context.Context) {}
func (p *podsOf) Mapping() *kube.Mapping  { return p.m }
func (p *podsOf) Status() kube.Status     { return kube.Status{Up: true, PodsMapped: p.m.Pods()} }

// TestPodInfoFollowsPods builds snapshots from a changing pod-resources
// answer (--kubernetes.pod-info, at most two series) and scrapes them: a
// pod that leaves takes its series with it at the next sample; beyond the
// bound a newcomer is counted, not served, until there is room.
func TestPodInfoFollowsPods(t *testing.T) {
	alloc := func(ns, name, container, id string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{{
			Name: container, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}}}}
	}
	a := alloc("research", "worker-a", "worker", "GPU-1111::0")
	b := alloc("inference", "worker-b", "worker", "GPU-1111::1")
	c := alloc("inference", "worker-c", "worker", "GPU-1111::2")
	const (
		seriesA = `vgpu_tenant_pod_info{container="worker",gpu="1",gpu_instance="",namespace="research",pod="worker-a",tenant="research",uuid="GPU-1111"} 1` + "\n"
		seriesB = `vgpu_tenant_pod_info{container="worker",gpu="1",gpu_instance="",namespace="inference",pod="worker-b",tenant="inference",uuid="GPU-1111"} 1` + "\n"
		seriesC = `vgpu_tenant_pod_info{container="worker",gpu="1",gpu_instance="",namespace="inference",pod="worker-c",tenant="inference",uuid="GPU-1111"} 1` + "\n"
	)
	pods := &podsOf{}
	bld, err := tenant.NewBuilder(nil, tenant.BuilderOptions{Pods: pods, PodTenancy: tenant.PodTenancy{ByNamespace: true},
		PodInfo: tenant.PodInfoOptions{On: true, MaxSeries: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var store tenant.Store
	e, err := NewExporter(store.Load, nil, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Time: t0, Devices: []gpu.Device{timeSlicedDevice()}}
	for _, step := range []struct {
		name string
		pods []*podresourcesv1.PodResources
		want string
	}{
		{"two pods", []*podresourcesv1.PodResources{a, b}, podInfoHeader + seriesB + seriesA + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 0\n"},
		{"bound reached", []*podresourcesv1.PodResources{a, b, c}, podInfoHeader + seriesB + seriesA + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 1\n"},
		{"pod gone", []*podresourcesv1.PodResources{b, c}, podInfoHeader + seriesB + seriesC + podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 1\n"},
		{"all gone", nil, podDroppedHeader + "vgpu_tenant_pod_info_dropped_total 1\n"},
	} {
		pods.m = kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: step.pods})
		r.Time = r.Time.Add(time.Second)
		store.Store(bld.Build(r, gpu.SamplerStats{}))
		if err := testutil.CollectAndCompare(e, strings.NewReader(step.want), "vgpu_tenant_pod_info", "vgpu_tenant_pod_info_dropped_total"); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
}
