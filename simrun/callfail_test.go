package simrun_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// TestTunerSeesFailedCalls: a tuner whose MPS control daemon calls fail
// (control.actuators.mps.failure_rate) sees each failure as on a host: an
// error, the decision failed, nothing applied (a GPU's changes after its
// failed one in the round refused untried); with calls that never fail
// the same changes apply.
func TestTunerSeesFailedCalls(t *testing.T) {
	run := func(rate string) []tuner.Decision {
		path := scenarioCopy(t, "../scenarios/noisy-neighbour.yaml", func(sc string) string {
			return strings.Replace(sc, "\ngpus:\n", "\ncontrol: {actuators: {mps: {failure_rate: "+rate+"}}}\ngpus:\n", 1)
		})
		res, err := simrun.Run(context.Background(), simrun.Config{
			Scenario: path, Policy: baseline.StaticEqualName, Step: time.Second, Duration: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		var mps []tuner.Decision
		for _, d := range res.Decisions {
			if d.Knob == gpu.KnobMPSActiveThreads {
				mps = append(mps, d)
			}
		}
		return mps
	}
	failed := run("1")
	if len(failed) == 0 {
		t.Fatal("no MPS decisions with every MPS call failing")
	}
	if d := failed[0]; d.Outcome != tuner.OutcomeFailed {
		t.Errorf("first decision with every MPS call failing: %+v, want failed", d)
	}
	for _, d := range failed {
		afterFailure := d.Outcome == tuner.OutcomeRefused && strings.Contains(d.Reason, "failed before it in the round")
		if d.Applied || !afterFailure && (d.Outcome != tuner.OutcomeFailed || !strings.Contains(d.Reason, "nvidia-cuda-mps-control")) {
			t.Errorf("decision with every MPS call failing: %+v, want failed with the daemon's error, or refused after the GPU's failure", d)
		}
	}
	ok := run("0")
	if len(ok) == 0 || !ok[0].Applied {
		t.Fatalf("decisions with no MPS call failing: %+v, want the change applied", ok)
	}
}
