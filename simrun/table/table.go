// Package table builds the scenario tables of scenarios/README.md and
// docs/tuning.md: every built-in scenario run under a set of policies over
// a set of seeds, one markdown row per scenario and policy (SLOs met on
// each seed, each latency tenant's attainment, each batch tenant's work
// against the oracle's, energy, GPU-minutes held, goodput against the
// baselines and the oracle, how often the policy changed a setting), and the SLO
// slack table; and the spread over seeds that `vgpusim run --seeds`
// prints.
package table

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// Options say which tables to build from which runs.
type Options struct {
	// Run is the base of every run: its step, its actuators and, when not
	// 0, a duration for every scenario instead of its own.
	Run simrun.Config
	// Policies are the policies of the table, in row order; static-equal
	// and best-effort are needed for the goodput columns.
	Policies []string
	// Seeds are the seeds each scenario runs on under each policy; the
	// slack table reads the first.
	Seeds []int64
	// Scenarios are the scenarios to run, each a scenario file (with its
	// companion tenants file, as simrun.LoadScenario reads it) or the name
	// of a built-in one; none: every built-in one. The built-in ones run
	// in the library's order, then the files in the order given.
	Scenarios []string
	// Policy and Slack choose the tables: the policy table, the slack
	// table or both (the policy table first).
	Policy, Slack bool
	// Log, when set, is told each scenario's run time.
	Log func(format string, args ...any)
}

// Write runs the scenarios and writes the tables o chooses to w.
func Write(ctx context.Context, w io.Writer, o Options) error {
	bs, err := scenarios.List()
	if err != nil {
		return err
	}
	if !o.Policy && !o.Slack {
		return errors.New("--no-policy-table without --slack leaves no table to print")
	}
	if err := checkPolicies(o.Policies); err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, name := range o.Scenarios {
		key := strings.TrimSuffix(name, ".yaml")
		if simrun.IsFile(name) {
			key = "file " + filepath.Clean(name)
		}
		if seen[key] {
			return fmt.Errorf("--scenario %s given twice (its rows would be the same runs twice)", name)
		}
		seen[key] = true
		// checked now, so that an unknown name, a bad file or a policy a
		// file cannot be run under is refused before any run
		for _, p := range o.Policies {
			cfg := o.Run
			cfg.Scenario, cfg.Policy = name, p
			if err := cfg.Check(); err != nil {
				return err
			}
		}
		if simrun.IsFile(name) {
			files = append(files, name)
		}
	}
	if o.Policy && (!slices.Contains(o.Policies, baseline.UncappedName) || !slices.Contains(o.Policies, baseline.StaticEqualName)) {
		return fmt.Errorf("--policies: the policy table needs the %s and %s runs (its goodput columns are over theirs); add them, or print the slack table alone (--no-policy-table --slack)",
			baseline.UncappedName, baseline.StaticEqualName)
	}
	// each run's scenario argument, and its name in the tables
	var args, names []string
	for _, b := range bs {
		if (len(o.Scenarios) == 0 || slices.Contains(o.Scenarios, b.Name)) && !slices.Contains(files, b.Name) {
			args, names = append(args, b.Name), append(names, strings.TrimSuffix(b.Path, ".yaml"))
		}
	}
	for _, f := range files {
		args, names = append(args, f), append(names, strings.TrimSuffix(f, filepath.Ext(f)))
	}
	var rows, slack []string
	for i, arg := range args {
		name := names[i]
		start := time.Now()
		sr, err := runPolicies(ctx, o.Run, arg, name, o.Policies, o.Seeds)
		if err != nil {
			return err
		}
		if o.Log != nil {
			o.Log("%s: %d policies x %d seeds in %v", name, len(o.Policies), len(o.Seeds), time.Since(start).Round(time.Second))
		}
		if o.Policy {
			r, err := tableRows(sr)
			if err != nil {
				return err
			}
			rows = append(rows, r...)
		}
		slack = append(slack, slackRows(sr)...)
	}
	var out []string
	if o.Policy {
		out = append(tableHeader(slices.Contains(o.Policies, oracle.Name)), rows...)
	}
	if o.Slack {
		if o.Policy {
			out = append(out, "")
		}
		out = append(append(out, slackHeader()...), slack...)
	}
	for _, l := range out {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// ParsePolicies parses --policies: a comma-separated list of known
// policies, each once, spaces around a name left out.
func ParsePolicies(v string) ([]string, error) {
	list := strings.Split(v, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	if err := checkPolicies(list); err != nil {
		return nil, fmt.Errorf("--policies %q: %w", v, err)
	}
	return list, nil
}

// checkPolicies returns an error for an empty or unknown name in list,
// or one that is there twice.
func checkPolicies(list []string) error {
	for i, p := range list {
		if p == "" {
			return fmt.Errorf("an empty name at place %d of %d (want policies such as %s,%s)", i+1, len(list), baseline.StaticEqualName, baseline.UncappedName)
		}
		if err := simrun.UnknownPolicy(p); err != nil {
			return err
		}
		if slices.Contains(list[:i], p) {
			return fmt.Errorf("%s twice (its rows would be the same runs twice)", p)
		}
	}
	return nil
}

// compactAbove is the number of latency tenants above which a row's
// attainment column names only the worst tenant and how many met their
// SLO on every seed.
const compactAbove = 4

// policyRuns is one policy's runs of a scenario, one per seed.
type policyRuns struct {
	policy string
	sums   []report.Summary
	rates  []simrun.ChangeRate
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

// heldCell is the mean share of GPU-minutes in which the runs' SLOs
// held, over the runs with one ("-" where none has: no tenant, nothing
// to hold).
func heldCell(p *policyRuns) string {
	var sum float64
	n := 0
	for _, s := range p.sums {
		if s.HeldFraction != nil {
			sum += *s.HeldFraction
			n++
		}
	}
	if n == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*(sum/float64(n)), 'f', 0, 64) + "%"
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

// runPolicies runs the scenario under each policy on each seed, as
// `vgpusim run --seeds` does, with base's settings.
func runPolicies(ctx context.Context, base simrun.Config, scenario, name string, policies []string, seeds []int64) (scenarioRuns, error) {
	sr := scenarioRuns{name: name}
	for _, pol := range policies {
		pr := &policyRuns{policy: pol}
		for _, seed := range seeds {
			cfg := base
			cfg.Scenario, cfg.Policy = scenario, pol
			_, s, rate, err := simrun.RunSeed(ctx, cfg, seed)
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

// tableHeader is the policy table's header. The headline columns come
// first, per tenant: SLOs met on each seed, each latency tenant's
// attainment, each batch tenant's work as a fraction of the oracle's (of
// best-effort's when the oracle is not one of the policies); then the
// energy, and goodput as a secondary figure, with the column vs oracle
// when the oracle is one of the policies.
func tableHeader(withOracle bool) []string {
	ref := baseline.UncappedName
	if withOracle {
		ref = oracle.Name
	}
	cols := []string{"Scenario", "policy", "SLOs met (per seed)", "attainment (seeds met)", "batch work vs " + ref,
		"energy", "GPU-minutes held", "goodput", "vs static-equal"}
	if withOracle {
		cols = append(cols, "vs oracle")
	}
	cols = append(cols, "changes/min/GPU (busiest)")
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

// Goodput is the table's goodput of the runs sums summarizes: each
// tenant's mean goodput over its mean work rate in the runs bestEffort
// summarizes (best-effort's), summed over the tenants.
func Goodput(sums, bestEffort []report.Summary) float64 {
	return goodputSum(&policyRuns{sums: sums}, &policyRuns{sums: bestEffort})
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
	quantile   float64 // its SLO's
	met        int     // seeds on which it met its SLO
	served     int     // seeds on which a request ended
}

func (l latencyTenant) String(seeds int) string {
	if l.served == 0 {
		return fmt.Sprintf("%s no requests (%d/%d)", l.name, l.met, seeds)
	}
	return fmt.Sprintf("%s %s (%d/%d)", l.name, report.FloorPercentFor(l.attainment, l.quantile), l.met, seeds)
}

// latencyTenants are the tenants with an SLO in any of p's runs, sorted
// by name. A run in which one never served (no request ended: its
// attainment is nil) counts 0 in its mean: an SLO never served is missed.
func latencyTenants(p *policyRuns) []latencyTenant {
	var names []string
	for _, s := range p.sums {
		for _, ts := range s.Tenants {
			if ts.SLOTarget > 0 && !slices.Contains(names, ts.Tenant) {
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
				n++
				l.quantile = ts.SLOQuantile
				if ts.Attainment != nil {
					sum += *ts.Attainment
					l.served++
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
	be, se, or := sr.of(baseline.UncappedName), sr.of(baseline.StaticEqualName), sr.of(oracle.Name)
	if be == nil || se == nil {
		return nil, fmt.Errorf("%s: the table needs the %s and %s runs", sr.name, baseline.UncappedName, baseline.StaticEqualName)
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
			mean += r.Mean / float64(len(p.rates))
			busiest += r.Max / float64(len(p.rates))
		}
		ref := be
		if or != nil {
			ref = or
		}
		cols := []string{
			"`" + sr.name + "`", p.policy,
			metCell(p),
			attainmentCell(p),
			batchCell(p, ref),
			energyCell(p.mean(func(s report.Summary) float64 { return s.EnergyJ })),
			heldCell(p),
			strconv.FormatFloat(good, 'f', 2, 64),
			ratio(good, seGood),
		}
		if or != nil {
			cols = append(cols, ratio(good, orGood))
		}
		cols = append(cols, fmt.Sprintf("%.2f (%.2f)", mean, busiest))
		rows = append(rows, mdRow(cols))
	}
	return rows, nil
}
