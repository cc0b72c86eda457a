package tenant_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestMetersConserveOnScenarios runs every built-in scenario (its whole
// duration; its first minute under the race detector), tenants coming and
// going as the scenario has them, under both idle-energy rules, and checks
// at every sample that each GPU's tenants' energy and idle energy add up to
// the increase of its energy counter, and over the run that the tenants'
// GPU-seconds of use add up to the GPU's SM-active seconds on whole GPUs
// and their reserved GPU-seconds to at most the time metered.
func TestMetersConserveOnScenarios(t *testing.T) {
	list, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no built-in scenarios")
	}
	for _, bi := range list {
		for _, rule := range []tenant.IdleEnergy{tenant.IdleToIdle, tenant.IdleByReservation} {
			t.Run(bi.Name+"/"+string(rule), func(t *testing.T) { checkScenarioMeters(t, bi, rule) })
		}
	}
}

func checkScenarioMeters(t *testing.T, bi scenarios.Builtin, rule tenant.IdleEnergy) {
	sc, cfg := loadBuiltin(t, bi)
	if cfg == nil {
		cfg = tenant.EmptyConfig()
	}
	cfg.Defaults.IdleEnergy = rule
	h := simtest.Start(t, sc, cfg)
	ctx := context.Background()
	run := sc.Duration
	if raceEnabled {
		run = min(run, raceRun)
	}
	firstEnergy := map[string]float64{}
	smSeconds := map[string]float64{} // whole GPUs: the GPU's SM-active seconds
	wholeGPU := map[string]bool{}
	var metered time.Duration
	var snap *tenant.Snapshot
	for step := 1; step <= int(run/truthSample); step++ {
		r := h.Sample(ctx, truthSample)
		h.Clock.Set(h.Sim.Now())
		snap = h.Builder.Build(r, gpu.SamplerStats{})
		for _, d := range r.Devices {
			if !d.Up || d.EnergyJoules == nil {
				continue
			}
			if _, ok := firstEnergy[d.UUID]; !ok {
				firstEnergy[d.UUID] = *d.EnergyJoules
			}
			wholeGPU[d.UUID] = !d.MIGEnabled
			if d.Activity.SMActive != nil && r.Interval > 0 {
				smSeconds[d.UUID] += *d.Activity.SMActive * r.Interval.Seconds()
			}
		}
		metered += r.Interval
		tenantsEnergy := map[string]float64{}
		for _, m := range snap.Meters {
			tenantsEnergy[m.UUID] += m.EnergyJoules
		}
		for _, g := range snap.GPUMeters {
			if got := tenantsEnergy[g.UUID] + g.IdleEnergyJoules; math.Abs(got-g.EnergyJoules) > 1e-6*max(1, g.EnergyJoules) {
				t.Fatalf("step %d GPU %d: tenants %.6f J + idle %.6f J != %.6f J counted", step, g.GPU, tenantsEnergy[g.UUID], g.IdleEnergyJoules, g.EnergyJoules)
			}
		}
	}
	if snap == nil || len(snap.GPUMeters) == 0 {
		t.Fatal("nothing metered")
	}
	last := map[string]float64{}
	for _, d := range snap.Readings.Devices {
		if d.EnergyJoules != nil {
			last[d.UUID] = *d.EnergyJoules
		}
	}
	used, reserved := map[string]float64{}, map[string]float64{}
	for _, m := range snap.Meters {
		used[m.UUID] += m.GPUSecondsUsed
		reserved[m.UUID] += m.GPUSecondsReserved
	}
	for _, g := range snap.GPUMeters {
		// the device's energy over the whole run, against the meters'
		dev := last[g.UUID] - firstEnergy[g.UUID]
		if dev <= 0 || math.Abs(g.EnergyJoules-dev) > 0.01*dev {
			t.Errorf("GPU %d: meters divided %.1f J, the GPU counted %.1f J over the run", g.GPU, g.EnergyJoules, dev)
		}
		if wholeGPU[g.UUID] && math.Abs(used[g.UUID]-smSeconds[g.UUID]) > 0.01*max(smSeconds[g.UUID], 1) {
			t.Errorf("GPU %d: tenants' GPU-seconds of use %.2f, the GPU's SM-active seconds %.2f", g.GPU, used[g.UUID], smSeconds[g.UUID])
		}
		if reserved[g.UUID] > metered.Seconds()*1.0001 {
			t.Errorf("GPU %d: %.2f reserved GPU-seconds in %.2f s", g.GPU, reserved[g.UUID], metered.Seconds())
		}
	}
}

// loadBuiltin loads a built-in scenario and its tenants file (nil when it
// has none).
func loadBuiltin(t *testing.T, bi scenarios.Builtin) (*sim.Scenario, *tenant.Config) {
	t.Helper()
	cp, err := bi.Materialize()
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Remove()
	sc, err := sim.LoadScenario(cp.Scenario)
	if err != nil {
		t.Fatal(cp.Explain(err))
	}
	var cfg *tenant.Config
	if p := strings.TrimSuffix(cp.Scenario, ".yaml") + scenarios.TenantsSuffix; fileExists(p) {
		if cfg, err = tenant.LoadConfig(p); err != nil {
			t.Fatal(cp.Explain(err))
		}
	}
	return sc, cfg
}
