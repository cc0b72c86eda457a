package table

import (
	"fmt"
	"strconv"

	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// Tenants are one run's tenant summaries by tenant name.
type Tenants map[string]report.TenantSummary

// SlackPolicies are the policies over which a tenant's best slack is
// taken: the baselines and the oracle, not the controller under test.
var SlackPolicies = []string{baseline.StaticEqualName, baseline.UncappedName, oracle.Name}

// BestSlack returns each tenant's largest slack over the runs of the
// SlackPolicies that run gives (ok false: no run of that policy) and the
// policy that gave it; tenants without a slack are left out.
func BestSlack(run func(policy string) (Tenants, bool)) (best map[string]float64, from map[string]string) {
	best, from = map[string]float64{}, map[string]string{}
	for _, p := range SlackPolicies {
		r, ok := run(p)
		if !ok {
			continue
		}
		for name, ts := range r {
			if _, seen := from[name]; ts.Slack != nil && (!seen || *ts.Slack > best[name]) {
				best[name], from[name] = *ts.Slack, p
			}
		}
	}
	return best, from
}

// slackHeader is the slack table's header.
func slackHeader() []string {
	return []string{"| Scenario | tenant | SLO | slack (best) | under |", "|---|---|---|---|---|"}
}

// sloCell renders an SLO as p99 <= 8 s, p95 <= 1.45 ms.
func sloCell(metric string, quantile, target float64) string {
	v, unit := target, "s"
	if target < 1 {
		v, unit = target*1000, "ms"
	}
	if metric != "" {
		metric += " "
	}
	return fmt.Sprintf("%sp%s <= %s %s", metric, strconv.FormatFloat(quantile*100, 'f', -1, 64), strconv.FormatFloat(v, 'g', 3, 64), unit)
}

// slackRows are the scenario's rows of the slack table: each tenant with an
// SLO, its best slack on the first seed over the SlackPolicies the runs
// have, and the policy that gave it.
func slackRows(sr scenarioRuns) []string {
	first := map[string]Tenants{}
	for _, p := range sr.runs {
		r := Tenants{}
		for _, ts := range p.sums[0].Tenants {
			r[ts.Tenant] = ts
		}
		first[p.policy] = r
	}
	best, from := BestSlack(func(policy string) (Tenants, bool) {
		r, ok := first[policy]
		return r, ok
	})
	var rows []string
	for _, ts := range sr.runs[0].sums[0].Tenants {
		if ts.SLOTarget <= 0 {
			continue
		}
		slack, under := "-", "-"
		if v, ok := best[ts.Tenant]; ok {
			slack, under = strconv.FormatFloat(v, 'f', 2, 64)+"x", from[ts.Tenant]
		}
		rows = append(rows, mdRow([]string{"`" + sr.name + "`", ts.Tenant, sloCell(ts.SLOMetric, ts.SLOQuantile, ts.SLOTarget), slack, under}))
	}
	return rows
}
