package autotune

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestSettingsGivenBackWithoutLatencyTenant: chat, the GPU's only latency
// tenant, leaves it (its job ended) or a reload drops its SLO. Nothing
// on the GPU is protected any more: the pause, the MPS cap, the clock
// lock, the power limit and the time-slice level the tuner set go back
// as on slack (the pause first, at the usual pace, with no anticipation
// floor), and an operator's setting stays. Before, the policy proposed
// nothing on such a GPU, and each setting stayed for good (an idle chat,
// whose SLO has slack, got them back).
func TestSettingsGivenBackWithoutLatencyTenant(t *testing.T) {
	half := 0.5
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	lowered := &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}
	tests := []struct {
		name  string
		sc    scene
		duty  tuner.Duty // the pause in place, set 10 minutes ago (0: none, no pause actuator)
		level bool       // the time-slice level is the tuner's (its original kept)
		power bool       // the power limit is the tuner's, lowered from 700 W
		want  []string
	}{
		{"the pause goes back a step", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0.8, false, false,
			[]string{"GPU-0/pause_duty/pid2=75%"}},
		{"the MPS cap goes back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: 10 * time.Minute}, 0, false, false,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}},
		{"an MPS cap the tuner did not set stays", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, 0, false, false,
			nil},
		{"the energy clock lock goes back", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: 3 * time.Minute}, 0, false, false,
			[]string{"GPU-0/locked_clocks=unlocked"}},
		{"the clock lock, set a minute ago: dwell", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: time.Minute}, 0, false, false,
			nil},
		{"an operator's clock lock stays", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered}, 0, false, false,
			nil},
		{"the lowered power limit goes back", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, 0, false, true,
			[]string{"GPU-0/power_limit=700W"}},
		{"the time-slice level goes back", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, 0, true, false,
			[]string{"GPU-0/compute_timeslice=default"}},
		{"an operator's time-slice level stays", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, 0, false, false,
			nil},
	}
	for _, how := range []string{"chat left the GPU", "a reload dropped chat's SLO"} {
		for _, tc := range tests {
			t.Run(how+": "+tc.name, func(t *testing.T) {
				s := tc.sc.state()
				if how == "chat left the GPU" {
					s.Snapshot.Usage = s.Snapshot.Usage[1:]
				} else {
					s.Snapshot.SLOs = nil
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
				acts := New().Decide(s)
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
	p := New()
	duty := tuner.Duty(0.8)
	at := t0.Add(time.Hour).Add(-time.Minute) // raised a minute ago: a peak's floor would hold it
	for round := 0; round < 80; round++ {
		s := scene{mode: gpu.SharingMPS, embedCap: &half, changed: 10 * time.Minute}.state()
		s.Now = s.Now.Add(time.Duration(round) * 15 * time.Second)
		s.Snapshot.Usage = s.Snapshot.Usage[1:]
		s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true}
		s.Originals[pauseT.String()] = tuner.Duty(0)
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
