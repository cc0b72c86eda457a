package autotune

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestSettingsGivenBackWithoutLatencyTenant: chat, the GPU's only latency
// tenant, leaves it (its job ended; the policy has run for chat's SLO
// window without seeing it there) or a reload drops its SLO. Nothing on
// the GPU is protected any more: the pause, the MPS cap, the clock
// lock, the power limit and the time-slice level the tuner set go back
// as on slack (the pause first, at the usual pace, with no anticipation
// floor), and an operator's setting stays. Before, the policy proposed
// nothing on such a GPU, and each setting stayed for good (an idle chat,
// whose SLO has slack, got them back). An MPS cap is the tuner's where
// it keeps the client's original (the journal gives it back after a
// restart of the exporter, which keeps no change): an operator's cap
// stayed only while the tuner had never changed a cap on the GPU, and
// one it set was kept for good after a restart.
func TestSettingsGivenBackWithoutLatencyTenant(t *testing.T) {
	half := 0.5
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	embedT := tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}
	lowered := &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}
	// embed's cap is the tuner's: its original kept
	tunersCap := func(s *tuner.State) { s.Originals[embedT.String()] = tuner.Fraction(1) }
	// the tuner gave another client (pid 9, gone) its original back 10
	// minutes ago, its only MPS change on the GPU
	otherBack := func(s *tuner.State) {
		other := tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}
		c := tuner.Change{At: s.Now.Add(-10 * time.Minute), From: tuner.Fraction(0.4), To: tuner.Fraction(1), Revert: true}
		s.Changes[other.String()], s.Changes[other.DomainKey()] = c, c
	}
	tests := []struct {
		name  string
		sc    scene
		duty  tuner.Duty // the pause in place, set 10 minutes ago (0: none, no pause actuator)
		level bool       // the time-slice level is the tuner's (its original kept)
		power bool       // the power limit is the tuner's, lowered from 700 W
		prep  func(*tuner.State)
		want  []string
	}{
		{"the pause goes back a step", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0.8, false, false, nil,
			[]string{"GPU-0/pause_duty/pid2=75%"}},
		{"the MPS cap goes back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: 10 * time.Minute}, 0, false, false, tunersCap,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}},
		{"the MPS cap goes back after a restart of the exporter (its original kept, no change)", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0, false, false, tunersCap,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}},
		{"an MPS cap the tuner did not set stays", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0, false, false, nil,
			nil},
		{"an MPS cap the tuner did not set stays, though it changed another client's", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0, false, false, otherBack,
			nil},
		{"the energy clock lock goes back", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: 3 * time.Minute}, 0, false, false, nil,
			[]string{"GPU-0/locked_clocks=unlocked"}},
		{"the clock lock, set a minute ago: dwell", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: time.Minute}, 0, false, false, nil,
			nil},
		{"an operator's clock lock stays", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered}, 0, false, false, nil,
			nil},
		{"the lowered power limit goes back", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, 0, false, true, nil,
			[]string{"GPU-0/power_limit=700W"}},
		{"the time-slice level goes back", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, 0, true, false, nil,
			[]string{"GPU-0/compute_timeslice=default"}},
		{"an operator's time-slice level stays", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, 0, false, false, nil,
			nil},
	}
	for _, how := range []string{"chat left the GPU", "a reload dropped chat's SLO"} {
		for _, tc := range tests {
			t.Run(how+": "+tc.name, func(t *testing.T) {
				s := tc.sc.state()
				if how == "chat left the GPU" {
					s.Snapshot.Usage = s.Snapshot.Usage[1:]
				} else {
					s.Snapshot.SLOs, s.Snapshot.Tenants[0].SLOWindow = nil, 0
				}
				if tc.duty > 0 {
					s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true}
					s.Originals[pauseT.String()] = tuner.Duty(0)
					c := tuner.Change{At: s.Now.Add(-10 * time.Minute), From: tuner.Duty(0.7), To: tc.duty}
					s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
				}
				if tc.level {
					s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice}.String()] = tuner.Level(gpu.TimeSliceDefault)
				}
				if tc.power {
					powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
					s.Originals[powT.String()] = tuner.Watts(700)
					s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-10 * time.Minute), From: tuner.Watts(700), To: tuner.Watts(490)}
				}
				if tc.prep != nil {
					tc.prep(s)
				}
				acts := runningSince(s.Now.Add(-tenant.DefaultSLOWindow)).Decide(s)
				var got []string
				for _, a := range acts {
					got = append(got, a.Target.String()+"="+a.Want.String())
				}
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Fatalf("actions %q, want %q", got, tc.want)
				}
				if len(acts) > 0 && !strings.Contains(acts[0].Reason, "no latency tenant is left") {
					t.Errorf("reason %q does not say why", acts[0].Reason)
				}
			})
		}
	}
}

// TestPauseFirstWithoutLatencyTenant: with chat gone from a GPU where embed
// is paused and capped, the pause goes back round after round, at the
// usual pace and with no floor for the peak it answered, and the cap only
// once no pause is left.
func TestPauseFirstWithoutLatencyTenant(t *testing.T) {
	half := 0.5
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	p := runningSince(t0.Add(time.Hour).Add(-tenant.DefaultSLOWindow)) // chat left before
	duty := tuner.Duty(0.8)
	at := t0.Add(time.Hour).Add(-time.Minute) // raised a minute ago: a peak's floor would hold it
	for round := 0; round < 80; round++ {
		s := scene{mode: gpu.SharingMPS, embedCap: &half, changed: 10 * time.Minute}.state()
		s.Now = s.Now.Add(time.Duration(round) * 15 * time.Second)
		s.Snapshot.Usage = s.Snapshot.Usage[1:]
		s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true}
		s.Originals[pauseT.String()] = tuner.Duty(0)
		s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}.String()] = tuner.Fraction(1) // the tuner's cap
		c := tuner.Change{At: at, From: tuner.Duty(0.5), To: duty}
		s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
		s.History = map[string][]tuner.Change{pauseT.DomainKey(): {{At: t0.Add(time.Hour).Add(-time.Minute), From: tuner.Duty(0.5), To: tuner.Duty(0.8)}}}
		for _, a := range p.Decide(s) {
			switch a.Knob {
			case gpu.KnobPauseDuty:
				if want := max(0, duty-0.05); a.Want.Distance(want) > 1e-6 {
					t.Fatalf("round %d: pause %s -> %s, want %s", round, duty, a.Want, want)
				}
				duty, at = a.Want.(tuner.Duty), s.Now
			case gpu.KnobMPSActiveThreads:
				if duty > 0 {
					t.Fatalf("round %d: the cap given back under a %s pause", round, duty)
				}
				return
			}
		}
	}
	t.Fatalf("the pause at %s and the cap still in place after 20 minutes without a latency tenant", duty)
}

// TestMomentaryAbsenceHolds: chat, in its hysteresis band (the policy
// holds), is missing from a sample (its server restarting, or a sample
// that misses a process, across which the tenants package keeps its
// latency source and SLO status for its SLO window). Until chat has had
// no process on the GPU for that window, its latency is unknown and what
// the tuner set holds; after it, chat has left and the settings go back.
// Before, the one sample without chat's process gave the MPS cap back
// (restarting embed, a trainer whose restart costs 5 minutes) and the
// time-slice level the trial found, at once.
func TestMomentaryAbsenceHolds(t *testing.T) {
	band := tuner.FastSLO{Over: time.Minute, Total: 200, Good: 199} // burn 0.5: hold
	half := 0.5
	embedT := tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}
	levelT := tuner.Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice}
	tests := []struct {
		name    string
		mode    gpu.SharingMode
		restart time.Duration // embed's restart_cost
		there   time.Duration // how long chat was seen, in its band, before it went missing
		window  time.Duration // chat's SLO window (0: its status gives none, the default's)
		want    string        // what goes back once chat has been away for its window
	}{
		{"MPS: the cap holds", gpu.SharingMPS, 0, 15 * time.Second, 0, "GPU-0/mps_active_threads/pid2=55%"},
		{"MPS, a trainer costly to restart: the cap holds", gpu.SharingMPS, 5 * time.Minute, 30 * time.Minute, 10 * time.Minute, "GPU-0/mps_active_threads/pid2=100%"},
		{"time-sliced: the level holds", gpu.SharingTimeSlice, 0, 15 * time.Second, 0, "GPU-0/compute_timeslice=default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := scene{mode: tc.mode, embedCap: &half, fast: band, p99: 0.8, changed: time.Hour, restart: tc.restart}
			window := tc.window
			if window == 0 {
				window = tenant.DefaultSLOWindow
			}
			mk := func(at time.Duration, chatThere bool) *tuner.State {
				s := sc.state()
				s.Now = s.Now.Add(at)
				s.Snapshot.SLOs[0].Window = tc.window
				s.Originals[embedT.String()] = tuner.Fraction(1)
				if tc.mode == gpu.SharingTimeSlice {
					s.Snapshot.Readings.Devices[0].ComputeTimeSlice = gpu.TimeSliceShort
					s.Originals[levelT.String()] = tuner.Level(gpu.TimeSliceDefault)
					s.Changes[levelT.DomainKey()] = tuner.Change{At: t0, From: tuner.Level(gpu.TimeSliceDefault), To: tuner.Level(gpu.TimeSliceShort)}
				}
				if !chatThere {
					s.Snapshot.Usage = s.Snapshot.Usage[1:]
					d := &s.Snapshot.Readings.Devices[0]
					d.Processes = d.Processes[1:]
				}
				return s
			}
			p := New()
			for at := -tc.there; at < 0; at += 15 * time.Second {
				if acts := p.Decide(mk(at, true)); len(acts) != 0 {
					t.Fatalf("chat in its band: want a hold, got %v", acts)
				}
			}
			// chat was last seen 15 seconds before the first sample without it
			for at := time.Duration(0); at < window-15*time.Second; at += 15 * time.Second {
				for _, a := range acting(p.Decide(mk(at, false))) {
					t.Fatalf("%v without chat's process (its SLO status served, its window %v): %s=%s restart=%v (%s)", at+15*time.Second, window, a.Target, a.Want, a.Restart, a.Reason)
				}
			}
			at := window - 15*time.Second
			checkActions(t, p.Decide(mk(at, false)), []string{tc.want}, "no latency tenant is left")
		})
	}
}

// TestAwayAfterRestart: the exporter restarts; what the tuner set on the
// GPU (and its originals) comes back from the journal, while the policy
// starts with no memory of the latency tenants it saw. Its first sample
// misses chat's process (its server restarting). Chat, configured with an
// SLO, may have been on the GPU before the start, whether its SLO status
// is served (every source read) or not (sources read where their tenants
// run: chat has no usage on the host yet): it is away, and what the tuner
// set holds until chat's SLO window has passed since the policy's start;
// then it has left, and the settings go back. Before, the first sample
// without chat gave everything back at once (an MPS cap a restart of the
// client's, to be taken again when chat is back), and, until it judged by
// the configuration, still did so wherever chat's status was not served.
// A reload that dropped chat's SLO still gives them back at once.
func TestAwayAfterRestart(t *testing.T) {
	half := 0.5
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	lowered := &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}
	tests := []struct {
		name    string
		sc      scene
		prep    func(*tuner.State)
		window  time.Duration // chat's SLO window (0: its status gives none, the default's)
		dropped bool          // a reload dropped chat's SLO: nothing is away
		want    string        // what goes back once chat is gone
	}{
		{"the pause holds", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, tunersPause, 0, false,
			"GPU-0/pause_duty/pid2=75%"},
		{"the pause holds for chat's own window", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, tunersPause, 10 * time.Minute, false,
			"GPU-0/pause_duty/pid2=75%"},
		{"the MPS cap holds", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: 10 * time.Minute}, tunersCap, 0, false,
			"GPU-0/mps_active_threads/pid2=55%"},
		{"the energy clock lock holds", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: 3 * time.Minute}, nil, 0, false,
			"GPU-0/locked_clocks=unlocked"},
		{"the lowered power limit holds", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, tunersPower, 0, false,
			"GPU-0/power_limit=700W"},
		{"the time-slice level holds", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, tunersLevel, 0, false,
			"GPU-0/compute_timeslice=default"},
		{"chat's SLO dropped: the pause goes back at once", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, tunersPause, 0, true,
			"GPU-0/pause_duty/pid2=75%"},
	}
	for _, served := range []bool{true, false} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("status served %v: %s", served, tc.name), func(t *testing.T) {
				window := tc.window
				if window == 0 {
					window = tenant.DefaultSLOWindow
				}
				mk := func(at time.Duration) *tuner.State {
					s := tc.sc.state()
					s.Now = s.Now.Add(at)
					s.Snapshot.Usage = s.Snapshot.Usage[1:]
					d := &s.Snapshot.Readings.Devices[0]
					d.Processes = d.Processes[1:]
					s.Snapshot.SLOs[0].Window = tc.window
					s.Snapshot.Tenants[0].SLOWindow = window // as configured
					if tc.dropped {
						s.Snapshot.Tenants[0].SLOWindow = 0
					}
					if tc.dropped || !served {
						s.Snapshot.SLOs = nil
					}
					if tc.prep != nil {
						tc.prep(s)
					}
					return s
				}
				if tc.dropped {
					window = 0
				}
				p := New() // the restart: its first decision is the next
				for at := time.Duration(0); at < window; at += 15 * time.Second {
					for _, a := range acting(p.Decide(mk(at))) {
						t.Fatalf("%v after the start, chat not seen (its window %v): %s=%s restart=%v (%s)", at, window, a.Target, a.Want, a.Restart, a.Reason)
					}
				}
				checkActions(t, p.Decide(mk(window)), []string{tc.want}, "no latency tenant is left")
			})
		}
	}
}

// TestNothingHeldAtStart: where the tuner keeps no original of a setting
// it gives back on the GPU (none; an operator's cap; only another GPU's,
// whose UUID the GPU's begins; a knob the policy does not give back, or
// one whose name has a '/' after a given-back knob's), a GPU without a
// latency tenant at the policy's start has nothing to give back, and
// nothing is held. Where it keeps one, the setting is held, saying why:
// chat is away. (The hold is of what the policy gives back on the GPU:
// no key of the originals is taken apart to tell GPU and knob.)
func TestNothingHeldAtStart(t *testing.T) {
	half := 0.5
	powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	tests := []struct {
		name string
		orig tuner.Target // the tuner's original of the lowered power limit kept (zero: none)
		want []string     // what is held
	}{
		{"no setting of the tuner's", tuner.Target{}, nil},
		{"another GPU's power limit", tuner.Target{GPU: uuid0 + "0", Knob: gpu.KnobPowerLimit}, nil},
		{"a knob not given back", tuner.Target{GPU: uuid0, Knob: gpu.KnobMIGLayout}, nil},
		{"a knob named with a '/' after power_limit", tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit + "/x"}, nil},
		{"the tuner's power limit", powT, []string{"GPU-0/power_limit=700W"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingMPS, embedCap: &half, power: 490}.state() // embed's cap an operator's
			s.Snapshot.Usage = s.Snapshot.Usage[1:]
			d := &s.Snapshot.Readings.Devices[0]
			d.Processes = d.Processes[1:]
			tunersPower(s) // its original kept as tc.orig says
			delete(s.Originals, powT.String())
			if tc.orig != (tuner.Target{}) {
				s.Originals[tc.orig.String()] = tuner.Watts(700)
			}
			acts := New().Decide(s) // the restart: its first decision
			if got := acting(acts); len(got) > 0 {
				t.Fatalf("acted at the start: %v", got)
			}
			checkActions(t, acts, tc.want, "")
			for _, a := range acts {
				if !strings.Contains(a.Held, "chat (SLO window 5m0s) may have been on it before") {
					t.Errorf("%s held: %q, want chat named away", a.Target, a.Held)
				}
			}
		})
	}
}
