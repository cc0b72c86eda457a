package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// raceEnabled is set when the tests run with -race.
var raceEnabled = false

// tenantsOf is one run's tenant summaries by tenant name.
type tenantsOf = table.Tenants

// fullRuns are the summaries of the full-length runs made so far, by
// scenario (a path or a built-in name) and policy: the effect checks share
// them.
var fullRuns = map[string]report.Summary{}

// fullSummary runs scenario under policy for its full duration at a 1 s
// step (once per test binary) and returns its summary.
func fullSummary(t *testing.T, scenario, policy string) report.Summary {
	t.Helper()
	key := scenario + "/" + policy
	if s, ok := fullRuns[key]; ok {
		return s
	}
	res, err := simrun.Run(context.Background(), simrun.Config{
		Scenario: scenario, Policy: policy, Step: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Recorder.Summary()
	fullRuns[key] = s
	return s
}

// fullRun is fullSummary's tenant summaries by tenant name.
func fullRun(t *testing.T, scenario, policy string) tenantsOf {
	t.Helper()
	r := tenantsOf{}
	for _, ts := range fullSummary(t, scenario, policy).Tenants {
		r[ts.Tenant] = ts
	}
	return r
}

// TestScenarioEffects runs the library scenarios for their full duration and
// checks the effects scenarios/README.md describes, so that a change of
// the simulator's model that changes them is noticed (and the README
// updated): what the two baselines give and, for each mechanism a scenario
// exercises, that the oracle finds a setting that meets an SLO
// static-equal misses. The oracle's search runs here on the scenarios where
// it takes seconds; where it takes minutes, the check runs a copy of the
// scenario with the setting the oracle finds (README) written in.
func TestScenarioEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("full-length scenario runs")
	}
	get := func(t *testing.T, scenario, policy string) tenantsOf {
		if !strings.HasSuffix(scenario, ".yaml") {
			scenario = "../../scenarios/" + scenario + ".yaml"
		}
		return fullRun(t, scenario, policy)
	}
	met := func(ts report.TenantSummary) bool { return ts.SLOMet != nil && *ts.SLOMet }
	missed := func(ts report.TenantSummary) bool { return ts.SLOMet != nil && !*ts.SLOMet }
	allMet := func(r tenantsOf) bool {
		for _, ts := range r {
			if missed(ts) {
				return false
			}
		}
		return true
	}
	// hotMoved is eight-gpu-hot with g0-train on GPU 7, the placement the
	// oracle finds.
	hotMoved := func(t *testing.T) string {
		b, err := os.ReadFile("../../scenarios/eight-gpu-hot.yaml")
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		i := strings.Index(src, "  - name: g0-train\n    gpu: 0\n")
		if i < 0 {
			t.Fatal("eight-gpu-hot.yaml has no g0-train on GPU 0; update this test")
		}
		src = src[:i] + strings.Replace(src[i:], "gpu: 0", "gpu: 7", 1)
		path := filepath.Join(t.TempDir(), "eight-gpu-hot-moved.yaml")
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	type policies func(policy string) tenantsOf
	tests := []struct {
		name     string
		scenario string
		slow     bool // skipped under -race
		check    func(t *testing.T, run policies) bool
	}{
		{"chat misses under both baselines", "noisy-neighbour", false, func(_ *testing.T, run policies) bool {
			return missed(run("best-effort")["chat"]) && missed(run("static-equal")["chat"])
		}},
		{"MPS caps: the assistant misses under both baselines, the oracle's training cap meets it", "bursty-llm-training", true, func(_ *testing.T, run policies) bool {
			be, se, or := run("best-effort"), run("static-equal"), run(oracle.Name)
			return missed(be["assistant"]) && missed(se["assistant"]) && se["pretrain"].WorkRate < 0.9*be["pretrain"].WorkRate &&
				met(or["assistant"]) && or["pretrain"].WorkRate > 0
		}},
		{"MPS caps: static-equal's half share misses both, best-effort's full share meets both", "replay/diurnal-shift", true, func(_ *testing.T, run policies) bool {
			be, se := run("best-effort"), run("static-equal")
			for _, n := range []string{"chat-east", "chat-west"} {
				if !met(be[n]) || !missed(se[n]) {
					return false
				}
			}
			return true
		}},
		{"clock locks: locked clocks meet, DVFS misses, the oracle locks GPU 1", "clock-stability", false, func(_ *testing.T, run policies) bool {
			be, or := run("best-effort"), run(oracle.Name)
			return met(be["vision-locked"]) && missed(be["vision-dvfs"]) && *be["vision-dvfs"].P50 > 1.1**be["vision-locked"].P50 &&
				met(or["vision-dvfs"]) && met(or["vision-locked"])
		}},
		{"g0-chat misses under both baselines, meets once g0-train is moved to GPU 7, which has the memory", "eight-gpu-hot", true, func(t *testing.T, run policies) bool {
			be, se := run("best-effort"), run("static-equal")
			moved := get(t, hotMoved(t), "best-effort")
			return missed(be["g0-chat"]) && missed(se["g0-chat"]) && allMet(moved)
		}},
		{"placement: chat misses under both baselines, the oracle moves the trainer and meets every SLO", "placement-spare", true, func(_ *testing.T, run policies) bool {
			be, se, or := run("best-effort"), run("static-equal"), run(oracle.Name)
			return missed(be["chat"]) && missed(se["chat"]) && allMet(or) && or["train"].GPU != be["train"].GPU && or["train"].WorkRate > be["train"].WorkRate
		}},
		{"every SLO holds under the default time slice", "h100-timeslice", false, func(_ *testing.T, run policies) bool {
			return allMet(run("best-effort")) && allMet(run("static-equal"))
		}},
		{"time slice: the default level misses the vision SLO, the oracle's longer level meets it", "timeslice-levels", false, func(_ *testing.T, run policies) bool {
			be, se, or := run("best-effort"), run("static-equal"), run(oracle.Name)
			return missed(be["vision"]) && missed(se["vision"]) && met(or["vision"]) && or["train"].WorkRate >= 0.9*se["train"].WorkRate
		}},
		{"MIG relayout: vision-b misses once the loads swap, the oracle's relayout meets both", "mig-relayout", true, func(_ *testing.T, run policies) bool {
			se, or := run("static-equal"), run(oracle.Name)
			return met(se["vision-a"]) && missed(se["vision-b"]) && allMet(or)
		}},
		{"vGPU scheduler: best-effort misses chat, the oracle's fixed share meets it", "vgpu-scheduler", false, func(_ *testing.T, run policies) bool {
			se, or := run("static-equal"), run(oracle.Name)
			return missed(se["chat"]) && met(or["chat"])
		}},
		{"MIG isolation: both SLOs hold through the load step", "h200-mig", false, func(_ *testing.T, run policies) bool {
			return allMet(run("static-equal"))
		}},
		{"chat misses, recsys holds; the scheduler change is refused while VMs run", "vgpu-contention", false, func(_ *testing.T, run policies) bool {
			be, se := run("best-effort"), run("static-equal")
			return missed(be["chat"]) && missed(se["chat"]) && met(be["recsys"]) && met(se["recsys"]) &&
				*se["chat"].Attainment == *be["chat"].Attainment && se["train"].WorkRate == be["train"].WorkRate
		}},
	}
	for _, tc := range tests {
		t.Run(tc.scenario+"/"+tc.name, func(t *testing.T) {
			if raceEnabled && tc.slow {
				// Model behaviour, not concurrency: the longest runs are
				// left to runs without -race.
				t.Skip("too slow under -race")
			}
			seen := map[string]tenantsOf{}
			run := func(policy string) tenantsOf {
				seen[policy] = get(t, tc.scenario, policy)
				return seen[policy]
			}
			if !tc.check(t, run) {
				t.Errorf("effect no longer holds; update scenarios/README.md\n%+v", seen)
			}
		})
	}
}

// TestAutotuneEnergyWithSlack: on energy-slack, where every SLO has
// slack and no batch work runs, autotune with clock and power control
// gives up no SLO and uses no more energy than the same run without them
// (docs/tuning.md reports the figures: with the SLOs the report judges,
// it saves none there).
func TestAutotuneEnergyWithSlack(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("full-length scenario runs")
	}
	run := func(disabled ...string) report.Summary {
		res, err := simrun.Run(context.Background(), simrun.Config{
			Scenario: "../../scenarios/energy-slack.yaml", Policy: "autotune", Step: time.Second,
			DisabledKnobs: disabled,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Recorder.Summary()
	}
	with, without := run(), run("locked_clocks", "power_limit")
	if with.SLOsMet != with.SLOsHeld || without.SLOsMet != without.SLOsHeld {
		t.Fatalf("SLOs met: %d of %d with clock control, %d of %d without", with.SLOsMet, with.SLOsHeld, without.SLOsMet, without.SLOsHeld)
	}
	if with.EnergyJ > 1.01*without.EnergyJ {
		t.Errorf("energy %.0f J with clock control, %.0f J without: clock control costs energy", with.EnergyJ, without.EnergyJ)
	}
	t.Logf("energy %.0f J with clock control, %.0f J without (%.0f%% less)", with.EnergyJ, without.EnergyJ, 100*(1-with.EnergyJ/without.EnergyJ))
}

// maxSlack is the most an SLO target may be above what its tenant gets at
// its best in its busy stretch (scenarios/README.md): beyond it the
// SLO does not bind and no policy can be told from another by it.
const maxSlack = 3.0

// TestSLOSlack: in every built-in scenario, each SLO's slack (its target
// over the tenant's latency at the SLO quantile in its busy stretch,
// report.TenantSummary.Slack) is at most maxSlack under the best of
// static-equal, best-effort and the oracle for that tenant.
func TestSLOSlack(t *testing.T) {
	eachBuiltin(t, func(t *testing.T, path string) {
		best, from := table.BestSlack(func(p string) (tenantsOf, bool) { return fullRun(t, path, p), true })
		slos := 0
		for name, ts := range fullRun(t, path, baseline.StaticEqualName) {
			if ts.SLOTarget <= 0 {
				continue
			}
			slos++
			if _, ok := from[name]; !ok {
				t.Errorf("%s: no request ended in its busy stretch under any policy", name)
			}
		}
		if slos == 0 {
			t.Fatal("no tenant with an SLO")
		}
		for _, name := range slices.Sorted(maps.Keys(best)) {
			v := best[name]
			t.Logf("%s: slack %.2fx (%s)", name, v, from[name])
			if v > maxSlack {
				t.Errorf("%s: SLO target %.2fx its best busy-stretch latency (under %s), over %.0fx: tighten it", name, v, from[name], maxSlack)
			}
		}
	})
}

// eachBuiltin runs f as a subtest for every built-in scenario, with the
// path TestScenarioEffects runs it by (so that fullRun shares the runs),
// unless full-length runs are skipped.
func eachBuiltin(t *testing.T, f func(t *testing.T, path string)) {
	if testing.Short() || raceEnabled {
		t.Skip("full-length scenario runs")
	}
	bs, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) { f(t, "../../scenarios/"+b.Path) })
	}
}

// TestOracleAtLeastBaselines: the oracle is the yardstick the scenario
// tables measure against, the best of the policies that keep the share
// bounds of the scenario's tenants file, so on every built-in scenario
// (seed 1) its goodput, as the tables count it (each tenant's goodput
// over its work rate under best-effort, summed), is at least that of
// either baseline whose settings keep those bounds (keepsBounds). A
// baseline that does not (best-effort leaving uncapped a tenant whose
// share.max is below 1) is what a host gets without the tuner, which
// nothing bounds: the oracle is not its upper bound.
func TestOracleAtLeastBaselines(t *testing.T) {
	eachBuiltin(t, func(t *testing.T, path string) {
		// (the scenario tables' goodput column, on one seed)
		be := []report.Summary{fullSummary(t, path, baseline.UncappedName)}
		checkOracleAtLeastBaselines(t, path, func(policy string) float64 {
			return table.Goodput([]report.Summary{fullSummary(t, path, policy)}, be)
		})
	})
}

// checkOracleAtLeastBaselines checks that the oracle's goodput on the
// scenario at path is at least 99% of each baseline's that keeps the
// tenants file's bounds, and that one baseline at least is compared.
func checkOracleAtLeastBaselines(t *testing.T, path string, goodput func(policy string) float64) {
	t.Helper()
	or := goodput(oracle.Name)
	compared := 0
	for _, p := range []string{baseline.StaticEqualName, baseline.UncappedName} {
		if ok, why := keepsBounds(t, path, p); !ok {
			t.Logf("%s not compared: %s", p, why)
			continue
		}
		compared++
		g := goodput(p)
		t.Logf("%s %.3f, oracle %.3f", p, g, or)
		if or < 0.99*g {
			t.Errorf("oracle goodput %.3f below %s's %.3f, whose settings keep the share bounds", or, p, g)
		}
	}
	if compared == 0 {
		t.Error("neither baseline keeps the share bounds: nothing to compare the oracle with")
	}
}
