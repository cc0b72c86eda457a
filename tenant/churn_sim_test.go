package tenant_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestChurnFiguresBelongToTheInterval runs the scenarios of
// testdata/churn, where tenants stop and start on time-sliced, MPS and MIG
// GPUs and MIG instances stand empty, sampling every second, and checks on
// every sample that each figure belongs to who ran in its interval:
//   - a tenant's SM share of a whole GPU is no larger than its kernel-busy
//     time (unassigned, which is given what no figure accounts for, aside);
//   - a MIG instance's figure is measured only when one tenant had
//     processes in it at the interval's two ends, and a usage without
//     processes belongs to a tenant that had some at its start or whose
//     selector names the instance;
//   - an instance without processes at either end that no selector names
//     has no usage, unless it was active all the same (then unassigned);
//   - the tenants of each share domain add up to its figure.
func TestChurnFiguresBelongToTheInterval(t *testing.T) {
	for _, name := range []string{"ts-churn", "mig-shared", "mig-two", "mig-empty"} {
		t.Run(name, func(t *testing.T) {
			h := simtest.New(t, "testdata/churn/"+name+".yaml", "testdata/churn/"+name+".tenants.yaml")
			// the instances a selector names: gpu_instance selectors
			named := map[string]string{}
			for _, tn := range h.Config.Tenants {
				for _, s := range tn.Selectors {
					if s.GPUInstance != nil {
						named[fmt.Sprintf("%d/%d", s.GPUInstance.GPU, s.GPUInstance.ID)] = tn.Name
					}
				}
			}
			ctx := context.Background()
			prev := map[string]map[string]bool{} // tenants with processes, by GPU/instance
			for step := 1; step <= 130; step++ {
				r := h.Sample(ctx, time.Second)
				s := h.Build(ctx, r)
				at := fmt.Sprintf("at %v", time.Duration(step)*time.Second)
				// the tenants with processes in each instance
				cur := map[string]map[string]bool{}
				for _, u := range s.Usage {
					if k := fmt.Sprintf("%d/%s", u.GPU, u.GPUInstance); u.Processes > 0 {
						if cur[k] == nil {
							cur[k] = map[string]bool{}
						}
						cur[k][u.Tenant] = true
					}
				}
				sums := map[string]float64{}
				for _, u := range s.Usage {
					if u.SMActive != nil {
						sums[fmt.Sprintf("%d/%s", u.GPU, u.GPUInstance)] += *u.SMActive
					}
					if u.GPUInstance == "" {
						if u.Tenant != tenant.Unassigned && u.SMActive != nil && u.KernelBusy != nil && *u.SMActive > *u.KernelBusy+1e-9 {
							t.Errorf("%s GPU %d: %s has SM share %.4f, above its kernel-busy time %.4f", at, u.GPU, u.Tenant, *u.SMActive, *u.KernelBusy)
						}
						continue
					}
					k := fmt.Sprintf("%d/%s", u.GPU, u.GPUInstance)
					ran := map[string]bool{}
					for tn := range prev[k] {
						ran[tn] = true
					}
					for tn := range cur[k] {
						ran[tn] = true
					}
					if u.Method == tenant.Measured && len(ran) > 1 {
						t.Errorf("%s GPU %d instance %s: %s measured, while %v ran in the interval", at, u.GPU, u.GPUInstance, u.Tenant, ran)
					}
					// only activity that no process of either end accounts
					// for goes to unassigned without processes
					stray := u.Tenant == tenant.Unassigned && len(ran) == 0 && u.SMActive != nil && *u.SMActive > 0
					if u.Processes == 0 && !prev[k][u.Tenant] && named[k] != u.Tenant && !stray {
						t.Errorf("%s GPU %d instance %s: %s has usage without processes, none at the interval's start, and no selector names the instance", at, u.GPU, u.GPUInstance, u.Tenant)
					}
				}
				for _, d := range r.Devices {
					if !d.Up {
						continue
					}
					check := func(k string, want *float64) {
						if want != nil && math.Abs(sums[k]-*want) > 1e-9 {
							t.Errorf("%s %s: tenants' SM add up to %v, the domain's is %v", at, k, sums[k], *want)
						}
					}
					if len(d.MIG) == 0 {
						check(fmt.Sprintf("%d/", d.Index), d.Activity.SMActive)
					}
					for _, inst := range d.MIG {
						check(fmt.Sprintf("%d/%d", d.Index, inst.GPUInstanceID), inst.Activity.SMActive)
					}
				}
				prev = cur
			}
		})
	}
}
