package autotune

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A latency tenant whose source is down, or whose requests come below its
// SLO's min_throughput, or whose tracker has only its baseline (the first
// read, at start or after a reload restarted its counters), is unknown:
// nothing is given back, lowered, raised or released on it. A dead
// source's window empties, and a baseline's holds nothing yet: either
// would otherwise read as idle, which has slack.
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
		{"a baseline only, its window empty: no share given back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: none, idle: true, baseline: true}, 0, nil, ""},
		{"a baseline only, its window empty: the pause kept", scene{mode: gpu.SharingMPS, embedCap: &full, fast: none, idle: true, baseline: true}, 0.5, nil, ""},
		{"a baseline only, its window empty: the time slice kept", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: none, timeSlice: gpu.TimeSliceShort, idle: true, baseline: true}, 0, nil, ""},
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

// A reload that restarts a busy tenant's tracker (its SLO target changed)
// leaves, after the new tracker's first read, a status of the source up
// and no request in the window: the read is the baseline the new counters
// start from. It was read as idle (slack, deep slack): the MPS share and
// the pause given back on a tenant serving about 1200 requests a window.
// It holds until the next read counts them.
func TestRestartedTrackerNotIdle(t *testing.T) {
	fx := func(n string) []byte {
		b, err := os.ReadFile("../../latency/testdata/latency/" + n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	clk := gpu.NewManualClock(t0)
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fx("vllm-1.txt")}}
	p := latency.NewPool(latency.Options{Clock: clk, AppMetrics: app})
	spec := func(key string, target time.Duration) latency.Spec {
		return latency.Spec{Name: "chat", Key: key, Window: 5 * time.Minute,
			Source:    &latency.Source{URL: "sim://chat", Preset: latency.PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
			Objective: &latency.Objective{Quantile: 0.99, Target: target}}
	}
	p.Set([]latency.Spec{spec("a", 300*time.Millisecond)}, 15*time.Second)
	p.Refresh(context.Background())
	clk.Advance(15 * time.Second)
	app.Set("chat", fx("vllm-2.txt"))
	p.Refresh(context.Background())
	if before, _ := p.Status("chat"); before.WindowRequests == 0 {
		t.Fatalf("the tenant is idle before the reload: %+v", before)
	}
	p.Set([]latency.Spec{spec("b", 500*time.Millisecond)}, 15*time.Second) // the reload: a new tracker
	clk.Advance(15 * time.Second)
	p.Refresh(context.Background())
	after, _ := p.Status("chat")
	if !after.SourceUp || after.WindowRequests != 0 {
		t.Fatalf("the new tracker's first read: up %v, %v requests in the window; want up, none", after.SourceUp, after.WindowRequests)
	}
	half, full := 0.5, 1.0
	for _, tc := range []struct {
		name string
		cap  *float64
		duty tuner.Duty
	}{{"the MPS share kept", &half, 0}, {"the pause kept", &full, 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			// the fast window starts over with the new tracker: nothing over it
			s := scene{mode: gpu.SharingMPS, embedCap: tc.cap, fast: tuner.FastSLO{}}.state()
			s.Snapshot.SLOs[0].Status = after
			if tc.duty > 0 {
				pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
				c := tuner.Change{At: s.Now.Add(-2 * time.Minute), To: tc.duty}
				s.Originals[pauseT.String()] = tuner.Duty(0)
				s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
			}
			checkActions(t, New().Decide(s), nil, "")
		})
	}
}

// TestLatencyTenantWithoutStatusNeverCapped: search, a latency tenant
// without an SLO status (no latency_source, or its tracker not there yet),
// runs beside chat and embed. Its own share is never taken: a violation
// of chat caps and pauses embed only. Before, search was capped and
// restarted like a batch tenant.
func TestLatencyTenantWithoutStatusNeverCapped(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	for _, pause := range []bool{false, true} {
		st := scene{mode: gpu.SharingMPS, embedCap: gpu.Float(1), fast: violating, p99: 2}.state()
		d := &st.Snapshot.Readings.Devices[0]
		d.Processes = append(d.Processes, mpsProc(3, gpu.Float(1)))
		st.Snapshot.Usage = append(st.Snapshot.Usage, tenant.Usage{Tenant: "search", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{3}})
		st.Snapshot.Tenants = append(st.Snapshot.Tenants, tenant.Info{Name: "search", Class: gpu.ClassLatency, Priority: 10, ShareMin: 0, ShareMax: 1})
		st.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: pause}
		acts := New().Decide(st)
		embed := false
		for _, a := range acts {
			if a.Tenant == "search" {
				t.Errorf("pause %v: latency tenant search: %s %s -> %s (restart %v): %s", pause, a.Knob, a.Current, a.Want, a.Restart, a.Reason)
			}
			embed = embed || a.Tenant == "embed"
		}
		if !embed {
			t.Errorf("pause %v: chat violates and embed is neither capped nor paused: %v", pause, acts)
		}
	}
}
