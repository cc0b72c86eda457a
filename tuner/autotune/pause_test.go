package autotune

import (
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
		{"time-sliced, no level to try: the pause", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 0.9, timeSlice: gpu.TimeSliceDefault}, true, 0, 0, nil,
			[]string{"GPU-0/pause_duty/pid2=30%"}, ""},
		{"violation goes on: up to the ceiling", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.6, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 45},
			[]string{"GPU-0/pause_duty/pid2=80%"}, "since the last pause change"},
		{"the last pause holds since it was made: wait, no cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.3, 20 * time.Second, &tuner.RequestCount{Total: 50, Good: 50},
			nil, ""},
		{"too few requests since the pause: wait", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.3, 5 * time.Second, &tuner.RequestCount{Total: 5, Good: 5},
			nil, ""},
		{"at the ceiling and still violating: the MPS cap", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, true, 0.8, 2 * time.Minute, nil,
			[]string{"GPU-0/mps_active_threads/pid2=55%"}, "reserve"},
		{"slack: the pause given back first", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, true, 0.5, 2 * time.Minute, nil,
			[]string{"GPU-0/pause_duty/pid2=45%"}, "slack"},
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
