package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// forgettingPause is a reportingPause that drops a tenant's failed
// freezes when told.
type forgettingPause struct{ reportingPause }

func (p *forgettingPause) ForgetPauseFailures(tenant string) { delete(p.failures, tenant) }

// pauseEach pauses, once, every batch tenant of the snapshot on the GPU
// it runs on, by its first process.
func pauseEach() Decider {
	done := map[string]bool{}
	return deciderFunc(func(s *State) []Action {
		var out []Action
		for _, u := range s.Snapshot.Usage {
			if done[u.Tenant] || u.Class != gpu.ClassBatch || len(u.PIDs) == 0 {
				continue
			}
			done[u.Tenant] = true
			out = append(out, Action{Target: Target{GPU: u.UUID, Knob: gpu.KnobPauseDuty, PID: u.PIDs[0]}, Tenant: u.Tenant, Class: u.Class,
				PIDs: u.PIDs, Current: Duty(0), Want: Duty(0.5), Reason: "test"})
		}
		return out
	})
}

// A host whose batch jobs come and go as tenants of their own (a
// namespace or a pod label's value each, under pod tenancy) keeps what
// the tuner holds of their pauses bounded once each pause has been thawed
// and its tenant has run nowhere for GoneAfter: the settings (and the
// pause target and effective series they give, the status's rows, each
// history point), the last changes, the guards' per-target state and the
// tenant's failed-freeze count served from 0. A
// pause in force is kept, however long its tenant is away, until it is
// thawed. On an MPS GPU whose compute list NVML refuses, the MPS clients'
// list, read, tells where its tenants run.
func TestEndedPausesOfGoneTenantsForgotten(t *testing.T) {
	for _, tc := range []struct {
		name          string
		computeUnread bool
	}{{"lists read", false}, {"compute list refused", true}} {
		t.Run(tc.name, func(t *testing.T) { testEndedPausesForgotten(t, tc.computeUnread) })
	}
}

func testEndedPausesForgotten(t *testing.T, computeUnread bool) {
	clk := gpu.NewManualClock(t0)
	back := &Backoff{Base: time.Second, Max: time.Hour}
	hold := &RevertHold{Hold: time.Hour}
	retry := &Retry{After: time.Hour}
	rec := &forgettingPause{reportingPause{failures: map[string]uint64{}}}
	tu, err := New(Options{Policy: pauseEach(), Guards: []Guard{Bounds{}, back, hold, retry}, Enabled: pauseOn,
		Actuators: ActuatorsOf(rec), Pauses: rec, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	const rounds, lives = 400, 2 // a job runs two rounds of 15 s
	pid := uint32(100)
	for i := range rounds {
		clk.Advance(15 * time.Second)
		var usage []tenant.Usage
		var procs []gpu.Process
		rec.inForce = nil
		for j := max(0, i-lives+1); j <= i; j++ {
			name := fmt.Sprintf("job-%d", j)
			usage = append(usage, tenant.Usage{Tenant: name, Class: gpu.ClassBatch, UUID: uuid0, PIDs: []uint32{pid + uint32(j)}})
			procs = append(procs, mpsProc(pid+uint32(j), nil))
			rec.inForce = append(rec.inForce, gpu.PauseInForce{UUID: uuid0, Tenant: name, Duty: 0.5})
			if j == i { // its first freeze failed
				rec.failures[name]++
			}
			hold.Block(Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: pid + uint32(j)}, Duty(0.9), clk.Now())
		}
		snap := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs, ProcessesUnread: computeUnread}}, usage)
		snap.Tenants = nil
		if _, err := tu.RunOnce(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	// a job's pause is held for unseenThaw after it left, then thawed, and
	// its setting kept for GoneAfter after that: at the last round (399)
	// job-392, gone for 90 s, is still paused, job-387, thawed at round
	// 397, kept at 0, and job-385, thawed at round 395, forgotten
	for _, c := range []struct {
		job  uint32
		want Value
	}{{392, Duty(0.5)}, {387, Duty(0)}, {385, nil}} {
		st, ok := tu.targets[Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: pid + c.job}.String()]
		if got := st.Target; !ok && c.want != nil || ok && got != c.want {
			t.Errorf("job-%d's setting: %v (kept %v), want %v", c.job, got, ok, c.want)
		}
	}
	bound := lives + int((unseenThaw+GoneAfter)/(15*time.Second)) + 2
	s := tu.Status()
	last := s.History[len(s.History)-1]
	atMost(t, bound, fmt.Sprintf("after %d rounds of a new job each", rounds), []kept{
		{"targets", len(tu.targets)}, {"changes", len(tu.changes)}, {"originals", len(tu.originals)},
		{"refusals logged", len(tu.refused)}, {"status settings", len(s.Settings)}, {"history values", len(last.Values)},
		{"backoff", len(back.state)}, {"revert hold", len(hold.bad)}, {"retry", len(retry.asked)},
		{"failed-freeze counts", len(s.PauseFreezeFailures)}, {"the actuator's failed-freeze counts", len(rec.failures)},
	})
}

// thawRefusingPause is a forgettingPause whose thaws fail while refuse is
// set, and which notes the tenants it is told to forget.
type thawRefusingPause struct {
	forgettingPause
	refuse bool
	forgot []string
}

func (p *thawRefusingPause) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	if duty == 0 && p.refuse {
		return errors.New("thaw: cgroup.freeze: device or resource busy")
	}
	return p.forgettingPause.SetPauseDuty(ctx, uuid, tenant, pids, duty)
}

func (p *thawRefusingPause) ForgetPauseFailures(tenant string) {
	p.forgot = append(p.forgot, tenant)
	p.forgettingPause.ForgetPauseFailures(tenant)
}

// A pause whose thaw fails is never forgotten, however long its tenant
// is gone: its original stays open (the thaw is tried again each round),
// its setting, and its failed-freeze count with the actuator's; once a
// thaw takes, it is forgotten GoneAfter later.
func TestPauseNotForgottenWhileThawFails(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	rec := &thawRefusingPause{forgettingPause: forgettingPause{reportingPause{failures: map[string]uint64{"job": 1}}}, refuse: true}
	tu, err := New(Options{Policy: pauseEach(), Guards: []Guard{Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(rec), Pauses: rec, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	k := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 100}.String()
	round := func(running bool) {
		t.Helper()
		clk.Advance(15 * time.Second)
		var usage []tenant.Usage
		var procs []gpu.Process
		if running {
			usage = []tenant.Usage{{Tenant: "job", Class: gpu.ClassBatch, UUID: uuid0, PIDs: []uint32{100}}}
			procs = []gpu.Process{mpsProc(100, nil)}
		}
		snap := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}}, usage)
		snap.Tenants = nil
		tu.RunOnce(context.Background(), snap) // (a failed thaw is an error)
	}
	round(true)
	if _, ok := tu.originals[k]; !ok {
		t.Fatalf("not paused: originals %v", tu.originals)
	}
	for range int((unseenThaw + 4*GoneAfter) / (15 * time.Second)) {
		round(false)
	}
	if _, ok := tu.originals[k]; !ok {
		t.Errorf("the pause whose thaw fails was closed")
	}
	if _, ok := tu.targets[k]; !ok || len(rec.forgot) != 0 || tu.Status().PauseFreezeFailures["job"] != 1 {
		t.Errorf("the pause whose thaw fails was forgotten: setting kept %v, told to forget %q, failures %v", ok, rec.forgot, tu.Status().PauseFreezeFailures)
	}
	rec.refuse = false
	round(false) // thawed
	if _, ok := tu.originals[k]; ok {
		t.Fatalf("not thawed")
	}
	for range int(GoneAfter/(15*time.Second)) + 1 {
		round(false)
	}
	if _, ok := tu.targets[k]; ok || !slices.Equal(rec.forgot, []string{"job"}) {
		t.Errorf("thawed and gone for GoneAfter: setting kept %v, told to forget %q; want forgotten", ok, rec.forgot)
	}
}
