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
