package simrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// The pause duty is an opt-in knob: autotune pauses nobody unless the run
// enables it, and with it enabled, the noisy neighbour's batch tenant is
// paused when the chat service misses its SLO.
func TestPauseIsOptIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled []string
		pauses  bool
	}{
		{"default", nil, false},
		{"enabled", []string{string(gpu.KnobPauseDuty)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "autotune",
				Duration: 10 * time.Minute, Step: time.Second, EnabledKnobs: tc.enabled})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range res.Decisions {
				if d.Knob == gpu.KnobPauseDuty && d.Applied {
					n++
				}
			}
			if (n > 0) != tc.pauses {
				t.Errorf("%d pauses applied; want some: %v", n, tc.pauses)
			}
		})
	}
}
