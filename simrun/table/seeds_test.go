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
	if want := "late    50.0 ± 70.7   1 of 2"; !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
}

// The seeds' line on SLOs says there is none where no run has a tenant
// with an SLO: it read "SLOs met: 0 ± 0; SLOs held in 0 ± 0 %".
func TestSeedStatsNoSLO(t *testing.T) {
	for _, tc := range []struct {
		name string
		sums []report.Summary
		want string
	}{
		{"none", []report.Summary{{}, {}}, "\nSLOs: no tenant has one, none to meet or hold; energy: 0 ± 0 kJ\n"},
		{"one", []report.Summary{{SLOsHeld: 1, SLOsMet: 1, HeldFraction: new(1.0)}, {SLOsHeld: 1, HeldFraction: new(0.5)}}, "\nSLOs met: 0.5 ± 0.707; SLOs held in 75 ± 35.4 % of the GPU-minutes; energy: 0 ± 0 kJ\n"},
	} {
		var b strings.Builder
		if err := WriteSeedStats(&b, "autotune", tc.sums, []simrun.ChangeRate{{}, {}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: no %q in:\n%s", tc.name, tc.want, b.String())
		}
	}
}

// A mean attainment short of its quantile never prints as reaching it:
// 98.96 (98.92 and 99.0) read "99" at 3 significant digits.
func TestSeedStatsAttainmentRoundsDown(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{0.9892, 0.99, "chat    98.9 ± "},
		{0.99, 0.99, "chat    99.0 ± 0 "},
		{0.999, 1, "chat    99.9 ± "},
		{1, 1, "chat    100.0 ± 0 "},
	} {
		sums := []report.Summary{
			{Tenants: []report.TenantSummary{{Tenant: "chat", SLOQuantile: 0.99, SLOTarget: 1, Attainment: f(tc.a)}}},
			{Tenants: []report.TenantSummary{{Tenant: "chat", SLOQuantile: 0.99, SLOTarget: 1, Attainment: f(tc.b)}}},
		}
		sums[0].Meta.Scenario = "one"
		var b strings.Builder
		if err := WriteSeedStats(&b, "autotune", sums, []simrun.ChangeRate{{}, {}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%v, %v: no %q in:\n%s", tc.a, tc.b, tc.want, b.String())
		}
	}
}
