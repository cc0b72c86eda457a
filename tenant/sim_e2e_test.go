package tenant_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestSimScenariosAttribution runs every scenario that has a tenants
// companion and checks that each simulated process lands in the tenant of
// the same name (or in unassigned when the companion does not name it), and
// that the latency sources read through sim:// count requests.
func TestSimScenariosAttribution(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".tenants.yaml") {
			continue
		}
		companion := strings.TrimSuffix(f, ".yaml") + ".tenants.yaml"
		if _, err := os.Stat(companion); err != nil {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			h := simtest.New(t, f, companion)
			sc, cfg := h.Scenario, h.Config
			want := map[uint32]string{}
			for _, ts := range sc.Tenants {
				name := ts.Name
				if cfg.TenantByName(name) == nil {
					name = tenant.Unassigned
				}
				want[ts.Process.PID] = name
			}
			ctx := context.Background()
			h.Builder.Refresh(ctx)
			var snap *tenant.Snapshot
			for step := 1; step <= 3; step++ {
				snap = h.Build(ctx, h.Sample(ctx, 20*time.Second))
			}
			seen := map[uint32]bool{}
			named := 0
			for _, u := range snap.Usage {
				for _, pid := range u.PIDs {
					seen[pid] = true
					if u.Tenant != tenant.Unassigned && want[pid] == u.Tenant {
						named++
					}
					if w, ok := want[pid]; ok && u.Tenant != w {
						t.Errorf("pid %d attributed to %q, want %q", pid, u.Tenant, w)
					}
				}
			}
			for pid, w := range want {
				if !seen[pid] {
					t.Logf("pid %d (%s) not running in the sample", pid, w)
				}
			}
			if named == 0 {
				t.Fatalf("no process attributed to a named tenant: %+v", snap.Usage)
			}
			t.Logf("%d processes seen, %d in named tenants, %d SLO sources", len(seen), named, len(snap.SLOs))
			if snap.Attribution.ConflictsTotal != 0 {
				t.Errorf("conflicts: %+v", snap.Attribution)
			}
			// the shipped tenants files guarantee no more than each GPU (or
			// MIG instance) has
			if over := snap.Attribution.OvercommittedShares; len(over) != 0 {
				t.Errorf("share.min over-committed: %+v", over)
			}
			for _, sm := range snap.Attribution.ShareMinSums {
				t.Logf("share.min sum on GPU %d %s instance %q: %v (%s)", sm.GPU, sm.UUID, sm.GPUInstance, sm.MinSum, strings.Join(sm.Tenants, ","))
			}
			// usage invariants: ratios in [0,1]; apportioned DRAM adds up to
			// no more than the device's
			dram := map[string]float64{}
			for _, u := range snap.Usage {
				for _, v := range []*float64{u.SMActive, u.DRAMActive} {
					if v != nil && (*v < 0 || *v > 1+1e-9) {
						t.Errorf("ratio out of range: %+v", u)
					}
				}
				if u.DRAMActive != nil && u.GPUInstance == "" {
					dram[u.UUID] += *u.DRAMActive
				}
				if u.Method == "" {
					t.Errorf("no method: %+v", u)
				}
			}
			for uuid, sum := range dram {
				if d := snap.Readings.DeviceByUUID(uuid); d != nil && d.Activity.DRAMActive != nil && sum > *d.Activity.DRAMActive+1e-9 {
					t.Errorf("GPU %s: tenants' DRAM %v > device %v", uuid, sum, *d.Activity.DRAMActive)
				}
			}
			running := map[string]bool{}
			for pid := range seen {
				running[want[pid]] = true
			}
			for _, st := range snap.SLOs {
				if !st.SourceUp {
					t.Errorf("latency source of %s is down: %+v", st.Tenant, st)
				}
				if running[st.Tenant] && st.RequestsTotal <= 0 {
					t.Errorf("latency source of running %s counted no request: %+v", st.Tenant, st)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no scenario with a tenants companion under ../scenarios: nothing was checked")
	}
}
