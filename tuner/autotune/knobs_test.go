package autotune

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A rule whose knob the GPU does not have (State.Knobs: its backends list
// it out) or the operator has switched off (State.Drives false: disabled,
// or opt-in and not enabled) proposes no change of it, and the round goes
// on as if the rule did not apply: a violation blamed on DVFS on a GPU
// whose clock cannot be locked gets the cap or the pause alone, the
// energy saving turns to the power limit, a time-sliced GPU whose level
// cannot be set is answered by the pause. A knob switched off is missing
// in the same way as one listed out: its change would be dropped by the
// tuner, and the round would do nothing. What the tuner set itself it
// gives back all the same (the executor lets it through). A GPU the state
// says nothing of keeps every knob.
func TestUnavailableKnobs(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	band := tuner.FastSLO{Over: time.Minute, Total: 200, Good: 199} // burn 0.5
	full := 1.0
	dvfs := scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, maxMHz: 1980}
	alone := scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980}
	mpsHot := scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}
	energy := scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 700, maxMHz: 1980}
	timeSliced := scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 2, timeSlice: gpu.TimeSliceDefault}
	weighted := &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort, Log: []gpu.VGPUSchedulerLogEntry{{Runlist: 0, Weight: 4}, {Runlist: 1, Weight: 1}}}
	tests := []struct {
		name   string
		sc     scene
		off    []gpu.Knob // listed out on the GPU, or switched off
		pause  bool       // pause_duty is enabled
		sched  *gpu.VGPUScheduler
		want   []string
		reason string
	}{
		{"DVFS violation, the clock lockable: the cap and the lock", dvfs, nil, false, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%", "GPU-0/locked_clocks=1980-1980MHz"}, "chat violates its SLO"},
		{"DVFS violation, no clock lock: the cap alone", dvfs, []gpu.Knob{gpu.KnobLockedClocks}, false, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "chat violates its SLO"},
		{"DVFS violation, no clock lock, the pause: the pause alone", dvfs, []gpu.Knob{gpu.KnobLockedClocks}, true, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "no restart"},
		{"DVFS violation alone on the GPU, no clock lock: nothing to propose", alone, []gpu.Knob{gpu.KnobLockedClocks}, false, nil,
			nil, ""},
		{"DVFS violation, no MPS cap: the lock alone", dvfs, []gpu.Knob{gpu.KnobMPSActiveThreads}, false, nil,
			[]string{"GPU-0/locked_clocks=1980-1980MHz"}, "between requests"},
		{"a violation, no MPS cap (no restart hook), the pause: the pause alone", mpsHot, []gpu.Knob{gpu.KnobMPSActiveThreads}, true, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "no restart"},
		{"a violation, neither MPS cap nor pause: nothing", mpsHot, []gpu.Knob{gpu.KnobMPSActiveThreads}, false, nil,
			nil, ""},
		{"deep slack, no clock lock: the power limit for energy", energy, []gpu.Knob{gpu.KnobLockedClocks}, false, nil,
			[]string{"GPU-0/power_limit=490W"}, "lower the power limit"},
		{"deep slack, neither clock lock nor power limit: nothing", energy, []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}, false, nil,
			nil, ""},
		{"time-sliced, a sustained violation, no level: the pause", timeSliced, []gpu.Knob{gpu.KnobComputeTimeSlice}, true, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "no restart"},
		{"time-sliced, a sustained violation, neither level nor pause: nothing", timeSliced, []gpu.Knob{gpu.KnobComputeTimeSlice}, false, nil,
			nil, ""},
		{"vGPU, a violation, no scheduler: nothing", scene{mode: gpu.SharingVGPU, embedCap: &full, fast: violating, p99: 2}, []gpu.Knob{gpu.KnobVGPUScheduler}, false, weighted,
			nil, ""},
		{"violation under our lock, the lock no longer listed: the clock back", scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: time.Minute},
			[]gpu.Knob{gpu.KnobLockedClocks}, false, nil, []string{"GPU-0/locked_clocks=unlocked"}, "give the SM clock back"},
		{"slack lost under our lock, the lock no longer listed: one step back", scene{mode: gpu.SharingMPS, fast: band, p99: 0.8, maxMHz: 1980, lock: &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: 3 * time.Minute},
			[]gpu.Knob{gpu.KnobLockedClocks}, false, nil, []string{"GPU-0/locked_clocks=1584-1584MHz"}, "lost its slack"},
	}
	for _, tc := range tests {
		for _, how := range []string{"listed out", "switched off"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				s := tc.sc.state()
				d := &s.Snapshot.Readings.Devices[0]
				if d.SMClockMaxHz != nil && tc.sc.lock == nil {
					d.SMClockHz = gpu.Float(345e6) // lowered between requests
				}
				d.Scheduler = tc.sched
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: tc.pause}
				var ks []tuner.KnobAvailability
				for _, k := range tc.off {
					if how == "switched off" {
						s.Drives[k] = false
					} else {
						ks = append(ks, tuner.KnobAvailability{Knob: k, Driven: true})
					}
				}
				s.Knobs = map[string][]tuner.KnobAvailability{uuid0: ks}
				checkActions(t, New().Decide(s), tc.want, tc.reason)
			})
		}
	}
}
