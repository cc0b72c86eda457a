package simrun

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// untold returns an error when pol tunes to the tenants' SLOs (a tuner
// policy that is not one of fixed settings: autotune) and the scenario
// arg names, run with no tenants file, judges an SLO: the tuner knows no
// tenant, is given no SLO, and a report would score it against the
// scenario's all the same. The policies of fixed settings and the
// planners (the oracle, which reads the scenario's SLOs itself) need no
// tenants file.
func untold(arg string, sc *sim.Scenario, pol tuner.Policy) error {
	if tp, ok := pol.(*tuner.TunerPolicy); !ok || tp.Fixed() {
		return nil
	}
	var judged []string
	for _, t := range sc.Tenants {
		if t.SLO != nil {
			judged = append(judged, t.Name)
		}
	}
	if len(judged) == 0 {
		return nil
	}
	companion := strings.TrimSuffix(arg, filepath.Ext(arg)) + scenarios.TenantsSuffix
	return fmt.Errorf("scenario %s judges the SLOs of %s and has no tenants file: the %s policy, given only the SLOs a tenants file states, would be scored against objectives it was never given; write %s (docs/tenants.md) defining each of those tenants with the SLO the scenario judges, or give one with --tenants (the policies of fixed settings and the oracle need none)",
		sc.Name, strings.Join(judged, ", "), pol.Name(), companion)
}
