package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

var (
	scenarioTable = flag.Bool("scenario-table", false, "print the policy table of scenarios/README.md for every built-in scenario (TestScenarioTable)")
	slackTable    = flag.Bool("slack-table", false, "print the SLO slack table of scenarios/README.md, on the first of -table-seeds (TestScenarioTable)")
	tableSeeds    = flag.String("table-seeds", "1-3", "seeds of -scenario-table: a range (4-6) or a list (1,5,9)")
	tablePolicies = flag.String("table-policies", strings.Join([]string{tuner.StaticEqualName, tuner.UncappedName, tuner.AutotuneName, oracleName}, ","),
		"policies of -scenario-table, in row order; static-equal and best-effort are needed for the goodput columns")
)

// compactAbove is the number of latency tenants above which a row's
// attainment column names only the worst tenant and how many met their
// SLO on every seed.
const compactAbove = 4

// policyRuns is one policy's runs of a scenario, one per seed.
type policyRuns struct {
	policy string
	sums   []report.Summary
	rates  []changeRate
}

// tenantMean is the mean of f over the runs' summaries of tenant name;
// runs without the tenant are left out.
func (p *policyRuns) tenantMean(name string, f func(report.TenantSummary) float64) float64 {
	var sum float64
	n := 0
	for _, s := range p.sums {
		for _, ts := range s.Tenants {
			if ts.Tenant == name {
				sum += f(ts)
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// mean is the mean of f over the runs' summaries.
func (p *policyRuns) mean(f func(report.Summary) float64) float64 {
	var sum float64
	for _, s := range p.sums {
		sum += f(s)
	}
	return sum / float64(len(p.sums))
}

// scenarioRuns are a scenario's runs under every policy of the table.
type scenarioRuns struct {
	name string // as the table names it, e.g. replay/diurnal-shift
	runs []*policyRuns
}

func (sr scenarioRuns) of(policy string) *policyRuns {
	for _, p := range sr.runs {
		if p.policy == policy {
			return p
		}
	}
	return nil
}

// parseSeedRange parses -table-seeds: a range A-B, a single seed or a
// comma-separated list.
func parseSeedRange(v string) ([]int64, error) {
	if a, b, ok := strings.Cut(v, "-"); ok && a != "" {
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || lo < 1 || hi < lo {
			return nil, fmt.Errorf("-table-seeds %q: want a range of positive seeds such as 4-6", v)
		}
		var out []int64
		for s := lo; s <= hi; s++ {
			out = append(out, s)
		}
		return out, nil
	}
	if !strings.Contains(v, ",") {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s == 0 {
			return nil, fmt.Errorf("-table-seeds %q: want a range (4-6), a seed or a list (1,5,9)", v)
		}
		return []int64{s}, nil
	}
	_, list, err := parseSeeds(v)
	return list, err
}

// runPolicies runs the scenario under each policy on each seed, for dur
// (the scenario's duration when 0) at a 1 s step, as `vgpusim run --seeds`
// does.
func runPolicies(ctx context.Context, scenario, name string, policies []string, seeds []int64, dur time.Duration) (scenarioRuns, error) {
	sr := scenarioRuns{name: name}
	for _, pol := range policies {
		pr := &policyRuns{policy: pol}
		for _, seed := range seeds {
			_, s, rate, err := runSeed(ctx, runConfig{
				Scenario: scenario, Policy: pol, Duration: dur, Step: time.Second, Format: report.FormatCSV,
			}, seed)
			if err != nil {
				return sr, fmt.Errorf("%s, %s, seed %d: %w", name, pol, seed, err)
			}
			pr.sums = append(pr.sums, s)
			pr.rates = append(pr.rates, rate)
		}
		sr.runs = append(sr.runs, pr)
	}
	return sr, nil
}

// tableHeader is the policy table's header: with the column vs oracle
// when the oracle is one of its policies.
func tableHeader(withOracle bool) []string {
	cols := []string{"Scenario", "policy", "SLOs met", "attainment (seeds met)", "goodput", "vs static-equal"}
	if withOracle {
		cols = append(cols, "vs oracle")
	}
	cols = append(cols, "GPU-minutes held", "energy", "changes/min/GPU (busiest)")
	return []string{mdRow(cols), "|" + strings.Repeat("---|", len(cols))}
}

func mdRow(cols []string) string { return "| " + strings.Join(cols, " | ") + " |" }

// goodputSum is the table's goodput: each tenant's mean goodput under p
// over its mean work rate under best-effort, summed over the tenants
// (those that did no work under best-effort left out).
func goodputSum(p, be *policyRuns) float64 {
	var sum float64
	for _, ts := range be.sums[0].Tenants {
		work := be.tenantMean(ts.Tenant, func(t report.TenantSummary) float64 { return t.WorkRate })
		if work > 0 {
			sum += p.tenantMean(ts.Tenant, func(t report.TenantSummary) float64 { return t.Goodput }) / work
		}
	}
	return sum
}

// ratio renders a/b as 1.23x, or - when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

// latencyTenant is a tenant's attainment over a policy's runs.
type latencyTenant struct {
	name       string
	attainment float64 // mean, 0-1
	met        int     // seeds on which it met its SLO
}

func (l latencyTenant) String(seeds int) string {
	return fmt.Sprintf("%s %.1f%% (%d/%d)", l.name, 100*l.attainment, l.met, seeds)
}

// latencyTenants are the tenants with an attainment in any of p's runs,
// sorted by name.
func latencyTenants(p *policyRuns) []latencyTenant {
	var names []string
	for _, s := range p.sums {
		for _, ts := range s.Tenants {
			if ts.Attainment != nil && !slices.Contains(names, ts.Tenant) {
				names = append(names, ts.Tenant)
			}
		}
	}
	slices.Sort(names)
	out := make([]latencyTenant, 0, len(names))
	for _, name := range names {
		var sum float64
		n := 0
		l := latencyTenant{name: name}
		for _, s := range p.sums {
			for _, ts := range s.Tenants {
				if ts.Tenant != name {
					continue
				}
				if ts.Attainment != nil {
					sum += *ts.Attainment
					n++
				}
				if ts.SLOMet != nil && *ts.SLOMet {
					l.met++
				}
			}
		}
		l.attainment = sum / float64(n)
		out = append(out, l)
	}
	return out
}

// attainmentCell is the column attainment (seeds met): every latency
// tenant, or beyond compactAbove of them the worst and how many met on
// every seed.
func attainmentCell(p *policyRuns) string {
	ls := latencyTenants(p)
	seeds := len(p.sums)
	if len(ls) <= compactAbove {
		cells := make([]string, len(ls))
		for i, l := range ls {
			cells[i] = l.String(seeds)
		}
		return strings.Join(cells, ", ")
	}
	worst := ls[0]
	always := 0
	for _, l := range ls {
		if l.attainment < worst.attainment {
			worst = l
		}
		if l.met == seeds {
			always++
		}
	}
	return fmt.Sprintf("worst %s; %d of %d met on every seed", worst.String(seeds), always, len(ls))
}

// energyCell renders joules as kJ with three significant digits and no
// exponent.
func energyCell(j float64) string {
	kj, _ := strconv.ParseFloat(strconv.FormatFloat(j/1000, 'g', 3, 64), 64)
	if kj >= 100 {
		return strconv.FormatFloat(kj, 'f', 0, 64) + " kJ"
	}
	return strconv.FormatFloat(kj, 'g', 3, 64) + " kJ"
}

// tableRows are the scenario's rows of the policy table, one per policy
// in run order.
func tableRows(sr scenarioRuns) ([]string, error) {
	be, se, or := sr.of(tuner.UncappedName), sr.of(tuner.StaticEqualName), sr.of(oracleName)
	if be == nil || se == nil {
		return nil, fmt.Errorf("%s: the table needs the %s and %s runs", sr.name, tuner.UncappedName, tuner.StaticEqualName)
	}
	seGood := goodputSum(se, be)
	var orGood float64
	if or != nil {
		orGood = goodputSum(or, be)
	}
	var rows []string
	for _, p := range sr.runs {
		good := goodputSum(p, be)
		var mean, busiest float64
		for _, r := range p.rates {
			mean += r.mean / float64(len(p.rates))
			busiest += r.max / float64(len(p.rates))
		}
		met := p.mean(func(s report.Summary) float64 { return float64(s.SLOsMet) })
		held := p.mean(func(s report.Summary) float64 { return float64(s.SLOsHeld) })
		cols := []string{
			"`" + sr.name + "`", p.policy,
			strconv.FormatFloat(met, 'g', 3, 64) + " of " + strconv.FormatFloat(held, 'g', 3, 64),
			attainmentCell(p),
			strconv.FormatFloat(good, 'f', 2, 64),
			ratio(good, seGood),
		}
		if or != nil {
			cols = append(cols, ratio(good, orGood))
		}
		cols = append(cols,
			strconv.FormatFloat(100*p.mean(func(s report.Summary) float64 { return s.HeldFraction }), 'f', 0, 64)+"%",
			energyCell(p.mean(func(s report.Summary) float64 { return s.EnergyJ })),
			fmt.Sprintf("%.2f (%.2f)", mean, busiest),
		)
		rows = append(rows, mdRow(cols))
	}
	return rows, nil
}

// slackHeader is the slack table's header.
func slackHeader() []string {
	return []string{"| Scenario | tenant | SLO | slack (best) | under |", "|---|---|---|---|---|"}
}

// sloCell renders an SLO as p99 <= 8 s, p95 <= 1.45 ms.
func sloCell(quantile, target float64) string {
	v, unit := target, "s"
	if target < 1 {
		v, unit = target*1000, "ms"
	}
	return fmt.Sprintf("p%s <= %s %s", strconv.FormatFloat(quantile*100, 'f', -1, 64), strconv.FormatFloat(v, 'g', 3, 64), unit)
}

// slackRows are the scenario's rows of the slack table: each tenant with an
// SLO, its best slack on the first seed over the slackPolicies the runs
// have, and the policy that gave it.
func slackRows(sr scenarioRuns) []string {
	first := map[string]tenantsOf{}
	for _, p := range sr.runs {
		r := tenantsOf{}
		for _, ts := range p.sums[0].Tenants {
			r[ts.Tenant] = ts
		}
		first[p.policy] = r
	}
	best, from := bestSlack(func(policy string) (tenantsOf, bool) {
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
		rows = append(rows, mdRow([]string{"`" + sr.name + "`", ts.Tenant, sloCell(ts.SLOQuantile, ts.SLOTarget), slack, under}))
	}
	return rows
}

// TestScenarioTable builds the rows of the tables of scenarios/README.md
// ("Baselines, autotune and the oracle over three seeds") and
// docs/tuning.md ("Measured"). With -scenario-table and -slack-table it
// runs every built-in scenario under -table-policies over -table-seeds for
// its full duration and prints them (minutes; run without -race):
//
//	go test ./cmd/vgpusim -run '^TestScenarioTable$' -scenario-table -slack-table -table-seeds 1-3 -timeout 1h -v | grep '^|'
//
// Without them it checks the rows of two short runs.
func TestScenarioTable(t *testing.T) {
	policies := strings.Split(*tablePolicies, ",")
	seeds, err := parseSeedRange(*tableSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if !*scenarioTable && !*slackTable {
		checkShortTable(t)
		return
	}
	bs, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	var rows, slack []string
	for _, b := range bs {
		name := strings.TrimSuffix(b.Path, ".yaml")
		start := time.Now()
		sr, err := runPolicies(context.Background(), b.Name, name, policies, seeds, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d policies x %d seeds in %v", name, len(policies), len(seeds), time.Since(start).Round(time.Second))
		r, err := tableRows(sr)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
		slack = append(slack, slackRows(sr)...)
	}
	if *scenarioTable {
		for _, l := range append(tableHeader(slices.Contains(policies, oracleName)), rows...) {
			fmt.Println(l)
		}
	}
	if *slackTable {
		if *scenarioTable {
			fmt.Println()
		}
		for _, l := range append(slackHeader(), slack...) {
			fmt.Println(l)
		}
	}
}

// checkShortTable builds the rows of short runs of one scenario under both
// baselines and checks them against the runs' summaries.
func checkShortTable(t *testing.T) {
	seeds := []int64{1, 2}
	policies := []string{tuner.StaticEqualName, tuner.UncappedName}
	sr, err := runPolicies(context.Background(), "noisy-neighbour", "noisy-neighbour", policies, seeds, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tableRows(sr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rows:\n%s\n%s", strings.Join(rows, "\n"), strings.Join(slackRows(sr), "\n"))
	header := tableHeader(false)
	if len(rows) != len(policies) {
		t.Fatalf("%d rows for %d policies:\n%s", len(rows), len(policies), strings.Join(rows, "\n"))
	}
	width := len(cells(header[0]))
	cellsOf := map[string][]string{}
	for i, r := range rows {
		c := cells(r)
		if len(c) != width {
			t.Fatalf("row %q: %d columns, header %d", r, len(c), width)
		}
		if c[0] != "`noisy-neighbour`" || c[1] != policies[i] {
			t.Errorf("row %q: want scenario and policy %s first", r, policies[i])
		}
		cellsOf[c[1]] = c
	}
	se, be := cellsOf[tuner.StaticEqualName], cellsOf[tuner.UncappedName]
	if want := map[bool]string{true: "1.00x", false: "-"}[goodputSum(sr.of(tuner.StaticEqualName), sr.of(tuner.UncappedName)) > 0]; se[5] != want {
		t.Errorf("static-equal against itself: %s, want %s", se[5], want)
	}
	// vs static-equal is the ratio of the goodput column (within its rounding)
	seGood, beGood := num(t, se[4]), num(t, be[4])
	if seGood > 0 {
		got := num(t, strings.TrimSuffix(be[5], "x"))
		if want := beGood / seGood; math.Abs(got-want) > 0.005/seGood*(1+want)+0.005 {
			t.Errorf("best-effort vs static-equal %s, goodputs %s and %s", be[5], be[4], se[4])
		}
	}
	for _, p := range sr.runs {
		c := cellsOf[p.policy]
		// goodput counts a tenant's work only where its GPU held, so it is at
		// most the tenant count, and best-effort's is the held fraction of
		// its own work, at most 1 a tenant
		if g := num(t, c[4]); g < 0 || g > float64(len(p.sums[0].Tenants)) {
			t.Errorf("%s goodput %s outside 0-%d", p.policy, c[4], len(p.sums[0].Tenants))
		}
		var met, held float64
		for _, s := range p.sums {
			met += float64(s.SLOsMet) / float64(len(p.sums))
			held += float64(s.SLOsHeld) / float64(len(p.sums))
		}
		if want := fmt.Sprintf("%s of %s", strconv.FormatFloat(met, 'g', 3, 64), strconv.FormatFloat(held, 'g', 3, 64)); c[2] != want {
			t.Errorf("%s SLOs met %q, summaries give %q", p.policy, c[2], want)
		}
		for _, l := range latencyTenants(p) {
			if !strings.Contains(c[3], l.String(len(seeds))) {
				t.Errorf("%s attainment %q lacks %s", p.policy, c[3], l.String(len(seeds)))
			}
		}
	}
	for _, r := range slackRows(sr) {
		if c := cells(r); len(c) != len(cells(slackHeader()[0])) || !strings.HasPrefix(c[2], "p") {
			t.Errorf("slack row %q", r)
		}
	}
}

// cells splits a markdown row into its cells.
func cells(row string) []string {
	c := strings.Split(strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|"), "|")
	for i := range c {
		c[i] = strings.TrimSpace(c[i])
	}
	return c
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return v
}

func TestTableRowsFormat(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	// sum is a run of chat (with an SLO) and train
	sum := func(att float64, met bool, chatWork, chatGood, trainWork, trainGood, held, energy float64) report.Summary {
		s := report.Summary{SLOsHeld: 1, HeldFraction: held, EnergyJ: energy, Tenants: []report.TenantSummary{
			{Tenant: "chat", Attainment: f(att), SLOMet: b(met), SLOQuantile: 0.99, SLOTarget: 0.0035, Slack: f(att * 3), WorkRate: chatWork, Goodput: chatGood},
			{Tenant: "train", WorkRate: trainWork, Goodput: trainGood},
		}}
		if met {
			s.SLOsMet = 1
		}
		return s
	}
	sr := scenarioRuns{name: "two", runs: []*policyRuns{
		{policy: tuner.StaticEqualName, sums: []report.Summary{sum(0.97, false, 10, 2, 100, 20, 0.25, 1449999), sum(0.98, false, 10, 2, 100, 20, 0.35, 1449999)},
			rates: []changeRate{{mean: 0.1, max: 0.2}, {mean: 0.2, max: 0.4}}},
		{policy: tuner.UncappedName, sums: []report.Summary{sum(0.99, true, 10, 5, 100, 50, 0.5, 90000), sum(0.986, false, 10, 5, 100, 50, 0.5, 90000)},
			rates: []changeRate{{}, {}}},
		{policy: oracleName, sums: []report.Summary{sum(1, true, 10, 10, 100, 100, 1, 225400), sum(1, true, 10, 10, 100, 80, 1, 225400)},
			rates: []changeRate{{mean: 0.3, max: 0.3}, {mean: 0.3, max: 0.3}}},
	}}
	rows, err := tableRows(sr)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"| `two` | static-equal | 0 of 1 | chat 97.5% (0/2) | 0.40 | 1.00x | 0.21x | 30% | 1450 kJ | 0.15 (0.30) |",
		"| `two` | best-effort | 0.5 of 1 | chat 98.8% (1/2) | 1.00 | 2.50x | 0.53x | 50% | 90 kJ | 0.00 (0.00) |",
		"| `two` | oracle | 1 of 1 | chat 100.0% (2/2) | 1.90 | 4.75x | 1.00x | 100% | 225 kJ | 0.30 (0.30) |",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if got, want := slackRows(sr), []string{"| `two` | chat | p99 <= 3.5 ms | 3.00x | oracle |"}; !slices.Equal(got, want) {
		t.Errorf("slack rows %q, want %q", got, want)
	}
	if _, err := tableRows(scenarioRuns{name: "x", runs: sr.runs[1:]}); err == nil {
		t.Error("rows without static-equal: no error")
	}

	// no goodput under static-equal: no ratio; more than compactAbove
	// latency tenants: the worst and the count met on every seed
	var many []report.TenantSummary
	for i := range compactAbove + 1 {
		many = append(many, report.TenantSummary{Tenant: fmt.Sprintf("t%d", i), Attainment: f(1 - float64(i%3)/10), SLOMet: b(i%3 == 0), WorkRate: 1})
	}
	one := []report.Summary{{SLOsHeld: len(many), Tenants: many}}
	compact := scenarioRuns{name: "many", runs: []*policyRuns{
		{policy: tuner.StaticEqualName, sums: one, rates: []changeRate{{}}},
		{policy: tuner.UncappedName, sums: one, rates: []changeRate{{}}},
	}}
	rows, err = tableRows(compact)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| `many` | static-equal | 0 of 5 | worst t2 80.0% (0/1); 2 of 5 met on every seed | 0.00 | - | 0% | 0 kJ | 0.00 (0.00) |"; rows[0] != want {
		t.Errorf("row\n%s\nwant\n%s", rows[0], want)
	}
	if got := tableHeader(false); len(cells(got[0])) != len(cells(rows[0])) || len(cells(got[1])) != len(cells(rows[0])) {
		t.Errorf("header %q has not the rows' %d columns", got, len(cells(rows[0])))
	}
}

func TestParseSeedRange(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		err  bool
	}{
		{"1-3", []int64{1, 2, 3}, false},
		{"4-6", []int64{4, 5, 6}, false},
		{"7", []int64{7}, false},
		{"1,5,9", []int64{1, 5, 9}, false},
		{"3-1", nil, true},
		{"0-2", nil, true},
		{"0", nil, true},
		{"a-b", nil, true},
		{"", nil, true},
	}
	for _, tc := range tests {
		got, err := parseSeedRange(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("parseSeedRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}
