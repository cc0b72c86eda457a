package autotune

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A latency tenant whose source is down, or whose requests come below its
// SLO's min_throughput, is unknown: nothing is given back, lowered, raised
// or released on it. A dead source's window empties and would otherwise
// read as idle, which has slack.
func TestAutotuneUnknownTenant(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	none := tuner.FastSLO{Over: time.Minute}
	full, half := 1.0, 0.5
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	tests := []struct {
		name   string
		sc     scene
		duty   tuner.Duty // the pause in place (0: none, and no pause actuator)
		want   []string
		reason string
	}{
		{"source down, its window emptied: no share given back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: none, down: true, idle: true}, 0, nil, ""},
		{"source down, the fast window's misses still there: no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, down: true}, 0, nil, ""},
		{"source down, deep slack alone: the clock not lowered", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, down: true}, 0, nil, ""},
		{"source down, deep slack alone: the power limit not lowered", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 700, down: true}, 0, nil, ""},
		{"source down: the time slice kept", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: none, timeSlice: gpu.TimeSliceShort, down: true, idle: true}, 0, nil, ""},
		{"source down, its window emptied: the pause kept", scene{mode: gpu.SharingMPS, embedCap: &full, fast: none, down: true, idle: true}, 0.5, nil, ""},
		{"below min_throughput, violating: no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, floor: 1}, 0, nil, ""},
		{"below min_throughput, violating: no pause", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, floor: 1}, 0.3, nil, ""},
		{"below min_throughput with slack: no share given back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, floor: 1}, 0, nil, ""},
		{"below min_throughput with slack: the pause kept", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, floor: 1}, 0.5, nil, ""},
		{"below min_throughput with deep slack alone: the clock not lowered", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, floor: 1}, 0, nil, ""},
		{"at min_throughput: judged", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, floor: 0.3}, 0, []string{"GPU-0/mps_active_threads/pid2=55%"}, "chat violates its SLO"},
		{"idle with its source up, a floor set: slack as without one", scene{mode: gpu.SharingMPS, embedCap: &half, fast: none, idle: true, floor: 1}, 0, []string{"GPU-0/mps_active_threads/pid2=55%"}, "every latency SLO has slack"},
		{"idle with its source up: the pause given back", scene{mode: gpu.SharingMPS, embedCap: &full, fast: none, idle: true}, 0.5, []string{"GPU-0/pause_duty/pid2=45%"}, "slack"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			if tc.duty > 0 {
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
				c := tuner.Change{At: s.Now.Add(-2 * time.Minute), To: tc.duty}
				s.Originals[pauseT.String()] = tuner.Duty(0)
				s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
			}
			checkActions(t, New().Decide(s), tc.want, tc.reason)
		})
	}
}
