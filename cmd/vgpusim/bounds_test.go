package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// keepsBounds says whether baseline policy p's MPS settings keep, on the
// scenario at path, the share bounds its tenants file gives, as the
// tuner's Bounds guard counts a tenant's share (a client's fraction times
// the tenant's clients on the GPU; a MIG instance's client's alone); when
// not, why. Each MPS GPU (or MIG instance) is read from the scenario:
// best-effort gives every client 1, static-equal each tenant 1/n of the
// GPU (split over its clients), where n runs between the tenants that
// never stop and all that run there (a process no tenant claims counts
// as a tenant of its own, as the baselines count it).
func keepsBounds(t *testing.T, path, p string) (bool, string) {
	t.Helper()
	sc, cfg, err := simrun.LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		return true, ""
	}
	by, err := simrun.Attribution(sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{} // tenants of the scenario that start or stop
	for _, e := range sc.Events {
		if e.Action == "start" || e.Action == "stop" {
			starts[e.Tenant] = true
		}
	}
	type dev struct{ gpu, inst int }
	type clients struct{ all, always int }
	on := map[dev]map[string]*clients{}
	for _, ts := range sc.Tenants {
		name, ok := by[ts.Process.PID]
		if !ok || !mpsOn(sc.GPUs[ts.GPU], ts.MIGInstance) {
			continue // never runs, or not an MPS client
		}
		if name == tenant.Unassigned {
			name = "pid " + strconv.FormatUint(uint64(ts.Process.PID), 10)
		}
		d := dev{ts.GPU, -1}
		if len(sc.GPUs[ts.GPU].MIG) > 0 {
			d.inst = ts.MIGInstance
		}
		if on[d] == nil {
			on[d] = map[string]*clients{}
		}
		c := on[d][name]
		if c == nil {
			c = &clients{}
			on[d][name] = c
		}
		c.all++
		if !ts.Stopped && !starts[ts.Name] {
			c.always++
		}
	}
	for d, tenants := range on {
		nAll, nAlways := len(tenants), 0
		for _, c := range tenants {
			if c.always > 0 {
				nAlways++
			}
		}
		for name, c := range tenants {
			tn := cfg.TenantByName(name)
			if tn == nil || tn.Share == nil {
				continue
			}
			lo, hi := tn.Share.Min, tn.Share.Max
			if hi == 0 {
				hi = 1
			}
			kAll, kAlways := float64(c.all), float64(max(c.always, 1))
			var least, most float64 // the share p gives the tenant there
			switch {
			case p == baseline.UncappedName && d.inst < 0:
				least, most = kAlways, kAll
			case p == baseline.UncappedName:
				least, most = 1, 1
			case d.inst < 0:
				least, most = 1/float64(nAll), 1/float64(max(nAlways, 1))
			default:
				least, most = 1/float64(nAll)/kAll, 1/float64(max(nAlways, 1))/kAlways
			}
			if least < lo-1e-9 || most > hi+1e-9 {
				return false, fmt.Sprintf("%s gives tenant %s on GPU %d a share of %.3g to %.3g, outside share.min %.3g / share.max %.3g",
					p, name, d.gpu, least, most, lo, hi)
			}
		}
	}
	return true, ""
}

// mpsOn says whether MIG instance inst of g (g itself where it has no
// MIG instances) is shared through MPS.
func mpsOn(g sim.GPUSpec, inst int) bool {
	if len(g.MIG) > 0 {
		return inst >= 0 && inst < len(g.MIG) && g.MIG[inst].Sharing == "mps"
	}
	return g.Sharing == "mps"
}

// TestOracleBoundedBelowUnboundedBaseline: on one MPS GPU shared by a
// light latency tenant and a training job whose share.max is 0.5, the
// oracle keeps the job within 0.5, so best-effort, which leaves it
// uncapped, does more work than the oracle: best-effort is not compared
// with it (keepsBounds), static-equal (0.5 each) is, and is not above
// it; the oracle's caps are within the bounds.
func TestOracleBoundedBelowUnboundedBaseline(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("the oracle's search over two virtual minutes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ob.yaml")
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ob.yaml", `name: ob
duration: 2m
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, process: {pid: 11, executable: a}, memory: 8GiB, slo: {quantile: 0.9, target: 1s}, workload: {type: dnn, flops: 1e10, max_batch: 8, arrival: {process: poisson, rate: 5}}}
  - {name: t, process: {pid: 13, executable: t}, memory: 8GiB, workload: {type: training, flops: 2e13}}
`)
	write("ob.tenants.yaml", `tenants:
  - name: a
    class: latency
    selectors: [{executable: a}]
    slo: {quantile: 0.9, target: 1s}
    latency_source: {url: "sim://a", preset: vllm-e2e}
  - name: t
    class: batch
    selectors: [{executable: t}]
    share: {max: 0.5}
`)
	if ok, _ := keepsBounds(t, path, baseline.UncappedName); ok {
		t.Error("best-effort, which leaves t uncapped, read as keeping t's share.max 0.5")
	}
	if ok, why := keepsBounds(t, path, baseline.StaticEqualName); !ok {
		t.Errorf("static-equal read as leaving the bounds: %s", why)
	}
	be := []report.Summary{fullSummary(t, path, baseline.UncappedName)}
	goodput := func(policy string) float64 {
		return table.Goodput([]report.Summary{fullSummary(t, path, policy)}, be)
	}
	checkOracleAtLeastBaselines(t, path, goodput)
	or := goodput(oracle.Name)
	if g := goodput(baseline.UncappedName); g <= or {
		t.Errorf("best-effort goodput %.3f not above the oracle's %.3f: the scenario no longer shows an unbounded baseline above the oracle", g, or)
	}
	res, err := simrun.Run(t.Context(), simrun.Config{Scenario: path, Policy: oracle.Name, Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	capped := false
	for _, d := range res.Decisions {
		if d.Tenant != "t" || !d.Applied {
			continue
		}
		capped = true
		if f, err := strconv.ParseFloat(strings.TrimSuffix(d.To, "%"), 64); err != nil || f > 50+1e-6 {
			t.Errorf("the oracle sets t to %q, above its share.max 0.5 (%v)", d.To, err)
		}
	}
	if !capped {
		t.Error("the oracle never caps t, which runs uncapped above its share.max 0.5")
	}
}
