package autotune

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// churnRound is a round on an MPS GPU where restarting the batch tenant
// is costly: latency tenant lat (pid 1, its counters at requests) beside
// batch tenant job (pid jobPID; none where job is ""), paused where
// pausedJob is held in force.
func churnRound(now time.Time, lat, job string, jobPID uint32, requests float64, pausedJob string) *tuner.State {
	procs := []gpu.Process{mpsProc(1, gpu.Float(1))}
	usage := []tenant.Usage{{Tenant: lat, Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{1}}}
	tenants := []tenant.Info{{Name: lat, Class: gpu.ClassLatency, Priority: 10, ShareMin: 0.3, ShareMax: 1}}
	if job != "" {
		procs = append(procs, mpsProc(jobPID, gpu.Float(0.5)))
		usage = append(usage, tenant.Usage{Tenant: job, Class: gpu.ClassBatch, UUID: uuid0, PIDs: []uint32{jobPID}})
		tenants = append(tenants, tenant.Info{Name: job, Class: gpu.ClassBatch, Priority: 1, ShareMin: 0.1, ShareMax: 1, RestartCost: 5 * time.Minute})
	}
	d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}
	s := &tuner.State{Now: now, Snapshot: snapshot(now, []gpu.Device{d}, usage), Changes: map[string]tuner.Change{}, Pending: map[string]tuner.Fraction{},
		Originals: map[string]tuner.Value{}, Fast: map[string]tuner.FastSLO{lat: {Over: time.Minute, Total: 1000, Good: 992}},
		Drives: map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}}
	s.Snapshot.Tenants = tenants
	s.Snapshot.SLOs = []tenant.SLOStatus{{Tenant: lat, Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, TargetSeconds: 1, GoodKnown: true, WindowRequests: 100,
		RequestsTotal: requests, GoodRequestsTotal: requests, Quantiles: map[float64]float64{0.5: 0.3, 0.9: 0.45, 0.99: 0.9}}}}
	if pausedJob != "" {
		t := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 9}
		s.Originals[t.String()] = tuner.Duty(0)
		s.Paused = map[string]tuner.Target{tuner.PauseKey(uuid0, pausedJob): t}
	}
	return s
}

// Batch jobs that come and go as tenants of their own (a pod label's
// value each), beside latency tenants a reload replaces as often, leave
// the fast loop's trail no MPS share or request points of each: 300
// jobs, a minute each, left 300 shares and 300 latency tenants' points;
// now those of the last few minutes. A job gone whose pause is still in
// force keeps its share.
func TestTrailForgetsGoneTenants(t *testing.T) {
	p := New()
	now := t0
	for i := range 300 {
		job, lat := fmt.Sprintf("job-%d", i), fmt.Sprintf("chat-%d", i)
		for r := range 4 {
			p.Decide(churnRound(now, lat, job, uint32(100+i), float64(100*(r+1)), ""))
			now = now.Add(15 * time.Second)
		}
	}
	if n := len(p.trail.caps); n > 8 || n == 0 {
		t.Errorf("%d MPS shares kept after 300 jobs, want the last few (1..8)", n)
	}
	if n := len(p.trail.pts); n > 12 || n == 0 {
		t.Errorf("%d latency tenants' points kept after 300 of them, want the last few (1..12)", n)
	}
	// the latency tenant a reload replaced 75 s ago keeps its points: a
	// raise ahead of its load rise is judged on them (aheadGone)
	if _, ok := p.trail.pts["chat-298"]; !ok {
		t.Errorf("the points of chat-298, replaced 75 s ago, were forgotten within %v", trailKeep)
	}
	// a job gone with its pause in force: its share stays for its return
	p.Decide(churnRound(now, "chat", "held", 7, 100, ""))
	for r := range 20 {
		now = now.Add(15 * time.Second)
		p.Decide(churnRound(now, "chat", "", 0, float64(200+100*r), "held"))
	}
	if _, ok := p.trail.capSeen(uuid0, "held"); !ok {
		t.Errorf("the share of a job paused was forgotten while its pause is in force")
	}
	now = now.Add(15 * time.Second)
	p.Decide(churnRound(now, "chat", "", 0, 5000, ""))
	if _, ok := p.trail.capSeen(uuid0, "held"); !ok {
		t.Errorf("the share of a job was forgotten as its pause ended, before it was gone %v", tuner.GoneAfter)
	}
	now = now.Add(tuner.GoneAfter)
	p.Decide(churnRound(now, "chat", "", 0, 6000, ""))
	if _, ok := p.trail.capSeen(uuid0, "held"); ok {
		t.Errorf("the share of a job kept %v after its pause ended and it was gone", tuner.GoneAfter)
	}
}
