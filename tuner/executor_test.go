package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// tenantRestarts is a recorder that keeps the tenant of each restart.
type tenantRestarts struct {
	recorder
	tenants []string
}

func (r *tenantRestarts) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	r.tenants = append(r.tenants, tenant)
	return r.recorder.RestartClient(ctx, uuid, pid, tenant)
}

// An MPS client's restart names the tenant of the action, for the restart
// hook.
func TestRestartNamesTheActionsTenant(t *testing.T) {
	tests := []struct {
		name, tenant string
	}{
		{"attributed", "embed"},
		{"unknown", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host := &tenantRestarts{}
			a := mpsAction(7, 1, 0.4)
			a.Tenant = tc.tenant
			tu, err := New(Options{Policy: fixed{a}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(host.tenants, []string{tc.tenant}) {
				t.Errorf("restarts for tenants %q, want [%q]", host.tenants, tc.tenant)
			}
		})
	}
}

// Relayouts of two GPUs decided in the same round are both carried out:
// each GPU's instances are drained, its layout set and its processes
// started again.
func TestRelayoutsOfTwoGPUs(t *testing.T) {
	dev := func(uuid string, pid uint32) gpu.Device {
		return gpu.Device{UUID: uuid, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
			MIG:       []gpu.MIGInstance{{UUID: "MIG-" + uuid, GPUInstanceID: 1, Profile: "3g.40gb"}},
			Processes: []gpu.Process{{PID: pid, GPUInstanceID: 1}}}
	}
	relayout := func(uuid string) Action {
		l := []string{"1g.10gb", "3g.40gb"}
		return Action{Target: Target{GPU: uuid, Knob: gpu.KnobMIGLayout}, Want: LayoutOf(l), Reason: "test",
			Plan: &gpu.Plan{MIG: []gpu.MIGLayoutPlan{{UUID: uuid, Profiles: l}}}}
	}
	host := &migHost{Busy: 2} // each relayout's first look, as it starts, finds processes
	clock := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{relayout("GPU-m"), relayout("GPU-n")}, Actuators: ActuatorsOf(host), Clock: clock, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	decs, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{dev("GPU-m", 1), dev("GPU-n", 2)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !tu.Underway() {
		t.Fatal("no relayout under way while the instances drain")
	}
	clock.Advance(1)
	decs = append(decs, tu.Progress(context.Background())...)
	if tu.Underway() {
		t.Error("a relayout is still under way once the instances are empty")
	}
	var got []string
	for _, d := range decs {
		got = append(got, fmt.Sprintf("%s %s %s", d.GPU, d.Knob, d.Outcome))
	}
	want := []string{"GPU-m mig_drain applied", "GPU-n mig_drain applied", "GPU-m mig_layout applied", "GPU-n mig_layout applied"}
	if !slices.Equal(got, want) {
		t.Errorf("decisions %q, want %q", got, want)
	}
	wantCalls := "[drain MIG-GPU-m drain MIG-GPU-n configure 1g.10gb 3g.40gb start 1 configure 1g.10gb 3g.40gb start 2]"
	if fmt.Sprint(host.Calls) != wantCalls {
		t.Errorf("calls %v, want %s", host.Calls, wantCalls)
	}
}

// mover is a placement actuator that records its moves.
type mover struct{ moves []string }

func (m *mover) MoveProcess(_ context.Context, pid uint32, to string) error {
	m.moves = append(m.moves, fmt.Sprintf("%d->%s", pid, to))
	return nil
}

// Without a hook, a plan's move of a workload of several processes moves
// each of them, as the orchestrator would move the workload whole.
func TestPlanMovesEveryProcessOfAWorkload(t *testing.T) {
	pod := &gpu.Pod{Namespace: "llm", Name: "chat-0"}
	for _, tc := range []struct {
		name string
		mv   gpu.Move
		want []string
	}{
		{"one process", gpu.Move{Tenant: "a", PID: 3, ToUUID: "GPU-1"}, []string{"3->GPU-1"}},
		{"a pod of two processes", gpu.Move{Tenant: "a", PID: 3, PIDs: []uint32{3, 4}, ToUUID: "GPU-1", Pod: pod}, []string{"3->GPU-1", "4->GPU-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mover{}
			tu, err := New(Options{Policy: fixed{}, Actuators: ActuatorsOf(m), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if err := applyPlan(context.Background(), tu.o.Actuators, gpu.Plan{Moves: []gpu.Move{tc.mv}}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.moves, tc.want) {
				t.Errorf("moves %v, want %v", m.moves, tc.want)
			}
		})
	}
}

// listing is recorder (every actuator) with the capability lists of a
// backend: the knobs it can turn, by GPU.
type listing struct {
	recorder
	caps map[string][]gpu.Knob
}

func (l *listing) Capabilities(uuid string) []gpu.Knob { return l.caps[uuid] }

// A change of a knob the GPU's backends do not list is refused up front,
// counted as refused, and never reaches the actuator; one they list does.
func TestUnavailableKnobNotTried(t *testing.T) {
	clocks := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}, Reason: "test"}
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	for _, mode := range []Mode{ModeEnforce, ModeRecommend} {
		t.Run(string(mode), func(t *testing.T) {
			host := &listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobPowerLimit}}}
			tu, err := New(Options{Policy: fixed{clocks, power}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := tu.RunOnce(context.Background(), emptySnap(t0))
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 2 {
				t.Fatalf("decisions %+v, want 2", ds)
			}
			if d := ds[0]; d.Outcome != OutcomeRefused || d.Applied || !strings.Contains(d.Reason, "not available on this GPU (its backends list power_limit)") {
				t.Errorf("locked clocks: %s %q, want refused as not available", d.Outcome, d.Reason)
			}
			want, wantCalls := OutcomeApplied, []string{"SetPowerLimit(GPU-0,490)"}
			if mode == ModeRecommend {
				want, wantCalls = OutcomeRecommended, nil
			}
			if ds[1].Outcome != want {
				t.Errorf("power limit: %s, want %s", ds[1].Outcome, want)
			}
			if !slices.Equal(host.Calls, wantCalls) {
				t.Errorf("calls %q, want %q", host.Calls, wantCalls)
			}
			if n := tu.Status().Counts.Actions[ActionKey{Knob: gpu.KnobLockedClocks, Outcome: OutcomeRefused}]; n != 1 {
				t.Errorf("%d locked_clocks actions counted refused, want 1", n)
			}
			if tu.Status().Unrestored != map[Mode]int{ModeEnforce: 1, ModeRecommend: 0}[mode] {
				t.Errorf("%d originals kept, want one of the power limit alone in enforce", tu.Status().Unrestored)
			}
		})
	}
}

// What the tuner changed it tries to set back whatever the backends list
// now: a revert, a change of a setting whose original it keeps, and the
// restore at exit all reach the actuator.
func TestUnavailableKnobSetBack(t *testing.T) {
	lock := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}, Reason: "test"}
	host := &listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobLockedClocks}}}
	pol := &fixed{lock}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: pol, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	run := func() []Decision {
		t.Helper()
		clk.Advance(time.Minute)
		ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	if ds := run(); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Fatalf("decisions %+v, want the lock applied", ds)
	}
	host.caps = map[string][]gpu.Knob{uuid0: {gpu.KnobMPSActiveThreads}} // the backend no longer lists the clocks (a driver reloaded)
	relock := lock
	relock.Current, relock.Want = lock.Want, ClockRange{MinMHz: 1500, MaxMHz: 1500}
	back := lock
	back.Current, back.Want, back.Revert = lock.Want, lock.Current, true
	other := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	*pol = fixed{relock, other}
	if ds := run(); len(ds) != 2 || ds[0].Outcome != OutcomeApplied || ds[1].Outcome != OutcomeRefused {
		t.Errorf("decisions %+v, want the kept original's change applied, the new power limit refused", ds)
	}
	*pol = fixed{back}
	if ds := run(); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Errorf("decisions %+v, want the revert applied", ds)
	}
	*pol = fixed{relock}
	if ds := run(); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Errorf("decisions %+v, want the kept original's change applied", ds)
	}
	host.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"LockClocks(GPU-0,0,0)"}; !slices.Equal(host.Calls, want) {
		t.Errorf("restore at exit: calls %q, want %q", host.Calls, want)
	}
}

// A change of a setting the tuner restores from a value not read (the
// driver's getter failed: Current nil) is refused untried in enforce: no
// original could be kept, so neither the exit nor the start after a crash
// would set it back. Once the original is kept, one is made; in
// recommend, nothing is set, and it is recommended.
func TestChangeFromAValueNotRead(t *testing.T) {
	sched := Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}
	for _, tc := range []struct {
		name      string
		mode      Mode
		before    []Action // applied in a round before
		a         Action
		want      Outcome
		wantCalls []string
	}{
		{name: "vgpu scheduler", mode: ModeEnforce, a: Action{Target: sched, Want: Scheduler{Policy: "equal-share"}, Reason: "test"}, want: OutcomeRefused},
		{name: "power limit", mode: ModeEnforce, a: Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Want: Watts(490), Reason: "test"}, want: OutcomeRefused},
		{name: "pause", mode: ModeEnforce, a: Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "train", PIDs: []uint32{7}, Want: Duty(0.5), Reason: "test"}, want: OutcomeRefused},
		{name: "original kept", mode: ModeEnforce,
			before: []Action{{Target: sched, Current: Scheduler{Policy: "best-effort"}, Want: Scheduler{Policy: "equal-share"}, Reason: "test"}},
			a:      Action{Target: sched, Want: Scheduler{Policy: "fixed-share"}, Reason: "test"}, want: OutcomeApplied,
			wantCalls: []string{"SetVGPUScheduler(GPU-0,equal-share)", "SetVGPUScheduler(GPU-0,fixed-share)"}},
		{name: "recommend", mode: ModeRecommend, a: Action{Target: sched, Want: Scheduler{Policy: "equal-share"}, Reason: "test"}, want: OutcomeRecommended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, pauses := &recorder{}, &pauseRecorder{}
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(tc.before), Enabled: pauseOn, Actuators: ActuatorsOf(rec, pauses), Journal: j, Clock: clk, Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
				t.Fatal(err)
			}
			originals := len(j.Originals())
			clk.Advance(time.Minute)
			tu.o.Policy = fixed{tc.a}
			ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].Outcome != tc.want {
				t.Fatalf("decisions %+v, want one %s", ds, tc.want)
			}
			if tc.want == OutcomeRefused && !strings.Contains(ds[0].Reason, "refused, not tried: the "+string(tc.a.Knob)+" in force was not read") {
				t.Errorf("reason %q does not say the value in force was not read", ds[0].Reason)
			}
			if calls := append(rec.Calls, pauses.Calls...); !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("calls %q, want %q", calls, tc.wantCalls)
			}
			if n := len(j.Originals()); n != originals {
				t.Errorf("%d originals journaled, want %d", n, originals)
			}
		})
	}
}

// restartFailsFor fails every client restart of one PID (a client whose
// restart hook always exits non-zero); the others succeed.
type restartFailsFor struct {
	*recorder
	pid uint32
}

func (f *restartFailsFor) RestartClient(ctx context.Context, uuid string, pid uint32, tn string) error {
	err := f.recorder.RestartClient(ctx, uuid, pid, tn)
	if pid == f.pid {
		return errors.New("restart hook exited 1")
	}
	return err
}

// twoClients is an MPS GPU of two clients, PIDs 7 and 8.
func twoClients(at time.Time) *tenant.Snapshot {
	return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, nil), mpsProc(8, nil)}}}, nil)
}

// countCalls is how many of calls begin with prefix.
func countCalls(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// One action of a GPU that fails at every try does not keep the GPU's
// other actions from it: those refused behind its failure teach no guard,
// and are tried in the rounds it backs off (before, they backed off on
// its very schedule and came back behind it, refused again, for good),
// whether it is a change (a client whose restart always fails) or a
// revert failing at every try (a clock give-back against a violation).
func TestFailingActionDoesNotStarveItsGPU(t *testing.T) {
	a7 := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}, Tenant: "etl", Current: Fraction(1), Want: Fraction(0.4), Restart: true, Reason: "cap etl"}
	a8 := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "train", Current: Fraction(1), Want: Fraction(0.4), Restart: true, Reason: "cap train"}
	giveBack := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{MinMHz: 1200, MaxMHz: 1200}, Want: ClockRange{}, Revert: true,
		Reason: "vision violates its SLO: give the SM clock back"}
	for _, tc := range []struct {
		name    string
		actions []Action
		fail    func(*recorder) any
	}{
		{"client restart failing", []Action{a7, a8}, func(rec *recorder) any { return &restartFailsFor{recorder: rec, pid: 7} }},
		{"revert failing", []Action{giveBack, a8}, func(rec *recorder) any {
			rec.Errs = map[string]error{"LockClocks": errors.New("nvml: Unknown Error")}
			return rec
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(tc.actions), Guards: DefaultGuards(nil, nil), Actuators: ActuatorsOf(tc.fail(rec)), Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			refused := 0
			for range 8 { // 2 minutes
				ds, err := tu.RunOnce(context.Background(), twoClients(clk.Now()))
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if d.Outcome == OutcomeRefused && strings.Contains(d.Reason, "failed before it in the round") {
						refused++
					}
				}
				clk.Advance(DefaultInterval)
			}
			if countCalls(rec.Calls, "SetMPSActiveThreads(GPU-0,8") == 0 {
				t.Errorf("train's cap (PID 8, whose client restarts fine) never tried in 2 minutes, refused %d times behind the failing action; calls %q", refused, rec.Calls)
			}
		})
	}
}

// With the kill switch engaged, a change of a GPU behind a revert that
// failed there is the kill switch's refusal, counted as its others (before,
// it was refused untried behind the failure, and the kill switch's count
// left it out).
func TestKillSwitchRefusesBehindAFailedRevert(t *testing.T) {
	rec := &recorder{}
	rec.Errs = map[string]error{"LockClocks": errors.New("nvml: Unknown Error")}
	giveBack := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{MinMHz: 1200, MaxMHz: 1200}, Want: ClockRange{}, Revert: true, Reason: "give the SM clock back"}
	capTrain := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "train", Current: Fraction(1), Want: Fraction(0.4), Restart: true, Reason: "cap train"}
	kill := &KillSwitch{}
	kill.Engaged.Store(true)
	tu, err := New(Options{Policy: fixed{giveBack, capTrain}, Guards: DefaultGuards(kill, nil), Actuators: ActuatorsOf(rec), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := tu.RunOnce(context.Background(), twoClients(t0))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Outcome != OutcomeFailed || ds[1].Outcome != OutcomeGuarded || ds[1].Guard != GuardKillSwitch || tu.Status().Counts.Refusals[GuardKillSwitch] != 1 {
		t.Errorf("decisions %v, refusals %v: want the revert failed, then train's cap refused by the kill switch", ds, tu.Status().Counts.Refusals)
	}
}
