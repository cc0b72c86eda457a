package collector_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestTenantSeriesKeepLabels runs the h100-timeslice scenario with its
// tenants leaving and joining the GPU (recsys stops at 20 s and comes back
// at 50 s, train stops at 30 s) and scrapes the tenant collector every
// 2 s: a tenant series, once served, never comes back with other labels
// while its tenant runs, whoever else is on the GPU (the method is on
// vgpu_tenant_figure_info and fixed by the sharing mode).
func TestTenantSeriesKeepLabels(t *testing.T) {
	data, err := os.ReadFile("../scenarios/h100-timeslice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The file ends with its events (health events): these join them.
	data = append(data, []byte(`
  - {at: 20s, tenant: recsys, action: stop}
  - {at: 30s, tenant: train, action: stop}
  - {at: 50s, tenant: recsys, action: start}
`)...)
	sc, err := sim.ParseScenario("h100-timeslice-churn.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.LoadConfig("../scenarios/h100-timeslice.tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := simtest.Start(t, sc, cfg)
	s, clock, b := h.Sim, h.Clock, h.Builder
	var store tenant.Store
	reg := register(t, &store, "tenant")
	ctx := context.Background()

	// labels of each tenant series, by metric, tenant, GPU and instance
	seen := map[string]string{}
	counts := map[int]bool{} // how many tenants were on the GPU
	for step := 1; step <= 40; step++ {
		at := s.Now().Add(2 * time.Second)
		s.AdvanceTo(at)
		clock.Set(at)
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Refresh(ctx)
		snap := b.Build(r, gpu.SamplerStats{})
		store.Store(snap)
		counts[len(snap.Usage)] = true
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "vgpu_tenant_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				id := mf.GetName() + "{" + label(m, "tenant") + "," + label(m, "gpu") + "," + label(m, "gpu_instance") + label(m, "q") + label(m, "currency") + label(m, "component") + "}"
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				sort.Strings(ls)
				all := strings.Join(ls, ",")
				if prev, ok := seen[id]; ok && prev != all {
					t.Errorf("%s at %s: %s now has labels {%s}, before {%s}", at.Format(time.TimeOnly), mf.GetName(), id, all, prev)
				}
				seen[id] = all
			}
		}
	}
	// the run must have had one, two and three tenants on the GPU
	for _, n := range []int{1, 2, 3} {
		if !counts[n] {
			t.Errorf("no sample with %d tenants on the GPU (saw %v): the scenario did not churn", n, counts)
		}
	}
}
