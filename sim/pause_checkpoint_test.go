package sim

import (
	"context"
	"testing"
	"time"
)

// TestPauseStretchesCheckpointWrite: a paused trainer's checkpoint write
// is its own process's host work, which the freezer stops too: it
// progresses only while the trainer is not frozen, so at a pause duty p a
// write takes 1/(1-p) of its time (within a pause period; a duty changed
// during the write stretches what is left of it), and the steps it saves
// are lost by a death until it ends.
func TestPauseStretchesCheckpointWrite(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name string
		// the duty from the start, and the one set at later (0: none);
		// the write runs 4 s of unfrozen time from about 10 s
		duty, duty2 float64
		later       time.Duration
		want        time.Duration
	}{
		{"not paused", 0, 0, 0, 4 * s},
		{"paused 0.5", 0.5, 0, 0, 8 * s},
		{"paused 0.75", 0.75, 0, 0, 16 * s},
		{"paused 0.5 1 s into the write", 0, 0.5, 11 * s, 1*s + 6*s},
		{"thawed 2 s into the write at 0.5", 0.5, 0, 12 * s, 2*s + 3*s},
	} {
		t.Run(c.name, func(t *testing.T) {
			// the write: the longest time without a step ending
			var last time.Duration
			var steps, before float64
			var from, gap time.Duration
			pausedTrainer(t, c.duty, c.duty2, c.later, 10*s+2*c.want, func(sim *Simulator, now time.Duration) {
				if w := sim.Window().Tenants[0].Work; w > 0 {
					if now-last > gap {
						from, gap, before = last, now-last, steps
					}
					last, steps = now, steps+w
				}
			})
			t.Logf("%.0f steps, then no step ended for %v from %v (want the write's %v)", before, gap, from, c.want)
			if d := gap - c.want; d < -PausePeriod || d > PausePeriod {
				t.Errorf("the checkpoint write took %v, want %v (4 s while not frozen) within a pause period", gap, c.want)
			}
			// a death shortly before the stretched write ends loses every
			// step since the start: the write saved none of them yet
			at := from + c.want*9/10
			sim := pausedTrainer(t, c.duty, c.duty2, c.later, at, nil)
			if err := sim.StopProcess(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			acts := sim.Actions()
			lost := acts[len(acts)-1].Lost
			t.Logf("stopped at %v: %d steps lost", at, lost)
			if float64(lost) < before {
				t.Errorf("stopped at %v, during the write, the trainer lost %d steps, want the %.0f or more it was saving", at, lost, before)
			}
		})
	}
}

// pausedTrainer runs, to until in ticks of 5 ms (each then seen by tick,
// unless nil), a trainer that writes a 4 s checkpoint 10 s after its
// start, paused from the start at duty and at duty2 from later (0: no
// change).
func pausedTrainer(t *testing.T, duty, duty2 float64, later, until time.Duration, tick func(*Simulator, time.Duration)) *Simulator {
	t.Helper()
	sc := mustParse(t, `name: ckpt
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
control: {checkpoint_bandwidth: 1GB, actuators: {pause: {latency: 0s, failure_rate: 0}, hook: {latency: 0s, failure_rate: 0}}}
tenants:
  - {name: train, process: {pid: 1}, memory: 4GB, workload: {type: training, flops: 1e13, service_noise: 0, checkpoint_interval: 10s}}
`)
	s := mustNew(t, sc, Options{})
	pause := func(d float64) {
		if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "train", []uint32{1}, d); err != nil {
			t.Fatal(err)
		}
	}
	if duty > 0 {
		pause(duty)
	}
	const step = 5 * time.Millisecond
	for now := step; now <= until; now += step {
		s.AdvanceTo(s.start.Add(now))
		if now == later {
			pause(duty2)
		}
		if tick != nil {
			tick(s, now)
		}
	}
	s.AdvanceTo(s.start.Add(until))
	return s
}

// TestThawedAfterBounds: a write's end under a pause is never before the
// write starts (a write of 0 in a frozen part ends where it starts), a
// longer write never ends before a shorter one, and a duty so near 1 that
// the end passes int64's time saturates rather than wrapping to an
// earlier one.
func TestThawedAfterBounds(t *testing.T) {
	const s = int64(time.Second)
	frozen := &tenant{duty: 0.5, pulseBase: 0}
	for _, c := range []struct {
		name        string
		t           *tenant
		now, d, d2  int64 // d2 > d: its end no earlier
		wantAtLeast int64
	}{
		{"nothing to write, frozen", frozen, 10*s + 1, 0, 1, 10*s + 1},
		{"nothing to write, thawed", frozen, 10*s + int64(PausePeriod)*3/4, 0, 1, 10*s + int64(PausePeriod)*3/4},
		{"duty near 1, long writes", &tenant{duty: 0.999999999, pulseBase: 0}, 10 * s, 10 * s, 40 * s, 10 * s},
		{"duty near 1, later base", &tenant{duty: 0.999999999, pulseBase: 3 * s}, 10 * s, 20 * s, 4000 * s, 10 * s},
	} {
		t.Run(c.name, func(t *testing.T) {
			e1, e2 := c.t.thawedAfter(c.now, c.d), c.t.thawedAfter(c.now, c.d2)
			if e1 < c.wantAtLeast || e2 < e1 {
				t.Errorf("writes of %d and %d ns from %d end at %d and %d, want no earlier than %d and in order", c.d, c.d2, c.now, e1, e2, c.wantAtLeast)
			}
		})
	}
}
