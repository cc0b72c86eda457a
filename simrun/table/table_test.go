package table

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// TestShortTable builds the rows of short runs of one scenario under both
// baselines and checks them against the runs' summaries.
func TestShortTable(t *testing.T) {
	seeds := []int64{1, 2}
	policies := []string{baseline.StaticEqualName, baseline.UncappedName}
	base := simrun.Config{Duration: 3 * time.Minute, Step: time.Second}
	sr, err := runPolicies(context.Background(), base, "noisy-neighbour", "noisy-neighbour", policies, seeds)
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
	se, be := cellsOf[baseline.StaticEqualName], cellsOf[baseline.UncappedName]
	if want := map[bool]string{true: "1.00x", false: "-"}[goodputSum(sr.of(baseline.StaticEqualName), sr.of(baseline.UncappedName)) > 0]; se[colVsSE] != want {
		t.Errorf("static-equal against itself: %s, want %s", se[colVsSE], want)
	}
	// with no oracle, batch work is against best-effort's: 1.00x there
	if be[colBatch] != "embed 1.00x" {
		t.Errorf("best-effort batch work %q, want embed 1.00x", be[colBatch])
	}
	if !strings.HasPrefix(se[colBatch], "embed ") {
		t.Errorf("static-equal batch work %q", se[colBatch])
	}
	// vs static-equal is the ratio of the goodput column (within its rounding)
	seGood, beGood := num(t, se[colGoodput]), num(t, be[colGoodput])
	if seGood > 0 {
		got := num(t, strings.TrimSuffix(be[colVsSE], "x"))
		if want := beGood / seGood; math.Abs(got-want) > 0.005/seGood*(1+want)+0.005 {
			t.Errorf("best-effort vs static-equal %s, goodputs %s and %s", be[colVsSE], be[colGoodput], se[colGoodput])
		}
	}
	for _, p := range sr.runs {
		c := cellsOf[p.policy]
		// goodput counts a tenant's work only where its GPU held, so it is at
		// most the tenant count, and best-effort's is the held fraction of
		// its own work, at most 1 a tenant
		if g := num(t, c[colGoodput]); g < 0 || g > float64(len(p.sums[0].Tenants)) {
			t.Errorf("%s goodput %s outside 0-%d", p.policy, c[colGoodput], len(p.sums[0].Tenants))
		}
		var met []string
		for _, s := range p.sums {
			met = append(met, fmt.Sprintf("%d/%d", s.SLOsMet, s.SLOsHeld))
		}
		if want := strings.Join(met, ", "); c[2] != want {
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

// Columns of the policy table.
const (
	colBatch   = 4
	colGoodput = 7
	colVsSE    = 8
)

// TestBatchCell: each batch tenant's work against the reference's, the
// least and the mean beyond compactAbove, "-" without batch tenants; a
// tenant with an SLO is never a batch tenant.
func TestBatchCell(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	runs := func(work ...float64) *policyRuns {
		s := report.Summary{Tenants: []report.TenantSummary{{Tenant: "chat", SLOQuantile: 0.99, Attainment: f(1), WorkRate: 7}}}
		for i, w := range work {
			s.Tenants = append(s.Tenants, report.TenantSummary{Tenant: fmt.Sprintf("b%d", i), WorkRate: w})
		}
		return &policyRuns{sums: []report.Summary{s}}
	}
	for _, tc := range []struct {
		name   string
		p, ref *policyRuns
		want   string
	}{
		{"none", runs(), runs(), "-"},
		{"two", runs(1, 3), runs(4, 3), "b0 0.25x, b1 1.00x"},
		{"idle under the reference", runs(1, 3), runs(0, 3), "b1 1.00x"},
		{"more than compactAbove", runs(1, 2, 3, 4, 0.5), runs(2, 2, 2, 2, 2), "least b4 0.25x; mean 1.05x of 5"},
	} {
		if got := batchCell(tc.p, tc.ref); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnservedLatencyTenant: a tenant with an SLO counts on every seed,
// its attainment 0 on a seed on which no request of its ended (nil in the
// summary), "no requests" where it served on none; a batch tenant is no
// latency tenant.
func TestUnservedLatencyTenant(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	chat := report.TenantSummary{Tenant: "chat", SLOQuantile: 0.9, SLOTarget: 1, Attainment: f(1), SLOMet: b(true)}
	late := report.TenantSummary{Tenant: "late", SLOQuantile: 0.9, SLOTarget: 1, SLOMet: b(false)}
	lateServed := report.TenantSummary{Tenant: "late", SLOQuantile: 0.9, SLOTarget: 1, Attainment: f(0.95), SLOMet: b(true)}
	batch := report.TenantSummary{Tenant: "batch", WorkRate: 3}
	runs := func(seeds ...[]report.TenantSummary) *policyRuns {
		p := &policyRuns{}
		for _, ts := range seeds {
			p.sums = append(p.sums, report.Summary{Tenants: ts})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *policyRuns
		want string
	}{
		{"never served", runs([]report.TenantSummary{chat, late, batch}), "chat 100.0% (1/1), late no requests (0/1)"},
		{"served on one seed of two", runs([]report.TenantSummary{chat, late}, []report.TenantSummary{chat, lateServed}), "chat 100.0% (2/2), late 47.5% (1/2)"},
	} {
		if got := attainmentCell(tc.p); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAttainmentCellRoundsDown: the mean attainment over seeds prints
// rounded down to 0.1%, so that it reads as reaching a p99 quantile only
// where it does; at a quantile finer than 0.1% (p99.95) with its digits.
func TestAttainmentCellRoundsDown(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	q := 0.99
	chat := func(att float64, met bool) []report.TenantSummary {
		return []report.TenantSummary{{Tenant: "chat", SLOQuantile: q, SLOTarget: 1, Attainment: f(att), SLOMet: b(met)}}
	}
	for _, tc := range []struct {
		name string
		p    *policyRuns
		want string
	}{
		{"just short", &policyRuns{sums: []report.Summary{{Tenants: chat(0.989999, false)}}}, "chat 98.9% (0/1)"},
		{"reached", &policyRuns{sums: []report.Summary{{Tenants: chat(0.99, true)}}}, "chat 99.0% (1/1)"},
		{"mean just short", &policyRuns{sums: []report.Summary{{Tenants: chat(0.99, true)}, {Tenants: chat(0.989999, false)}}}, "chat 98.9% (1/2)"},
		{"mean on a tenth", &policyRuns{sums: []report.Summary{{Tenants: chat(0.981, false)}, {Tenants: chat(0.983, false)}}}, "chat 98.2% (0/2)"},
	} {
		if got := attainmentCell(tc.p); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	q = 0.9995
	if got, want := attainmentCell(&policyRuns{sums: []report.Summary{{Tenants: chat(0.99995, true)}}}), "chat 99.99% (1/1)"; got != want {
		t.Errorf("p99.95 reached: %q, want %q", got, want)
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
		s := report.Summary{SLOsHeld: 1, HeldFraction: new(held), EnergyJ: energy, Tenants: []report.TenantSummary{
			{Tenant: "chat", Attainment: f(att), SLOMet: b(met), SLOQuantile: 0.99, SLOTarget: 0.0035, Slack: f(att * 3), WorkRate: chatWork, Goodput: chatGood},
			{Tenant: "train", WorkRate: trainWork, Goodput: trainGood},
		}}
		if met {
			s.SLOsMet = 1
		}
		return s
	}
	sr := scenarioRuns{name: "two", runs: []*policyRuns{
		{policy: baseline.StaticEqualName, sums: []report.Summary{sum(0.97, false, 10, 2, 50, 20, 0.25, 1449999), sum(0.98, false, 10, 2, 40, 20, 0.35, 1449999)},
			rates: []simrun.ChangeRate{{Mean: 0.1, Max: 0.2}, {Mean: 0.2, Max: 0.4}}},
		{policy: baseline.UncappedName, sums: []report.Summary{sum(0.99, true, 10, 5, 100, 50, 0.5, 90000), sum(0.986, false, 10, 5, 100, 50, 0.5, 90000)},
			rates: []simrun.ChangeRate{{}, {}}},
		{policy: oracle.Name, sums: []report.Summary{sum(1, true, 10, 10, 100, 100, 1, 225400), sum(1, true, 10, 10, 100, 80, 1, 225400)},
			rates: []simrun.ChangeRate{{Mean: 0.3, Max: 0.3}, {Mean: 0.3, Max: 0.3}}},
	}}
	rows, err := tableRows(sr)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"| `two` | static-equal | 0/1, 0/1 | chat 97.5% (0/2) | train 0.45x | 1450 kJ | 30% | 0.40 | 1.00x | 0.21x | 0.15 (0.30) |",
		"| `two` | best-effort | 1/1, 0/1 | chat 98.8% (1/2) | train 1.00x | 90 kJ | 50% | 1.00 | 2.50x | 0.53x | 0.00 (0.00) |",
		"| `two` | oracle | 1/1, 1/1 | chat 100.0% (2/2) | train 1.00x | 225 kJ | 100% | 1.90 | 4.75x | 1.00x | 0.30 (0.30) |",
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
		many = append(many, report.TenantSummary{Tenant: fmt.Sprintf("t%d", i), Attainment: f(1 - float64(i%3)/10), SLOMet: b(i%3 == 0), SLOQuantile: 0.9, SLOTarget: 1, WorkRate: 1})
	}
	one := []report.Summary{{SLOsHeld: len(many), HeldFraction: new(0.0), Tenants: many}}
	compact := scenarioRuns{name: "many", runs: []*policyRuns{
		{policy: baseline.StaticEqualName, sums: one, rates: []simrun.ChangeRate{{}}},
		{policy: baseline.UncappedName, sums: one, rates: []simrun.ChangeRate{{}}},
	}}
	rows, err = tableRows(compact)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| `many` | static-equal | 0/5 | worst t2 80.0% (0/1); 2 of 5 met on every seed | - | 0 kJ | 0% | 0.00 | - | 0.00 (0.00) |"; rows[0] != want {
		t.Errorf("row\n%s\nwant\n%s", rows[0], want)
	}
	if got := tableHeader(false); len(cells(got[0])) != len(cells(rows[0])) || len(cells(got[1])) != len(cells(rows[0])) {
		t.Errorf("header %q has not the rows' %d columns", got, len(cells(rows[0])))
	}
}

// Write checks the policies before it runs anything: an unknown one, and
// a policy table without both baselines, are refused naming --policies;
// the slack table alone takes any policies.
func TestWritePolicies(t *testing.T) {
	base := simrun.Config{Duration: 30 * time.Second, Step: time.Second}
	for _, c := range []struct {
		name          string
		policies      []string
		policy, slack bool
		err           string
	}{
		{"unknown", []string{"fast"}, true, false, `--policies: unknown policy "fast"`},
		{"no baselines", []string{"autotune"}, true, false, "--policies: the policy table needs"},
		{"slack alone", []string{"oracle"}, false, true, ""},
		{"twice", []string{"static-equal", "best-effort", "static-equal"}, true, false, "--policies: static-equal twice"},
		{"no table", []string{"static-equal", "best-effort"}, false, false, "--no-policy-table without --slack leaves no table to print"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := Write(context.Background(), &out, Options{Run: base, Policies: c.policies, Seeds: []int64{1}, Scenarios: []string{"h200-mig"}, Policy: c.policy, Slack: c.slack})
			switch {
			case c.err == "" && (err != nil || !strings.Contains(out.String(), "| `h200-mig` |")):
				t.Errorf("err %v, output %q; want the slack table", err, out.String())
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || out.Len() > 0):
				t.Errorf("err %v (output %q), want %q before any run", err, out.String(), c.err)
			}
		})
	}
}

// Write takes a scenario file, as `vgpusim run --scenario FILE` does, with
// its companion tenants file beside it, and names its rows by its path;
// the built-in scenarios named beside it run first. A file whose
// companion disagrees with it is refused before any run.
func TestWriteScenarioFile(t *testing.T) {
	dir, file := mineScenario(t)
	base := simrun.Config{Duration: 30 * time.Second, Step: time.Second}
	var out strings.Builder
	err := Write(context.Background(), &out, Options{Run: base, Policies: []string{oracle.Name}, Seeds: []int64{1}, Scenarios: []string{file, "h200-mig"}, Slack: true})
	if err != nil {
		t.Fatal(err)
	}
	mine, builtin := strings.Index(out.String(), "| `"+filepath.Join(dir, "mine")+"` | chat |"), strings.Index(out.String(), "| `h200-mig` | chat |")
	if mine < 0 || builtin < 0 || builtin > mine {
		t.Errorf("slack table\n%s\nwant the rows of h200-mig, then of %s", out.String(), file)
	}

	// no companion: the oracle runs it, autotune is refused before any run
	if err := os.Remove(filepath.Join(dir, "mine.tenants.yaml")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Write(context.Background(), &out, Options{Run: base, Policies: []string{oracle.Name}, Seeds: []int64{1}, Scenarios: []string{file}, Slack: true}); err != nil || !strings.Contains(out.String(), "| `"+filepath.Join(dir, "mine")+"` | chat |") {
		t.Errorf("oracle with no tenants file: err %v, output %q", err, out.String())
	}
	out.Reset()
	err = Write(context.Background(), &out, Options{Run: base, Policies: []string{oracle.Name, "autotune"}, Seeds: []int64{1}, Scenarios: []string{"h200-mig", file}, Slack: true})
	if err == nil || !strings.Contains(err.Error(), "write "+filepath.Join(dir, "mine.tenants.yaml")) || out.Len() > 0 {
		t.Errorf("autotune with no tenants file: err %v, output %q; want it refused before any run", err, out.String())
	}

	// a companion that leaves out a tenant the scenario judges
	if err := os.WriteFile(filepath.Join(dir, "mine.tenants.yaml"), []byte("tenants: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = Write(context.Background(), &out, Options{Run: base, Policies: []string{oracle.Name}, Seeds: []int64{1}, Scenarios: []string{"h200-mig", file}, Slack: true})
	if err == nil || !strings.Contains(err.Error(), "mine.tenants.yaml") || out.Len() > 0 {
		t.Errorf("err %v, output %q; want the companion refused before any run", err, out.String())
	}
}

// A scenario named twice, as a built-in or as the same file however its
// path is written, is refused before any run: its rows would be the same
// runs twice.
func TestWriteScenarioTwice(t *testing.T) {
	dir, file := mineScenario(t)
	base := simrun.Config{Duration: 30 * time.Second, Step: time.Second}
	for _, c := range []struct {
		name      string
		scenarios []string
	}{
		{"built-in", []string{"h200-mig", "h200-mig.yaml"}},
		{"file", []string{file, filepath.Join(dir, ".", "mine.yaml")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := Write(context.Background(), &out, Options{Run: base, Policies: []string{oracle.Name}, Seeds: []int64{1}, Scenarios: c.scenarios, Slack: true})
			if err == nil || !strings.Contains(err.Error(), "given twice") || out.Len() > 0 {
				t.Errorf("err %v, output %q; want the scenario refused before any run", err, out.String())
			}
		})
	}
}

// mineScenario copies the built-in h200-mig and its tenants file into a
// new directory as mine.yaml and mine.tenants.yaml, and returns the
// directory and mine.yaml's path.
func mineScenario(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"h200-mig.yaml", "h200-mig.tenants.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "scenarios", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strings.Replace(f, "h200-mig", "mine", 1)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "mine.yaml")
}
