package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummaryHeldLine: the summary's line on SLOs held gives the share of
// GPU-minutes only where a tenant has an SLO; a run with no tenant, or
// none with an SLO, says there is none to hold (it read 0.0% with no
// tenant and 100.0% with tenants and no SLO).
func TestSummaryHeldLine(t *testing.T) {
	noSLO := record(windows()).Summary()
	noSLO.SLOsHeld, noSLO.SLOsMet, noSLO.HeldFraction = 0, 0, 1
	for _, tc := range []struct {
		name string
		s    Summary
		want string
	}{
		{"no tenant", Summary{GPUs: []GPUSummary{{UUID: "GPU-0"}}}, "SLOs held: no tenant has an SLO, so none to hold (goodput is all the work done)\n"},
		{"no SLO", noSLO, "SLOs held: no tenant has an SLO, so none to hold (goodput is all the work done)\n"},
		{"an SLO", Summary{SLOsHeld: 1, HeldFraction: 0.25}, "SLOs held in 25.0% of the GPU-minutes (goodput counts work only there)\n"},
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
