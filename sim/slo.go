package sim

import (
	"fmt"
	"strings"
	"time"
)

// CheckSLOs returns an error when a tenant of the scenario is held to
// another SLO by the tenants file the tuner is given (tenantsFile) than
// the one the scenario judges it by: the tuner would then be scored
// against an objective it was never told. given returns the tenants
// file's SLO of a tenant, as tenant.Config.GivenSLO does: found says the
// file defines the tenant (one it lacks is not checked: its processes
// are unassigned to the tuner), q is 0 when the file gives it no SLO,
// metric is "" for end-to-end latency, line is where the file states it.
// The error names both files, lines and values of every disagreement.
func (sc *Scenario) CheckSLOs(tenantsFile string, given func(tenant string) (q float64, target time.Duration, metric string, line int, found bool)) error {
	var diffs []string
	for _, t := range sc.Tenants {
		q, target, metric, line, found := given(t.Name)
		if !found {
			continue
		}
		var judged SLOSpec
		if t.SLO != nil {
			judged = *t.SLO
		}
		if judged.Quantile == q && time.Duration(judged.Target) == target && judged.metric() == sloMetric(metric) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("tenant %s: %s judges %s, but %s gives the tuner %s",
			t.Name, FileLine(sc.File, judged.Line), describeSLO(judged.Quantile, time.Duration(judged.Target), judged.metric()),
			FileLine(tenantsFile, line), describeSLO(q, target, sloMetric(metric))))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("scenario %s and its tenants file disagree on SLOs; the tenants file must state the SLO the scenario judges:\n  %s",
		sc.Name, strings.Join(diffs, "\n  "))
}

// CheckJudgedDefined returns an error when the scenario judges an SLO of
// a tenant the tenants file (tenantsFile; defined says whether it defines
// a tenant) leaves out: that tenant's processes are unassigned, the
// tuner is given no SLO of it, and a report would score the tuner
// against it all the same. vgpusim's runs need it; the exporter on the
// simulator, which judges nothing, does not.
func (sc *Scenario) CheckJudgedDefined(tenantsFile string, defined func(tenant string) bool) error {
	var missing []string
	for _, t := range sc.Tenants {
		if t.SLO != nil && !defined(t.Name) {
			missing = append(missing, fmt.Sprintf("tenant %s: %s judges %s, but %s defines no tenant %s (its processes are unassigned: the tuner is given no SLO of it)",
				t.Name, FileLine(sc.File, t.SLO.Line), describeSLO(t.SLO.Quantile, time.Duration(t.SLO.Target), t.SLO.metric()), tenantsFile, t.Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("scenario %s judges tenants its tenants file leaves out; the tenants file must define every tenant the scenario judges an SLO of:\n  %s",
		sc.Name, strings.Join(missing, "\n  "))
}

// The metrics an SLO may bound (SLOSpec.Metric).
const (
	SLOMetricE2E  = "e2e"  // a request's end-to-end latency
	SLOMetricTTFT = "ttft" // an LLM request's time to its first token
	// SLOMetricITL bounds an LLM's inter-token latency, judged per token
	// as vLLM's vllm:inter_token_latency_seconds histogram observes it:
	// every token after a request's first is one observation, the time
	// since the request's previous token.
	SLOMetricITL = "itl"
)

// metric is what the SLO bounds.
func (s SLOSpec) metric() string { return sloMetric(s.Metric) }

// sloMetric names an SLO's metric, "" being end-to-end request latency.
func sloMetric(m string) string {
	if m == "" {
		return SLOMetricE2E
	}
	return m
}

// describeSLO says an SLO in words ("no SLO" when q is 0).
func describeSLO(q float64, target time.Duration, metric string) string {
	if q == 0 {
		return "no SLO"
	}
	return fmt.Sprintf("%s quantile %v <= %v", metric, q, target)
}

// FileLine is "file:line", or file alone when the line is not known.
func FileLine(file string, line int) string {
	if file == "" {
		file = "(unnamed)"
	}
	if line <= 0 {
		return file
	}
	return fmt.Sprintf("%s:%d", file, line)
}
