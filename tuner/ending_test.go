package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// endingFails is the pauser's contract: a duty of 0 that ends the pause
// ends it, and returns an error while a group the tenant left stays frozen.
type endingFails struct {
	Calls  []string
	paused map[string]float64
}

func (p *endingFails) SetPauseDuty(_ context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	p.Calls = append(p.Calls, fmt.Sprintf("SetPauseDuty(%s,%s,%v,%g)", uuid, tenant, pids, duty))
	if p.paused == nil {
		p.paused = map[string]float64{}
	}
	if duty == 0 {
		delete(p.paused, tenant)
		return errors.New("tenant train: a group it left is still frozen")
	}
	p.paused[tenant] = duty
	return nil
}

// The policy ends a pause and the actuator refuses the thaw (it may have
// ended the pause all the same): the pause is not followed to the
// tenant's new processes, which would pause it again with no decision of
// the policy's.
func TestPauseEndingRefusedNotFollowed(t *testing.T) {
	act := &endingFails{}
	round := 0
	pol := deciderFunc(func(*State) []Action {
		round++
		switch round {
		case 1:
			return []Action{pauseAction("train", gpu.ClassBatch, 0, 0.5)}
		case 2:
			return []Action{pauseAction("train", gpu.ClassBatch, 0.5, 0)}
		}
		return nil
	})
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: pol, Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(act), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for _, pids := range [][]uint32{{7, 8}, {7, 8}, {9}} {
		clk.Advance(time.Second)
		if _, err := tu.RunOnce(context.Background(), trainSnap(clk.Now(), gpu.ClassBatch, pids...)); err != nil {
			t.Fatal(err)
		}
	}
	if len(act.paused) > 0 || slices.Contains(act.Calls, "SetPauseDuty(GPU-0,train,[9],0.5)") {
		t.Errorf("the pause the policy ended (the actuator ended it) is set again by a follow: %v", act.paused)
	}
}
