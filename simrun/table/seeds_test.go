package table

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// The seeds' energy is in kJ, as the tables and a run's summary give it.
func TestSeedStatsEnergyInKJ(t *testing.T) {
	sums := []report.Summary{{EnergyJ: 200_000}, {EnergyJ: 220_000}}
	sums[0].Meta.Scenario = "two"
	var b strings.Builder
	if err := WriteSeedStats(&b, "autotune", sums, []simrun.ChangeRate{{}, {}}); err != nil {
		t.Fatal(err)
	}
	if want := "energy: 210 ± 14.1 kJ\n"; !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
}

// A tenant with an SLO that never served on a seed counts 0 in its mean
// attainment there, and its SLO as missed.
func TestSeedStatsUnservedTenant(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	met, missed := true, false
	sums := []report.Summary{
		{Tenants: []report.TenantSummary{{Tenant: "late", SLOQuantile: 0.9, SLOTarget: 1, Attainment: f(1), SLOMet: &met}}},
		{Tenants: []report.TenantSummary{{Tenant: "late", SLOQuantile: 0.9, SLOTarget: 1, SLOMet: &missed}}},
	}
	sums[0].Meta.Scenario = "two"
	var b strings.Builder
	if err := WriteSeedStats(&b, "autotune", sums, []simrun.ChangeRate{{}, {}}); err != nil {
		t.Fatal(err)
	}
	if want := "late    50 ± 70.7     1 of 2"; !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
}
