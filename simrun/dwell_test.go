package simrun_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/policies"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
)

// proposing is autotune as it was before it held for the dwell: it
// proposes what it holds, and the dwell guard refuses it.
type proposing struct{ d tuner.Decider }

func (p proposing) Name() string { return p.d.Name() }

func (p proposing) Decide(s *tuner.State) []tuner.Action {
	as := p.d.Decide(s)
	for i := range as {
		as[i].Held = ""
	}
	return as
}

const proposingName = "autotune-proposing"

func init() {
	policies.Register(proposingName, func() tuner.Policy {
		return tuner.NewTunerPolicy(proposing{autotune.New()}, rebalance.Default())
	})
}

// In the noisy neighbour's sustained violation, autotune steps the batch
// tenant's cap down every 30 s at a 15 s interval beside a 20 s dwell:
// holding for the dwell leaves no refusal, and the same changes at the
// same times as proposing each step and being refused every other round.
func TestAutotuneHoldsForTheDwell(t *testing.T) {
	run := func(policy string) (applied []string, refused int) {
		res, err := simrun.Run(context.Background(), simrun.Config{Scenario: "../scenarios/noisy-neighbour.yaml", Policy: policy, Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := res.Recorder.Meta().Start
		for _, d := range res.Decisions {
			switch {
			case d.Applied:
				applied = append(applied, fmt.Sprintf("%v %s %s %s -> %s", d.Time.Sub(start), d.Knob, d.Tenant, d.From, d.To))
			case d.Guard == tuner.GuardDwell || strings.Contains(d.Reason, "refused by dwell"):
				refused++
			}
		}
		return applied, refused
	}
	before, refusedBefore := run(proposingName)
	after, refusedAfter := run(autotune.Name)
	if refusedBefore == 0 {
		t.Fatal("proposing: no dwell refusal, the scenario no longer has a sustained violation to test with")
	}
	if refusedAfter != 0 {
		t.Errorf("%d dwell refusals while holding, want 0", refusedAfter)
	}
	if len(after) == 0 || !slices.Equal(before, after) {
		t.Errorf("applied changes differ:\nproposing %q\nholding   %q", before, after)
	}
	t.Logf("dwell refusals: %d proposing, %d holding; %d changes applied by each", refusedBefore, refusedAfter, len(after))
}
