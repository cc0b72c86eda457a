package rebalance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A batch tenant held far below its share.max to protect a latency tenant
// is moved to a GPU with room once the squeeze has lasted and the work it
// costs outweighs the move.
func TestPlanSqueezedMove(t *testing.T) {
	r := Default()
	now := t0.Add(time.Hour)
	tests := []struct {
		name     string
		trainCap float64 // each of train's two processes
		pending  *tuner.Fraction
		since    time.Duration // squeezed for
		restart  time.Duration
		busyB    float64
		busyC    float64
		moved    time.Duration // train was moved this long ago (0: never)
		want     string        // moves, or "" for no plan
		paused   tuner.Duty    // train's pause (pause_duty)
		// effective, when set, is the cap the MPS actuator has in
		// effect for train's processes, whose readings give none (NVML)
		effective *tuner.Fraction
	}{
		{"squeezed for 5m: moved to the idlest GPU", 0.125, nil, 5 * time.Minute, 5 * time.Minute, 0.3, 0.2, 0, "20->GPU-c 21->GPU-c", 0, nil},
		{"a pending cap counts", 0.45, ptr(tuner.Fraction(0.1)), 5 * time.Minute, 0, 0.3, 0.2, 0, "20->GPU-c 21->GPU-c", 0, nil},
		{"not long enough", 0.125, nil, time.Minute, 0, 0.3, 0.2, 0, "", 0, nil},
		{"not squeezed (caps near share.max)", 0.45, nil, 5 * time.Minute, 0, 0.3, 0.2, 0, "", 0, nil},
		{"squeeze worth less than the move", 0.35, nil, 5 * time.Minute, 10 * time.Minute, 0.3, 0.2, 0, "", 0, nil},
		{"no GPU with room", 0.125, nil, 5 * time.Minute, 0, 0.9, 0.8, 0, "", 0, nil},
		{"moved recently: held", 0.125, nil, 5 * time.Minute, 5 * time.Minute, 0.3, 0.2, 10 * time.Minute, "", 0, nil},
		{"caps near share.max, paused 60% of every period: squeezed, moved", 0.45, nil, 5 * time.Minute, 0, 0.3, 0.2, 0, "20->GPU-c 21->GPU-c", 0.6, nil},
		{"caps near share.max, paused 10%: not squeezed", 0.45, nil, 5 * time.Minute, 0, 0.3, 0.2, 0, "", 0.1, nil},
		// (before, a cap not read counted as 1: an NVML host's squeeze went unseen)
		{"caps not read, in effect per the actuator: squeezed, moved", 0, nil, 5 * time.Minute, 0, 0.3, 0.2, 0, "20->GPU-c 21->GPU-c", 0, ptr(tuner.Fraction(0.125))},
		{"caps not read, none in effect: uncapped", 0, nil, 5 * time.Minute, 0, 0.3, 0.2, 0, "", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := rebalanceState(tc.busyB, tc.busyC, 40*gib, 1) // chat meets its SLO
			d := &st.Snapshot.Readings.Devices[0]
			trainCap := gpu.Float(tc.trainCap)
			if tc.trainCap == 0 {
				trainCap = nil // not read
			}
			d.Processes = []gpu.Process{mpsProc(10, gpu.Float(1)), mpsProc(20, trainCap), mpsProc(21, trainCap), mpsProc(30, gpu.Float(1))}
			if tc.effective != nil {
				st.Effective = map[string]tuner.Fraction{}
				for _, pid := range []uint32{20, 21} {
					st.Effective[tuner.Target{GPU: "GPU-a", Knob: gpu.KnobMPSActiveThreads, PID: pid}.String()] = *tc.effective
				}
			}
			st.Snapshot.Tenants[1].RestartCost = tc.restart
			st.Pending = map[string]tuner.Fraction{}
			if tc.paused > 0 {
				pt := tuner.Target{GPU: "GPU-a", Knob: gpu.KnobPauseDuty, PID: 20}
				st.Originals = map[string]tuner.Value{pt.String(): tuner.Duty(0)}
				st.Changes = map[string]tuner.Change{pt.String(): {At: now.Add(-time.Minute), To: tc.paused}}
				st.Paused = map[string]tuner.Target{tuner.PauseKey("GPU-a", "train"): pt}
			}
			if tc.pending != nil {
				for _, pid := range []uint32{20, 21} {
					st.Pending[tuner.Target{GPU: "GPU-a", Knob: gpu.KnobMPSActiveThreads, PID: pid}.String()] = *tc.pending
				}
			}
			if got := r.Squeezed(st); tc.want != "" && got["train"] == 0 {
				t.Fatalf("squeezed %v, want train", got)
			}
			p, ok := r.PlanRebalance(st, tuner.RebalanceInput{SqueezedSince: map[string]time.Time{"train": now.Add(-tc.since)}, Moved: moved(now, tc.moved)})
			if ok != (tc.want != "") {
				t.Fatalf("plan %v (%v), want %q", p, ok, tc.want)
			}
			if !ok {
				return
			}
			if s := moveList(p); s != tc.want {
				t.Errorf("moves %q, want %q", s, tc.want)
			}
			if !strings.Contains(p.Reason, "held to") || !strings.Contains(p.Reason, "expected gain") {
				t.Errorf("reason %q", p.Reason)
			}
		})
	}
}

func moved(now time.Time, ago time.Duration) map[string]time.Time {
	if ago == 0 {
		return nil
	}
	return map[string]time.Time{"train": now.Add(-ago)}
}

func ptr[T any](v T) *T { return &v }

func moveList(p gpu.Plan) string {
	var out []string
	for _, m := range p.Moves {
		out = append(out, fmt.Sprintf("%d->%s", m.PID, m.ToUUID))
	}
	return strings.Join(out, " ")
}
