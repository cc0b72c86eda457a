package table

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
)

// The headline figures of a row are per tenant, so that no tenant's miss
// hides behind another's surplus: the SLOs met on each seed, each latency
// tenant's attainment (attainmentCell) and each batch tenant's work as a
// fraction of the reference policy's (the oracle's when the table runs
// it, else best-effort's).

// metCell is the column SLOs met (per seed): met/held of each seed's run,
// in seed order.
func metCell(p *policyRuns) string {
	cells := make([]string, len(p.sums))
	for i, s := range p.sums {
		cells[i] = fmt.Sprintf("%d/%d", s.SLOsMet, s.SLOsHeld)
	}
	return strings.Join(cells, ", ")
}

// batchTenants are the tenants without an SLO that did work in any of
// ref's runs, sorted by name: the tenants whose figure is their work.
func batchTenants(ref *policyRuns) []string {
	var names []string
	for _, s := range ref.sums {
		for _, ts := range s.Tenants {
			if ts.SLOQuantile == 0 && ts.Attainment == nil && ts.WorkRate > 0 && !slices.Contains(names, ts.Tenant) {
				names = append(names, ts.Tenant)
			}
		}
	}
	slices.Sort(names)
	return names
}

// batchCell is the column batch work: each batch tenant's mean work rate
// under p over its mean work rate under ref, or beyond compactAbove of
// them the least and the mean of the fractions; "-" when the scenario
// has no batch tenant.
func batchCell(p, ref *policyRuns) string {
	names := batchTenants(ref)
	if len(names) == 0 {
		return "-"
	}
	workRate := func(t report.TenantSummary) float64 { return t.WorkRate }
	fracs := make([]float64, len(names))
	cells := make([]string, len(names))
	for i, name := range names {
		fracs[i] = p.tenantMean(name, workRate) / ref.tenantMean(name, workRate)
		cells[i] = name + " " + strconv.FormatFloat(fracs[i], 'f', 2, 64) + "x"
	}
	if len(names) <= compactAbove {
		return strings.Join(cells, ", ")
	}
	least, sum := 0, 0.0
	for i, f := range fracs {
		if f < fracs[least] {
			least = i
		}
		sum += f
	}
	return fmt.Sprintf("least %s; mean %.2fx of %d", cells[least], sum/float64(len(fracs)), len(fracs))
}
