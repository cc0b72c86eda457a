package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

const pauseScenario = `name: pause
gpus: [{model: H100-SXM5-80GB, sharing: SHARING}]
tenants:
  - {name: a, process: {pid: 1}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
  - {name: b, process: {pid: 2}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
`

// A paused tenant's job in flight drains (the effect lags by up to one
// step); it starts no new one until the paused phase ends.
func TestPauseDrainLag(t *testing.T) {
	sc := pauseSc(t, "time-slice")
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	a := s.tenants[0]
	// find a moment when a's step is in flight, part done
	for i := 0; ; i++ {
		s.AdvanceTo(s.Now().Add(7 * time.Millisecond))
		if a.job.active && a.job.rem > 0.2 && a.job.rem < 0.8 {
			break
		}
		if i > 1000 {
			t.Fatal("a's step never seen in flight")
		}
	}
	s.mu.Lock()
	seq, start := a.jobSeq, s.now
	s.mu.Unlock()
	if err := s.SetPauseDuty(ctx, sc.GPUs[0].UUID, "a", []uint32{1}, 0.9); err != nil {
		t.Fatal(err)
	}
	frozenEnd := start + int64(0.9*float64(PausePeriod))
	drained := false
	for now := start; now < frozenEnd; now += int64(time.Millisecond) {
		s.AdvanceTo(s.start.Add(time.Duration(now)))
		if !a.job.active {
			drained = true
		}
		if a.jobSeq > seq {
			t.Fatalf("a new step started %v into the paused phase", time.Duration(now-start))
		}
	}
	if !drained {
		t.Fatal("the step in flight did not finish during the paused phase (a step here is well under 450 ms)")
	}
	s.AdvanceTo(s.start.Add(time.Duration(frozenEnd) + 20*time.Millisecond))
	if a.jobSeq <= seq {
		t.Error("no new step after the paused phase ended")
	}
	acts := s.Actions()
	if len(acts) != 1 || acts[0].Kind != "pause_duty" || acts[0].Lost != 0 || acts[0].Paused != 0 {
		t.Errorf("actions %+v: want one pause_duty, nothing lost", acts)
	}
}

func pauseSc(t *testing.T, sharing string) *Scenario {
	return mustParse(t, strings.Replace(pauseScenario, "SHARING", sharing, 1))
}

// Pausing costs the paused tenant the work it did not do, and its
// neighbour gets the GPU time, time-sliced or under MPS.
func TestPauseShiftsWork(t *testing.T) {
	for _, sharing := range []string{"time-slice", "mps"} {
		t.Run(sharing, func(t *testing.T) { testPauseShiftsWork(t, sharing) })
	}
}

func testPauseShiftsWork(t *testing.T, sharing string) {
	run := func(duty float64) (a, b float64) {
		sc := pauseSc(t, sharing)
		s := mustNew(t, sc, Options{})
		if duty > 0 {
			if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "a", []uint32{1}, duty); err != nil {
				t.Fatal(err)
			}
		}
		s.AdvanceTo(s.Now().Add(20 * time.Second))
		w := s.Window()
		return w.Tenants[0].Work, w.Tenants[1].Work
	}
	a0, b0 := run(0)
	a1, b1 := run(0.6)
	t.Logf("steps in 20 s: unpaused a %v b %v; a paused 60%%: a %v b %v", a0, b0, a1, b1)
	if !(a1 < a0*0.8) || !(b1 > b0*1.2) {
		t.Errorf("a paused 60%%: a %v steps (unpaused %v), b %v (unpaused %v): want a well down, b well up", a1, a0, b1, b0)
	}
	if a1+b1 < (a0+b0)*0.9 {
		t.Errorf("the GPU lost work: %v steps in all, %v unpaused", a1+b1, a0+b0)
	}
	sc := pauseSc(t, sharing)
	s := mustNew(t, sc, Options{})
	for _, d := range []float64{-0.1, 1} {
		if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "a", []uint32{1}, d); err == nil {
			t.Errorf("duty %v accepted", d)
		}
	}
	if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "x", []uint32{99}, 0.5); err == nil {
		t.Error("a pause of an unknown PID accepted")
	}
}
