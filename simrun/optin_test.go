package simrun_test

import (
	"context"
	"strconv"
	"strings"
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

// The autotune parameters a run is given reach its policy: with the
// pause's ceiling at 10% no pause goes above it, where the defaults
// pause the noisy neighbour's batch tenant further; any other policy
// with parameters is refused.
func TestAutotuneParamsReachPolicy(t *testing.T) {
	most := func(params []string) float64 {
		t.Helper()
		res, err := simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "autotune",
			Duration: 10 * time.Minute, Step: time.Second, EnabledKnobs: []string{string(gpu.KnobPauseDuty)}, AutotuneParams: params})
		if err != nil {
			t.Fatal(err)
		}
		top := 0.0
		for _, d := range res.Decisions {
			if d.Knob == gpu.KnobPauseDuty && d.Applied {
				v, err := strconv.ParseFloat(strings.TrimSuffix(d.To, "%"), 64)
				if err != nil {
					t.Fatalf("pause decision to %q: %v", d.To, err)
				}
				top = max(top, v/100)
			}
		}
		return top
	}
	if top := most(nil); top <= 0.1 {
		t.Fatalf("the defaults pause at most %.0f%%; the test needs more than 10%%", 100*top)
	}
	if top := most([]string{"pause_max=0.1", "pause_step_min=0.05"}); top > 0.1+1e-9 || top == 0 {
		t.Errorf("with pause_max=0.1 the pause reached %.0f%%, want some and at most 10%%", 100*top)
	}
	_, err := simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "static-equal",
		Duration: time.Minute, Step: time.Second, AutotuneParams: []string{"pause_max=0.1"}})
	if err == nil || !strings.Contains(err.Error(), `--autotune.param: only the autotune policy has parameters, not "static-equal"`) {
		t.Errorf("static-equal with parameters: %v", err)
	}
	_, err = simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: "autotune",
		Duration: time.Minute, Step: time.Second, AutotuneParams: []string{"pause_max=2"}})
	if err == nil || !strings.Contains(err.Error(), "--autotune.param: pause_max is a share") {
		t.Errorf("a bad parameter: %v", err)
	}
}
