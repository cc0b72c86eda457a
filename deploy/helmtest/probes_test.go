package helmtest

import (
	"reflect"
	"testing"
	"time"
)

// TestStartupProbe: the exporter's port opens only once its backend has
// started and the tuner's actuators have answered (their detection is
// bounded at a minute): a startup probe with the liveness probe's handler
// holds the liveness probe off for longer than that, so that a slow start
// (NVML without persistence mode, an MPS daemon or nvidia-smi answering at
// their timeouts) is not killed at the liveness probe's 30 s.
func TestStartupProbe(t *testing.T) {
	c := loadChart(t)
	for _, vals := range []map[string]any{
		nil,
		{"web": map[string]any{"config": map[string]any{"existingSecret": "web-config"}}},
	} {
		m := mustRender(t, c, vals)
		for _, ds := range m.daemonSets {
			ct := ds.Spec.Template.Spec.Containers[0]
			sp, lp := ct.StartupProbe, ct.LivenessProbe
			if sp == nil || lp == nil {
				t.Fatalf("values %v: startup probe %v, liveness probe %v", vals, sp, lp)
			}
			if !reflect.DeepEqual(sp.ProbeHandler, lp.ProbeHandler) {
				t.Errorf("values %v: the startup probe asks %+v, the liveness probe %+v", vals, sp.ProbeHandler, lp.ProbeHandler)
			}
			budget := time.Duration(sp.InitialDelaySeconds+sp.PeriodSeconds*sp.FailureThreshold) * time.Second
			if budget < 2*time.Minute {
				t.Errorf("values %v: the startup probe gives up after %v, within the actuators' detection (a minute) and a slow backend start", vals, budget)
			}
		}
	}
}
