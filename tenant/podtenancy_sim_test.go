package tenant_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// staticPods is a tenant.PodMapper with one fixed mapping.
type staticPods struct{ m *kube.Mapping }

func (p staticPods) Start(context.Context)   {}
func (p staticPods) Wait()                   {}
func (p staticPods) Refresh(context.Context) {}
func (p staticPods) Mapping() *kube.Mapping  { return p.m }
func (p staticPods) Status() kube.Status     { return kube.Status{Up: true} }

// TestPodTenantsConserve runs the h100-timeslice scenario with no tenants
// file and a pod mapping that puts its chat process in a pod of namespace
// llm and its recommender in a pod of namespace recsys, both holding
// replicas of the one GPU (its training process is in no pod the mapping
// knows): two tenants are served, one per namespace, the training job is
// unassigned, and on every sample the tenants' SM active, DRAM active and
// context-switch increase add up to the GPU's.
func TestPodTenantsConserve(t *testing.T) {
	bi, err := scenarios.Find("h100-timeslice")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sim.LoadScenarioFS(bi.FS, bi.Path)
	if err != nil {
		t.Fatal(bi.Explain(err))
	}
	s, err := sim.New(sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uuid := first.Devices[0].UUID
	want := map[string]string{"chat": "llm", "recsys": "recsys", "train": tenant.Unassigned}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	var items string
	pidTenant := map[uint32]string{}
	for i, ts := range sc.Tenants {
		pidTenant[ts.Process.PID] = want[ts.Name]
		if want[ts.Name] == tenant.Unassigned {
			continue
		}
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Name: ts.Name + "-0", Namespace: want[ts.Name],
			Containers: []*podresourcesv1.ContainerResources{{Name: "server",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("%s::%d", uuid, i)}}}}}})
		if items != "" {
			items += ","
		}
		items += fmt.Sprintf(`{"metadata":{"name":"%s-0","namespace":%q,"uid":%q}}`, ts.Name, want[ts.Name], ts.Process.PodUID)
	}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(`{"items":[`+items+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(s.Now())
	b, err := tenant.NewBuilder(nil, tenant.BuilderOptions{Clock: clock, Pods: staticPods{m}, PodTenancy: tenant.PodTenancy{ByNamespace: true}})
	if err != nil {
		t.Fatal(err)
	}
	b.Build(first, gpu.SamplerStats{})
	served := map[string]bool{}
	var prevCS *uint64
	lastCS := map[string]float64{}
	for step := 1; step <= 60; step++ {
		at := s.Now().Add(truthSample)
		s.AdvanceTo(at)
		clock.Set(at)
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snap := b.Build(r, gpu.SamplerStats{})
		d := r.Devices[0]
		var sm, dram, cs float64
		for _, u := range snap.Usage {
			served[u.Tenant] = true
			for _, pid := range u.PIDs {
				if pidTenant[pid] != u.Tenant {
					t.Fatalf("%s: pid %d attributed to %q, want %q", at.Format(time.TimeOnly), pid, u.Tenant, pidTenant[pid])
				}
			}
			sm += deref(u.SMActive)
			dram += deref(u.DRAMActive)
			if u.ContextSwitchesTotal != nil {
				cs += *u.ContextSwitchesTotal - lastCS[u.Tenant]
				lastCS[u.Tenant] = *u.ContextSwitchesTotal
			}
		}
		if math.Abs(sm-deref(d.Activity.SMActive)) > conserveTol || math.Abs(dram-deref(d.Activity.DRAMActive)) > conserveTol {
			t.Errorf("%s: tenants' SM active %v and DRAM active %v; the GPU's %v and %v", at.Format(time.TimeOnly), sm, dram, deref(d.Activity.SMActive), deref(d.Activity.DRAMActive))
		}
		if prevCS != nil && d.ContextSwitchesTotal != nil {
			if want := float64(*d.ContextSwitchesTotal - *prevCS); math.Abs(cs-want) > 1e-6*max(1, want) {
				t.Errorf("%s: tenants' context switches grew by %v, the GPU's by %v", at.Format(time.TimeOnly), cs, want)
			}
		}
		prevCS = d.ContextSwitchesTotal
	}
	var names []string
	for n := range served {
		names = append(names, n)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[llm recsys unassigned]" {
		t.Errorf("tenants served %v, want [llm recsys unassigned]", names)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
