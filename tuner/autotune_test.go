package tuner

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// scene is a share domain for the autotune table: chat (latency, p99 <=
// 1s, share.min 0.3) beside embed (batch, share.min 0.1).
type scene struct {
	mode      gpu.SharingMode
	embedCap  *float64 // nil: no embed tenant
	pending   *Fraction
	fast      FastSLO // chat's
	p99       float64 // chat's window p99, seconds
	changed   time.Duration
	power     float64
	timeSlice gpu.TimeSliceLevel
	// maxMHz is the GPU's maximum SM clock (0: not reported); lock is the
	// clock lock in place, ours when the tuner set it clockAgo before.
	maxMHz   float64
	restart  time.Duration // embed's restart_cost
	lock     *ClockRange
	ours     bool
	clockAgo time.Duration
}

func (sc scene) state() *State {
	chatP := mpsProc(1, gpu.Float(1))
	procs := []gpu.Process{chatP}
	usage := []tenant.Usage{{Tenant: "chat", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{1}}}
	if sc.embedCap != nil {
		procs = append(procs, mpsProc(2, sc.embedCap))
		usage = append(usage, tenant.Usage{Tenant: "embed", Class: gpu.ClassBatch, UUID: uuid0, PIDs: []uint32{2}})
	}
	if sc.mode != gpu.SharingMPS {
		for i := range procs {
			procs[i].Type, procs[i].MPSActiveThreads = gpu.ProcessCompute, nil
		}
	}
	d := gpu.Device{UUID: uuid0, Up: true, Mode: sc.mode, Processes: procs, ComputeTimeSlice: sc.timeSlice}
	if sc.power > 0 {
		d.PowerLimitW = gpu.Float(sc.power)
	}
	if sc.maxMHz > 0 {
		d.SMClockMaxHz, d.SMClockHz = gpu.Float(sc.maxMHz*1e6), gpu.Float(sc.maxMHz*1e6)
		d.ClocksLocked = gpu.Bool(sc.lock != nil)
		if sc.lock != nil {
			d.SMClockHz = gpu.Float(float64(sc.lock.MaxMHz) * 1e6)
		}
	}
	now := t0.Add(time.Hour)
	s := &State{Now: now, Snapshot: snapshot(now, []gpu.Device{d}, usage), Changes: map[string]Change{}, Pending: map[string]Fraction{},
		Originals: map[string]Value{}, Fast: map[string]FastSLO{"chat": sc.fast}}
	s.Snapshot.Tenants = []tenant.Info{{Name: "chat", Class: gpu.ClassLatency, Priority: 10, ShareMin: 0.3, ShareMax: 1}, {Name: "embed", Class: gpu.ClassBatch, Priority: 1, ShareMin: 0.1, ShareMax: 1, RestartCost: sc.restart}}
	s.Snapshot.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 1, GoodKnown: true, WindowRequests: 100,
		Quantiles: map[float64]float64{0.5: sc.p99 / 3, 0.9: sc.p99 / 2, 0.99: sc.p99}}}}
	if sc.changed > 0 {
		s.Changes[Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads}.DomainKey()] = Change{At: now.Add(-sc.changed)}
	}
	if sc.ours {
		s.Changes[Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}.DomainKey()] = Change{At: now.Add(-sc.clockAgo), To: *sc.lock}
		s.Originals[Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}.String()] = ClockRange{}
	}
	if sc.pending != nil {
		s.Pending[Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}.String()] = *sc.pending
	}
	return s
}

func TestAutotuneDecide(t *testing.T) {
	violating := FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := FastSLO{Over: time.Minute, Total: 100, Good: 100}
	band := FastSLO{Over: time.Minute, Total: 200, Good: 199} // burn 0.5
	few := FastSLO{Over: time.Minute, Total: 5, Good: 3}
	half, tenth := 0.5, 0.1
	full := 1.0
	pend := Fraction(0.5)
	tests := []struct {
		name   string
		sc     scene
		want   []string // "target=value" of each action
		reason string   // in the first action's reason
		relax  bool
	}{
		{"violation caps the batch tenant", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2}, []string{"GPU-0/mps_active_threads/pid2=55%"}, "chat violates its SLO", false},
		{"violation with a cap goes on", scene{mode: gpu.SharingMPS, embedCap: &half, fast: violating, p99: 2}, []string{"GPU-0/mps_active_threads/pid2=35%"}, "was 50%", false},
		{"pending value counts, not the effective one", scene{mode: gpu.SharingMPS, embedCap: &full, pending: &pend, fast: violating, p99: 2}, []string{"GPU-0/mps_active_threads/pid2=35%"}, "", false},
		{"costly restarts: the batch share halved", scene{mode: gpu.SharingMPS, embedCap: &full, fast: violating, p99: 2, restart: 5 * time.Minute}, []string{"GPU-0/mps_active_threads/pid2=50%"}, "a restart costs them 5m0s", false},
		{"costly restarts: halved again from a cap", scene{mode: gpu.SharingMPS, embedCap: &half, fast: violating, p99: 2, restart: 5 * time.Minute, changed: 2 * time.Minute}, []string{"GPU-0/mps_active_threads/pid2=25%"}, "", false},
		{"costly restarts: the last change not yet seen", scene{mode: gpu.SharingMPS, embedCap: &half, fast: violating, p99: 2, restart: 5 * time.Minute, changed: 30 * time.Second}, nil, "", false},
		{"costly restarts: slack is not worth a release", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, restart: 5 * time.Minute}, nil, "", false},
		{"at share.min: nothing more (anti-windup)", scene{mode: gpu.SharingMPS, embedCap: &tenth, fast: violating, p99: 2}, nil, "", false},
		{"too few requests: hold", scene{mode: gpu.SharingMPS, embedCap: &half, fast: few, p99: 2}, nil, "", false},
		{"hysteresis band: hold", scene{mode: gpu.SharingMPS, embedCap: &half, fast: band, p99: 0.8}, nil, "", false},
		{"slack gives share back", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, []string{"GPU-0/mps_active_threads/pid2=55%"}, "every latency SLO has slack", true},
		{"slack, but changed recently: dwell", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: time.Minute}, nil, "", false},
		{"small reservation released whole", scene{mode: gpu.SharingMPS, embedCap: gpu.Float(0.9), fast: fine, p99: 0.3}, []string{"GPU-0/mps_active_threads/pid2=100%"}, "", true},
		{"slack and uncapped: nothing", scene{mode: gpu.SharingMPS, embedCap: &full, fast: fine, p99: 0.3}, nil, "", false},
		{"latency tenant alone with deep slack: lower power", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 700}, []string{"GPU-0/power_limit=490W"}, "energy", true},
		{"deep slack, clock known: lower the clock for energy", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 700, maxMHz: 1980}, []string{"GPU-0/locked_clocks=1782-1782MHz"}, "for energy", true},
		{"deep slack under our lock: one step lower", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: &ClockRange{MinMHz: 1584, MaxMHz: 1584}, ours: true, clockAgo: 3 * time.Minute}, []string{"GPU-0/locked_clocks=1386-1386MHz"}, "70% of its maximum", true},
		{"deep slack at the energy floor: hold", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: &ClockRange{MinMHz: 990, MaxMHz: 990}, ours: true, clockAgo: 3 * time.Minute}, nil, "", false},
		{"deep slack, lowered a minute ago: dwell", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: &ClockRange{MinMHz: 1584, MaxMHz: 1584}, ours: true, clockAgo: time.Minute}, nil, "", false},
		{"slack lost under our lock: one step back", scene{mode: gpu.SharingMPS, fast: band, p99: 0.8, maxMHz: 1980, lock: &ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: 3 * time.Minute}, []string{"GPU-0/locked_clocks=1584-1584MHz"}, "lost its slack", false},
		{"slack lost one step below the maximum: unlocked", scene{mode: gpu.SharingMPS, fast: band, p99: 0.8, maxMHz: 1980, lock: &ClockRange{MinMHz: 1782, MaxMHz: 1782}, ours: true, clockAgo: 3 * time.Minute}, []string{"GPU-0/locked_clocks=unlocked"}, "lost its slack", false},
		{"slack lost, stepped a moment ago: wait", scene{mode: gpu.SharingMPS, fast: band, p99: 0.8, maxMHz: 1980, lock: &ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: 30 * time.Second}, nil, "", false},
		{"violation under our lock: the clock back", scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: &ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: time.Minute}, []string{"GPU-0/locked_clocks=unlocked"}, "chat violates its SLO", false},
		{"deep slack under someone else's lock: left alone", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: &ClockRange{MinMHz: 1400, MaxMHz: 1400}}, nil, "", false},
		{"deep slack with batch work: no energy saving", scene{mode: gpu.SharingMPS, embedCap: &full, fast: fine, p99: 0.3, maxMHz: 1980}, nil, "", false},
		{"time slice: violation shortens slices", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 2, timeSlice: gpu.TimeSliceDefault}, []string{"GPU-0/compute_timeslice=short"}, "no per-process weights", false},
		{"time slice: already short", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: violating, p99: 2, timeSlice: gpu.TimeSliceShort}, nil, "", false},
		{"time slice: slack returns to default", scene{mode: gpu.SharingTimeSlice, embedCap: &full, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, []string{"GPU-0/compute_timeslice=default"}, "slack", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.sc.state()
			acts := NewAutotune().Decide(st)
			var got []string
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("actions %q, want %q", got, tc.want)
			}
			if len(acts) == 0 {
				return
			}
			if !strings.Contains(acts[0].Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", acts[0].Reason, tc.reason)
			}
			if acts[0].Relax != tc.relax {
				t.Errorf("relax %v, want %v", acts[0].Relax, tc.relax)
			}
			if acts[0].Want.Kind() == "fraction" && !acts[0].Restart {
				t.Error("an MPS cap on a batch client without a restart: it would never take effect")
			}
			// Pure: the same state gives the same actions.
			if again := NewAutotune().Decide(st); len(again) != len(acts) || again[0].Want != acts[0].Want {
				t.Errorf("not deterministic: %v then %v", acts, again)
			}
		})
	}
}
