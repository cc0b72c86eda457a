package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSummaryHeldLine: the summary's line on SLOs held gives the share of
// GPU-minutes only where a tenant has an SLO; a run with no tenant, or
// none with an SLO, says there is none to hold (it read 0.0% with no
// tenant and 100.0% with tenants and no SLO).
func TestSummaryHeldLine(t *testing.T) {
	noSLO := record(windows()).Summary()
	noSLO.SLOsHeld, noSLO.SLOsMet, noSLO.HeldFraction = 0, 0, new(1.0)
	for _, tc := range []struct {
		name string
		s    Summary
		want string
	}{
		{"no tenant", Summary{GPUs: []GPUSummary{{UUID: "GPU-0"}}}, "SLOs held: no tenant has an SLO, so none to hold (goodput is all the work done)\n"},
		{"no SLO", noSLO, "SLOs held: no tenant has an SLO, so none to hold (goodput is all the work done)\n"},
		{"an SLO", Summary{SLOsHeld: 1, HeldFraction: new(0.25)}, "SLOs held in 25.0% of the GPU-minutes (goodput counts work only there)\n"},
	} {
		var b bytes.Buffer
		if err := WriteSummaryText(&b, tc.s); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) || strings.Count(b.String(), "SLOs held") != 1 {
			t.Errorf("%s: want %q once in:\n%s", tc.name, tc.want, b.String())
		}
	}
}

// TestHeldFractionNullWithNoTenant: the JSON summary's held_fraction is
// null for a run in which no GPU-minute had a tenant (a scenario of GPUs
// alone): there was nothing to hold, not a run that never held. A run
// with tenants keeps its share, 1 with no SLO. (It wrote 0, which reads
// as every GPU-minute missed.)
func TestHeldFractionNullWithNoTenant(t *testing.T) {
	gpuOnly := func() []WindowStats {
		var ws []WindowStats
		for _, w := range windows() {
			w.Tenants = nil
			ws = append(ws, w)
		}
		return ws
	}
	for _, tc := range []struct {
		name string
		ws   []WindowStats
		want string
	}{
		{"no tenant", gpuOnly(), `"held_fraction":null`},
		{"tenants, no SLO", noSLOWindows(), `"held_fraction":1`},
	} {
		b, err := json.Marshal(record(tc.ws).Summary())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: summary %s, want %s", tc.name, b, tc.want)
		}
	}
}

// noSLOWindows are windows()'s, no tenant with an SLO.
func noSLOWindows() []WindowStats {
	var ws []WindowStats
	for _, w := range windows() {
		w.Tenants = slices.Clone(w.Tenants)
		for i := range w.Tenants {
			w.Tenants[i].SLOQuantile, w.Tenants[i].SLOTarget = 0, 0
		}
		ws = append(ws, w)
	}
	return ws
}
