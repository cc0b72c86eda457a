package autotune

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The fast loop: with a pause actuator, a violation pauses the batch
// tenant within one interval and no MPS cap is set until the pause is at
// its ceiling; slack gives the pause back first; without the actuator
// nothing changes.
func TestAutotunePause(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	full, half := 1.0, 0.5
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	tests := []struct {
		name   string
		sc     scene
		drives bool
		duty   tuner.Duty          // the pause in place (0: none)
		ago    time.Duration       // since the last pause change
		since  *tuner.RequestCount // chat's requests since then (nil: counters unknown)
		want   []string
		reason string
	}{
		{"no pause actuator: the MPS cap as before", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, false, 0, 0, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "chat violates its SLO"},
		{"violation pauses the batch tenant, no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0, 0, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "no restart"},
		{"time-sliced, a sustained violation: the level first", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 2, timeSlice: gpu.TimeSliceDefault}, true, 0, 0, nil,
			[]string{"GPU-0/compute_timeslice=medium"}, ""},
		{"time-sliced, no level to try: the pause", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: tuner.FastSLO{Over: time.Minute, Total: 100, Good: 94}, p99: 0.9, timeSlice: gpu.TimeSliceDefault}, true, 0, 0, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, ""},
		{"time-sliced, no level to try, a miss within chance: no pause", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 0.9, timeSlice: gpu.TimeSliceDefault}, true, 0, 0, nil,
			nil, ""},
		{"costly to restart, paused half the ceiling, a miss within chance: the pause a step, no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 0.9, restart: 5 * time.Minute}, true, 0.5, 2 * time.Minute, nil,
			[]string{"GPU-0/pause_duty/pid2=60%"}, "rather than cap it with a restart"},
		{"costly to restart, paused at the ceiling, a miss within chance: the slow knobs judge", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 0.9, restart: 5 * time.Minute}, true, 0.8, 2 * time.Minute, nil,
			[]string{"GPU-0/mps_active_threads/pid2=20%"}, "halved in one step"},
		{"cheap to restart, paused half the ceiling, a miss within chance: no raise, the slow knobs judge", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 0.9}, true, 0.5, 2 * time.Minute, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "reserve"},
		{"costly to restart, paused below half the ceiling, a miss within chance: nothing", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 0.9, restart: 5 * time.Minute}, true, 0.3, 2 * time.Minute, nil,
			nil, ""},
		{"violation goes on past a fifth: up to the ceiling, and the MPS cap too", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.6, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 45},
			[]string{"GPU-0/pause_duty/pid2=80%", "GPU-0/mps_active_threads/pid2=55%"}, "none before the last pause change"},
		{"violation goes on below a fifth: the pause alone", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.1, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 45},
			[]string{"GPU-0/pause_duty/pid2=40%"}, "none before the last pause change"},
		{"the last pause holds since it was made: wait, no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.3, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 50},
			nil, ""},
		{"at the ceiling, holding since it was made: the slow knobs judge", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.8, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 50},
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "reserve"},
		{"costly to restart, violating at the ceiling: the cap to the share the pause leaves, in one restart", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, restart: 5 * time.Minute}, true, 0.8, 2 * time.Minute, nil,
			[]string{"GPU-0/mps_active_threads/pid2=20%"}, "halved in one step"},
		{"costly to restart, violating past a quarter of the ceiling but below half: the pause alone", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, restart: 5 * time.Minute}, true, 0.3, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 45},
			[]string{"GPU-0/pause_duty/pid2=60%"}, "none before the last pause change"},
		{"counters restarted since the pause (a reload tightened the SLO), fewer good requests than then: not judged, wait", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.6, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: -60},
			nil, ""},
		{"too few requests since the pause: wait", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.3, 5 * time.Second, &tuner.RequestCount{Total: 5, Good: 5},
			nil, ""},
		{"at the ceiling and still violating: the MPS cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.8, 2 * time.Minute, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "reserve"},
		{"slack: the pause given back first", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, true, 0.5, 2 * time.Minute, nil,
			[]string{"GPU-0/pause_duty/pid2=45%"}, "slack"},
		{"the minute's burn 0.35 over 1000 requests (one late request over SlackBurn's 2.5): the pause given back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: tuner.FastSLO{Over: time.Minute, Total: 1000, Good: 996.5}, p99: 0.3}, true, 0.5, 2 * time.Minute, nil,
			[]string{"GPU-0/pause_duty/pid2=45%"}, "slack"},
		{"the minute's burn 0.5 over 1000 requests (2.5 late over SlackBurn's, beyond chance): the pause held", scene{mode: gpu.SharingMPS, embedCap: &half, fast: tuner.FastSLO{Over: time.Minute, Total: 1000, Good: 995}, p99: 0.3}, true, 0.5, 2 * time.Minute, nil,
			nil, ""},
		{"the burn 0.6 over 100 requests: within chance of SlackBurn over the minute, but over half ViolateBurn over the last interval (the same requests here): the pause held", scene{mode: gpu.SharingMPS, embedCap: &half, fast: tuner.FastSLO{Over: time.Minute, Total: 100, Good: 99.4}, p99: 0.3}, true, 0.5, 2 * time.Minute, nil,
			nil, ""},
		{"slack and no pause: the cap released", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, true, 0, 0, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "slack"},
		{"slack and nothing paused: no pause action", scene{mode: gpu.SharingMPS, embedCap: &full, fast: fine, p99: 0.3}, true, 0, 0, nil,
			nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			if tc.drives {
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
			}
			if tc.duty > 0 {
				s.Originals[pauseT.String()] = tuner.Duty(0)
				s.Changes[pauseT.String()] = tuner.Change{At: s.Now.Add(-tc.ago), To: tc.duty}
			}
			if tc.ago > 0 {
				c := tuner.Change{At: s.Now.Add(-tc.ago), To: tc.duty}
				if tc.since != nil {
					c.Counters = map[string]tuner.RequestCount{"chat": {Total: 1000, Good: 990}}
					s.Snapshot.SLOs[0].RequestsTotal = 1000 + tc.since.Total
					s.Snapshot.SLOs[0].GoodRequestsTotal = 990 + tc.since.Good
				}
				s.Changes[pauseT.DomainKey()] = c
			}
			acts := New().Decide(s)
			var got []string
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
				if a.Knob == gpu.KnobPauseDuty && (!slices.Equal(a.PIDs, []uint32{2}) || a.Tenant != "embed" || a.Class != gpu.ClassBatch) {
					t.Errorf("pause action %+v: want embed's PIDs and class", a)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
			if tc.reason != "" && !strings.Contains(acts[0].Reason, tc.reason) {
				t.Errorf("reason %q, want %q in it", acts[0].Reason, tc.reason)
			}
		})
	}
}

// Anticipation: the pause a recent peak needed stays as a floor that
// fades by pausePeakFade a minute; a pause needed at this time of day on
// two or more earlier days is set ahead of it; one day is no pattern.
func TestPauseAnticipation(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	day := 24 * time.Hour
	tests := []struct {
		name   string
		duty   tuner.Duty    // the pause in place
		peak   time.Duration // since a raise to 60% (0: none)
		days   []time.Duration
		want   []string
		reason string
	}{
		{"slack and no peak: given back", 0.3, 0, nil, []string{"GPU-0/pause_duty/pid2=25%"}, "slack"},
		{"a peak 2 minutes ago holds 40%", 0.3, 2 * time.Minute, nil, []string{"GPU-0/pause_duty/pid2=40%"}, "a recent peak needed a 60% pause"},
		{"held at the floor, not given back", 0.4, 2 * time.Minute, nil, nil, ""},
		{"a peak 6 minutes ago has faded", 0.3, 6 * time.Minute, nil, []string{"GPU-0/pause_duty/pid2=25%"}, "slack"},
		{"this time of day on two days: set ahead", 0, 0, []time.Duration{day - 5*time.Minute, 2*day - 10*time.Minute},
			[]string{"GPU-0/pause_duty/pid2=40%"}, "on 2 of the last 7 days this time of day needed a 40% pause"},
		{"on one day only: no pattern", 0, 0, []time.Duration{day - 5*time.Minute}, nil, ""},
		{"a day later than the lead: no pattern", 0, 0, []time.Duration{day - 40*time.Minute, 2*day - 40*time.Minute}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingMPS, embedCap: new(1.0), fast: fine, p99: 0.3}.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
			if tc.duty > 0 {
				s.Originals[pauseT.String()] = tuner.Duty(0)
				s.Changes[pauseT.String()] = tuner.Change{At: s.Now.Add(-time.Minute), To: tc.duty}
				s.Changes[pauseT.DomainKey()] = tuner.Change{At: s.Now.Add(-time.Minute), To: tc.duty}
			}
			if tc.peak > 0 {
				s.History = map[string][]tuner.Change{pauseT.DomainKey(): {
					{At: s.Now.Add(-tc.peak), From: tuner.Duty(0.3), To: tuner.Duty(0.6)},
					{At: s.Now.Add(-tc.peak + 30*time.Second), From: tuner.Duty(0.6), To: tuner.Duty(0.55)},
				}}
			}
			p := New()
			for i, ago := range tc.days {
				p.day.raised(uuid0, s.Now.Add(-ago), tuner.Duty(0.4+0.1*float64(i)))
			}
			checkActions(t, p.Decide(s), tc.want, tc.reason)
		})
	}
}

// A pause raised on a miss chance explains is given back once every
// latency SLO on the GPU holds again (burn at most 1, the SLO window
// inside its target), without waiting for slack; the same pause raised
// on a clear miss is held until slack, as before.
func TestPauseChanceRaiseGivenBack(t *testing.T) {
	within := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}    // burn 3, chance at p99 0.9
	holding := tuner.FastSLO{Over: time.Minute, Total: 1000, Good: 992} // burn 0.8: held, no slack
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	sc := scene{mode: gpu.SharingMPS, embedCap: new(1.0), restart: 5 * time.Minute}
	for _, tc := range []struct {
		name   string
		chance bool // the raise to 60% answered a miss chance explains
		want   []string
	}{
		{"raised on chance: given back a step", true, []string{"GPU-0/pause_duty/pid2=55%"}},
		{"raised on a clear miss: held", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			raisedAt := t0.Add(-2 * time.Minute)
			if tc.chance {
				// the round of the raise: paused half the ceiling, a
				// miss within chance, costly to restart
				sc1 := sc
				sc1.fast, sc1.p99 = within, 0.9
				s := sc1.state()
				s.Now = raisedAt
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
				s.Originals[pauseT.String()] = tuner.Duty(0)
				s.Changes[pauseT.String()] = tuner.Change{At: raisedAt.Add(-2 * time.Minute), To: tuner.Duty(0.5)}
				s.Changes[pauseT.DomainKey()] = tuner.Change{At: raisedAt.Add(-2 * time.Minute), To: tuner.Duty(0.5)}
				var got []string
				for _, a := range p.Decide(s) {
					got = append(got, a.Target.String()+"="+a.Want.String())
				}
				if !slices.Equal(got, []string{"GPU-0/pause_duty/pid2=60%"}) {
					t.Fatalf("the chance round: actions %v, want the pause a step", got)
				}
			}
			// two minutes later: the chat holds its SLO (burn 0.8, the
			// window's p99 inside), without slack
			sc2 := sc
			sc2.fast, sc2.p99 = holding, 0.9
			s := sc2.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
			raise := tuner.Change{At: raisedAt, From: tuner.Duty(0.5), To: tuner.Duty(0.6)}
			s.Originals[pauseT.String()] = tuner.Duty(0)
			s.Changes[pauseT.String()] = raise
			s.Changes[pauseT.DomainKey()] = raise
			s.History = map[string][]tuner.Change{pauseT.DomainKey(): {raise}}
			var got []string
			acts := p.Decide(s)
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
			if len(acts) > 0 && !strings.Contains(acts[0].Reason, "miss chance explains") {
				t.Errorf("reason %q, want the chance raise named", acts[0].Reason)
			}
		})
	}
}

// Where a restart is costly, a cap that fell since the last round takes
// over most of what the pause held: the pause goes down PauseHandOver of
// the way to what leaves the tenant the share of the GPU it left it under
// the old cap (80% paused at a 100% cap, then capped to 20%: none, so
// 20%), and the raise before it leaves no floor; a cap that took less
// than that share (more than handOverLeft of pause still needed), a cap
// that did not fall, an unpaused tenant, or a cheap restart (where the
// cap is a step on top of the pause) changes nothing.
func TestPauseHandedToCap(t *testing.T) {
	holding := tuner.FastSLO{Over: time.Minute, Total: 1000, Good: 992} // burn 0.8: held, no slack
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	for _, tc := range []struct {
		name        string
		duty        tuner.Duty
		from, to    float64       // embed's cap at the first round and the second
		restart     time.Duration // embed's restart_cost
		want        []string
		reasonWants string
	}{
		{"capped from 100% to 20% while paused 80%: 20%", 0.8, 1, 0.2, 5 * time.Minute, []string{"GPU-0/pause_duty/pid2=20%"}, "pause 20% (was 80%; 0% would leave"},
		{"capped from 100% to 25% while paused 80%: 35%", 0.8, 1, 0.25, 5 * time.Minute, []string{"GPU-0/pause_duty/pid2=35%"}, "fell from 100% to 25%"},
		{"capped from 100% to 50% while paused 80% (a 60% pause would leave the share): the pause stays", 0.8, 1, 0.5, 5 * time.Minute, nil, ""},
		{"the cap unchanged: the pause held", 0.8, 0.5, 0.5, 5 * time.Minute, nil, ""},
		{"the cap raised: the pause held", 0.8, 0.2, 0.5, 5 * time.Minute, nil, ""},
		{"capped, nothing paused: no pause action", 0, 1, 0.2, 5 * time.Minute, nil, ""},
		{"a cheap restart: the pause held", 0.8, 1, 0.2, 0, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			raise := tuner.Change{At: t0.Add(-time.Minute), From: tuner.Duty(0.6), To: tc.duty}
			round := func(capped float64, now time.Time) []tuner.Action {
				s := scene{mode: gpu.SharingMPS, embedCap: &capped, fast: holding, p99: 0.9, restart: tc.restart}.state()
				s.Now = now
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
				if tc.duty > 0 {
					s.Originals[pauseT.String()] = tuner.Duty(0)
					s.Changes[pauseT.String()] = raise
					s.Changes[pauseT.DomainKey()] = raise
					s.History = map[string][]tuner.Change{pauseT.DomainKey(): {raise}}
				}
				return p.Decide(s)
			}
			if acts := round(tc.from, t0.Add(-15*time.Second)); len(acts) > 0 {
				t.Fatalf("the first round: actions %v, want none (the SLO holds without slack)", acts)
			}
			acts := round(tc.to, t0)
			checkActions(t, acts, tc.want, tc.reasonWants)
			if len(acts) > 0 && acts[0].Current != tc.duty {
				t.Errorf("current %v, want the pause in place %v", acts[0].Current, tc.duty)
			}
		})
	}
}

// A cap not in force yet (pending: its client not restarted) hands
// nothing over until it is; a hand-over the executor did not apply (the
// pause as it was at the next round) is asked for again, and one in place
// is not asked for twice.
func TestPauseHandOverWaitsAndRetries(t *testing.T) {
	holding := tuner.FastSLO{Over: time.Minute, Total: 1000, Good: 992}
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	p := New()
	raise := tuner.Change{At: t0.Add(-time.Minute), From: tuner.Duty(0.6), To: tuner.Duty(0.8)}
	round := func(at time.Duration, inForce float64, pending *tuner.Fraction, pause tuner.Change) []tuner.Action {
		s := scene{mode: gpu.SharingMPS, embedCap: &inForce, pending: pending, fast: holding, p99: 0.9, restart: 5 * time.Minute}.state()
		s.Now = t0.Add(at)
		s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
		s.Originals[pauseT.String()] = tuner.Duty(0)
		s.Changes[pauseT.String()] = pause
		s.Changes[pauseT.DomainKey()] = pause
		s.History = map[string][]tuner.Change{pauseT.DomainKey(): {raise}}
		return p.Decide(s)
	}
	capped := tuner.Fraction(0.2)
	checkActions(t, round(0, 1, nil, raise), nil, "")
	checkActions(t, round(15*time.Second, 1, &capped, raise), nil, "")                                                      // pending: nothing yet
	checkActions(t, round(30*time.Second, 0.2, nil, raise), []string{"GPU-0/pause_duty/pid2=20%"}, "fell from 100% to 20%") // in force
	checkActions(t, round(45*time.Second, 0.2, nil, raise), []string{"GPU-0/pause_duty/pid2=20%"}, "fell from 100% to 20%") // not applied: asked again
	landed := tuner.Change{At: t0.Add(45 * time.Second), From: tuner.Duty(0.8), To: tuner.Duty(0.2)}
	checkActions(t, round(60*time.Second, 0.2, nil, landed), nil, "") // in place
	checkActions(t, round(75*time.Second, 0.2, nil, landed), nil, "")
}

// A tenant whose client restarted under a new PID (to take a new MPS cap)
// keeps the pause target the tuner holds for it: the slack release goes to
// that target with the tenant's processes now, not to a new target beside
// it at 0 (which would leave the old pause in place for good).
func TestPauseTargetFollowsTenant(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	held := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	s := scene{mode: gpu.SharingMPS, embedCap: new(0.5), fast: fine, p99: 0.3}.state()
	s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
	// embed restarted: its process is 9 now
	d := &s.Snapshot.Readings.Devices[0]
	for i := range d.Processes {
		if d.Processes[i].PID == 2 {
			d.Processes[i].PID = 9
		}
	}
	for i := range s.Snapshot.Usage {
		if s.Snapshot.Usage[i].Tenant == "embed" {
			s.Snapshot.Usage[i].PIDs = []uint32{9}
		}
	}
	s.Originals[held.String()] = tuner.Duty(0)
	s.Changes[held.String()] = tuner.Change{At: s.Now.Add(-2 * time.Minute), To: tuner.Duty(0.5)}
	s.Changes[held.DomainKey()] = tuner.Change{At: s.Now.Add(-2 * time.Minute), To: tuner.Duty(0.5)}
	s.Paused = map[string]tuner.Target{tuner.PauseKey(uuid0, "embed"): held}
	acts := New().Decide(s)
	checkActions(t, acts, []string{"GPU-0/pause_duty/pid2=45%"}, "slack")
	if !slices.Equal(acts[0].PIDs, []uint32{9}) {
		t.Errorf("PIDs %v, want the tenant's process now, [9]", acts[0].PIDs)
	}
}

// On a vGPU host the scheduler is the slow knob: a round whose pause
// acts recommends no scheduler change; without the pause, or with the
// pause at its ceiling and the SLO violated still, it is recommended.
func TestVGPUSchedulerAfterPause(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	full := 1.0
	for _, tc := range []struct {
		name  string
		pause bool
		duty  tuner.Duty // the pause in place
		want  []string
	}{
		{"the pause acts", true, 0, []string{"GPU-0/pause_duty/pid300001=30%"}},
		{"at the ceiling", true, 0.8, []string{"GPU-0/vgpu_scheduler=fixed-share"}},
		{"no pause knob", false, 0, []string{"GPU-0/vgpu_scheduler=fixed-share"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingVGPU, embedCap: &full, fast: violating, p99: 2}.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: tc.pause, gpu.KnobVGPUScheduler: true}
			d := &s.Snapshot.Readings.Devices[0]
			d.Scheduler = &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort, Log: []gpu.VGPUSchedulerLogEntry{{Runlist: 0, Weight: 4}, {Runlist: 1, Weight: 1}}}
			for i := range s.Snapshot.Usage {
				if s.Snapshot.Usage[i].Tenant == "embed" {
					s.Snapshot.Usage[i].VMPIDs = []uint32{300001}
				}
			}
			if tc.duty > 0 {
				pt := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPauseDuty, PID: 300001}
				s.Originals[pt.String()] = tuner.Duty(0)
				s.Changes[pt.String()] = tuner.Change{At: s.Now.Add(-time.Minute), From: tuner.Duty(0.7), To: tc.duty}
			}
			var got []string
			for _, a := range New().Decide(s) {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
		})
	}
}

// On a vGPU host a batch VM is paused through its process on the host
// (Usage.VMPIDs), never through the PIDs of the processes in it, which
// are the guest's; where the host process is not known, nothing is paused.
func TestPauseVM(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	full := 1.0
	for _, tc := range []struct {
		name   string
		vmPIDs []uint32
		want   []string
	}{
		{"the VM's host process known", []uint32{300001}, []string{"GPU-0/pause_duty/pid300001=30%"}},
		{"not known: nothing paused", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingVGPU, embedCap: &full, fast: violating, p99: 2}.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobVGPUScheduler: true}
			for i := range s.Snapshot.Usage {
				if s.Snapshot.Usage[i].Tenant == "embed" {
					s.Snapshot.Usage[i].VMPIDs = tc.vmPIDs
				}
			}
			acts := New().Decide(s)
			var got []string
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
				if a.Knob == gpu.KnobPauseDuty && !slices.Equal(a.PIDs, tc.vmPIDs) {
					t.Errorf("pause of %v, want the VM's host process %v", a.PIDs, tc.vmPIDs)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
		})
	}
}

// A reload that changes a tenant's SLO restarts its request counters:
// counted from the pause change's counters, the requests since then have
// fewer good requests than none, or more than all, and say nothing (the
// burn was 220x, or -10x, one way or the other a pause raised or given
// back on it); they are judged as too few to tell, as counters that went
// back are.
func TestPauseBurnAfterCountersRestart(t *testing.T) {
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	for _, tc := range []struct {
		name   string
		now    tuner.RequestCount // chat's counters; at the pause change {1000, 990}
		burn   float64
		judged bool
	}{
		{"counters went on", tuner.RequestCount{Total: 1050, Good: 1039}, 2, true},
		{"restarted, good fewer than then", tuner.RequestCount{Total: 1050, Good: 930}, 0, false},
		{"restarted, good more than the requests since", tuner.RequestCount{Total: 1050, Good: 1045}, 0, false},
		{"restarted, went back", tuner.RequestCount{Total: 400, Good: 390}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingMPS, fast: tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}}.state()
			s.Changes[pauseT.DomainKey()] = tuner.Change{At: s.Now.Add(-20 * time.Second), To: tuner.Duty(0.3),
				Counters: map[string]tuner.RequestCount{"chat": {Total: 1000, Good: 990}}}
			s.Snapshot.SLOs[0].RequestsTotal, s.Snapshot.SLOs[0].GoodRequestsTotal = tc.now.Total, tc.now.Good
			m := &member{name: "chat", slo: &s.Snapshot.SLOs[0]}
			burn, _, ok := New().burnSincePause(s, uuid0, m)
			if ok != tc.judged || math.Abs(burn-tc.burn) > 1e-9 {
				t.Errorf("burn %.2f (judged %v), want %.2f (judged %v)", burn, ok, tc.burn, tc.judged)
			}
		})
	}
}

// A restart does not always show in the counts: the pause was raised 20 s
// ago with chat's counters at {40, 30}, and they read {130, 60} now. Of
// one tracker, 90 requests ended since the pause, 30 good (a burn of
// 66.7). Where a reload 15 s ago, after the change, restarted them
// (another Epoch), they are the new tracker's: its fast window starts over
// with it, 15 s of requests all ended after the change, and is what is
// judged (its own burn), never a difference across the two trackers.
func TestPauseBurnAcrossTrackers(t *testing.T) {
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	for _, tc := range []struct {
		name     string
		epoch    uint64 // chat's tracker now; at the pause change 1
		fast     tuner.FastSLO
		burn     float64
		requests float64
	}{
		{"the same tracker: 90 requests since, 30 good", 1, tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}, (1 - 30.0/90) / 0.01, 90},
		{"a reload restarted the counters after the change: the new tracker's window", 2, tuner.FastSLO{Over: 15 * time.Second, Total: 130, Good: 60}, tuner.Burn(60.0/130, 0.99), 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingMPS, fast: tc.fast}.state()
			s.Changes[pauseT.DomainKey()] = tuner.Change{At: s.Now.Add(-20 * time.Second), To: tuner.Duty(0.3),
				Counters: map[string]tuner.RequestCount{"chat": {Total: 40, Good: 30, Epoch: 1}}}
			slo := &s.Snapshot.SLOs[0]
			slo.RequestsTotal, slo.GoodRequestsTotal, slo.Epoch = 130, 60, tc.epoch
			w := &member{name: "chat", slo: slo, burn: tuner.Burn(tc.fast.Good/tc.fast.Total, 0.99), hasBurn: true}
			burn, n, ok := New().burnSincePause(s, uuid0, w)
			if !ok || math.Abs(burn-tc.burn) > 1e-9 || n != tc.requests {
				t.Errorf("burn %.2f over %v requests (judged %v), want %.2f over %v", burn, n, ok, tc.burn, tc.requests)
			}
		})
	}
}

// TestPauseGivenBackOnQuietSlack: chat has slack by the slow loop's rule
// (its SLO window's p99 at 30% of its target, no late request) but fewer
// than MinRequests requests a minute (10: a quiet night), so no burn.
// The pause given while it was busy goes back; before, it held at 80%
// for good while the slow loop gave the MPS cap back under it. The cap
// is not given back while the pause is above 0 (the pause goes first).
func TestPauseGivenBackOnQuietSlack(t *testing.T) {
	half := 0.5
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	p := New()
	duty := tuner.Duty(0.8)
	at := t0.Add(time.Hour).Add(-10 * time.Minute)
	for round := 0; round < 240 && duty > 0; round++ { // an hour of 15 s rounds
		sc := scene{mode: gpu.SharingMPS, embedCap: &half, fast: tuner.FastSLO{Over: time.Minute, Total: 10, Good: 10}, p99: 0.3}
		s := sc.state()
		s.Now = s.Now.Add(time.Duration(round) * 15 * time.Second)
		s.Snapshot.SLOs[0].RequestsTotal = 1000 + float64(round)*2.5
		s.Snapshot.SLOs[0].GoodRequestsTotal = 1000 + float64(round)*2.5
		s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
		s.Originals[pauseT.String()] = tuner.Duty(0)
		c := tuner.Change{At: at, From: tuner.Duty(0.7), To: duty}
		s.Changes[pauseT.String()] = c
		s.Changes[pauseT.DomainKey()] = c
		for _, a := range p.Decide(s) {
			switch a.Knob {
			case gpu.KnobPauseDuty:
				if a.Want.(tuner.Duty) >= duty {
					t.Fatalf("round %d: the pause raised with slack: %s", round, a.Reason)
				}
				duty, at = a.Want.(tuner.Duty), s.Now // applied
			case gpu.KnobMPSActiveThreads:
				t.Fatalf("round %d: the MPS cap given back under a %.0f%% pause: %s", round, 100*float64(duty), a.Reason)
			}
		}
	}
	if duty > 0 {
		t.Fatalf("after an hour of rounds with chat's p99 at 30%% of its target and no late request (10 requests a minute), embed is still paused %.0f%%", 100*float64(duty))
	}
}
