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

// pauseRecorder is a pause actuator that records its calls.
type pauseRecorder struct{ Calls []string }

func (p *pauseRecorder) SetPauseDuty(_ context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	p.Calls = append(p.Calls, fmt.Sprintf("SetPauseDuty(%s,%s,%v,%g)", uuid, tenant, pids, duty))
	return nil
}

func pauseAction(tenant string, class gpu.TenantClass, from, to Duty) Action {
	return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: tenant, Class: class,
		PIDs: []uint32{7, 8}, Current: from, Want: to, Reason: "test"}
}

// A latency tenant is never paused, whatever its class says in the
// action; no duty above the ceiling; a thaw always passes.
func TestBoundsOnPause(t *testing.T) {
	snap := &tenant.Snapshot{Tenants: []tenant.Info{{Name: "chat", Class: gpu.ClassLatency}, {Name: "train", Class: gpu.ClassBatch}}}
	st := &State{Snapshot: snap}
	for _, c := range []struct {
		name string
		a    Action
		ok   bool
	}{
		{"batch", pauseAction("train", gpu.ClassBatch, 0, 0.5), true},
		{"at the ceiling", pauseAction("train", gpu.ClassBatch, 0, MaxPauseDuty), true},
		{"above the ceiling", pauseAction("train", gpu.ClassBatch, 0, 0.95), false},
		{"negative", pauseAction("train", gpu.ClassBatch, 0, -0.1), false},
		{"latency by the snapshot", pauseAction("chat", gpu.ClassBatch, 0, 0.2), false},
		{"latency by the action", pauseAction("other", gpu.ClassLatency, 0, 0.2), false},
		{"a latency tenant thawed", pauseAction("chat", gpu.ClassLatency, 0.2, 0), true},
		{"no tenant", pauseAction("", gpu.ClassBatch, 0, 0.2), false},
	} {
		if ok, why := (Bounds{}).Admit(st, c.a, t0); ok != c.ok {
			t.Errorf("%s: admitted %v (%s), want %v", c.name, ok, why, c.ok)
		}
	}
}

// The fast knob's dwell and hysteresis are its own; the others keep theirs.
func TestFastKnobDwell(t *testing.T) {
	d := &Dwell{For: 20 * time.Second, Fast: 5 * time.Second}
	h := &Hysteresis{For: 2 * time.Minute, Fast: 10 * time.Second}
	up := pauseAction("train", gpu.ClassBatch, 0, 0.5)
	d.Record(up, OutcomeApplied, nil, t0)
	h.Record(up, OutcomeApplied, nil, t0)
	down := pauseAction("train", gpu.ClassBatch, 0.5, 0.2)
	if ok, _ := d.Admit(nil, down, t0.Add(4*time.Second)); ok {
		t.Error("dwell admitted a pause change after 4s (fast dwell 5s)")
	}
	if ok, _ := d.Admit(nil, down, t0.Add(6*time.Second)); !ok {
		t.Error("dwell refused a pause change after 6s (fast dwell 5s)")
	}
	if ok, _ := h.Admit(nil, down, t0.Add(6*time.Second)); ok {
		t.Error("hysteresis admitted reversing a pause after 6s (fast 10s)")
	}
	if ok, _ := h.Admit(nil, down, t0.Add(11*time.Second)); !ok {
		t.Error("hysteresis refused reversing a pause after 11s (fast 10s)")
	}
	slow := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}
	d.Record(slow, OutcomeApplied, nil, t0)
	if ok, _ := d.Admit(nil, slow, t0.Add(6*time.Second)); ok {
		t.Error("a slow knob got the fast dwell")
	}
}

// A pause is journaled like every setting (its original: 0, with every
// process it paused) and thawed, all its processes, at
// the next start whatever the mode, at the kill switch, and at exit.
func TestPauseThawed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := openJournal(t, path)
	rec := &pauseRecorder{}
	kill := &KillSwitch{}
	tu, err := New(Options{Policy: fixed{pauseAction("train", gpu.ClassBatch, 0, 0.5)}, Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(ctx, emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	kill.Engaged.Store(true)
	if _, err := tu.RunOnce(ctx, emptySnap(t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q (paused, then thawed at the kill switch)", rec.Calls, want)
	}
	kill.Engaged.Store(false)
	rec.Calls = nil
	if _, err := tu.RunOnce(ctx, emptySnap(t0.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	// An unclean exit: the journal is left with the pause's original.
	j2 := reopen(t, j, path)
	if n := len(j2.Originals()); n != 1 {
		t.Fatalf("%d open originals after the pause, want 1", n)
	}
	rec2 := &pauseRecorder{}
	tu2, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec2), Journal: j2, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeRecommend})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu2.RunOnce(ctx, emptySnap(t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}; !slices.Equal(rec2.Calls, want) {
		t.Errorf("at start in recommend mode: calls %q, want %q", rec2.Calls, want)
	}
	if n := len(j2.Originals()); n != 0 {
		t.Errorf("%d open originals after the thaw at start", n)
	}
}

// A policy sees which knobs the host drives: the bound mechanisms' knobs,
// less the disabled ones.
func TestStateDrives(t *testing.T) {
	var seen map[gpu.Knob]bool
	spy := deciderFunc(func(s *State) []Action { seen = s.Drives; return nil })
	for _, c := range []struct {
		name     string
		acts     Actuators
		disabled []gpu.Knob
		enabled  []gpu.Knob
		pause    bool
	}{
		{"no pause actuator", ActuatorsOf(&recorder{}), nil, pauseOn, false},
		{"a pause actuator", ActuatorsOf(&recorder{}, &pauseRecorder{}), nil, pauseOn, true},
		{"disabled", ActuatorsOf(&pauseRecorder{}), []gpu.Knob{gpu.KnobPauseDuty}, pauseOn, false},
		{"opt-in, not enabled", ActuatorsOf(&recorder{}, &pauseRecorder{}), nil, nil, false},
	} {
		tu, err := New(Options{Policy: spy, Actuators: c.acts, Disabled: c.disabled, Enabled: c.enabled, Clock: gpu.NewManualClock(t0), Mode: ModeRecommend})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
			t.Fatal(err)
		}
		if seen[gpu.KnobPauseDuty] != c.pause || (c.name == "a pause actuator" && !seen[gpu.KnobMPSActiveThreads]) {
			t.Errorf("%s: drives %v", c.name, seen)
		}
	}
}

// pauseOn enables the opt-in pause knob.
var pauseOn = []gpu.Knob{gpu.KnobPauseDuty}

type deciderFunc func(*State) []Action

// pauseOnce pauses train 50% at its first round, and decides nothing after.
func pauseOnce() Decider {
	round := 0
	return deciderFunc(func(*State) []Action {
		round++
		if round == 1 {
			return []Action{pauseAction("train", gpu.ClassBatch, 0, 0.5)}
		}
		return nil
	})
}

func (deciderFunc) Name() string               { return "func" }
func (f deciderFunc) Decide(s *State) []Action { return f(s) }

// nowhere is n rounds with the tenant on no GPU.
func nowhere(n int) [][]tenant.Usage { return make([][]tenant.Usage, n) }

// A pause set on a GPU the tenant has left is thawed, since it would
// follow the tenant to its new GPU: at the next round where the slow loop
// moved it since the pause was set, after two rounds in a row otherwise;
// a tenant still on the GPU, missing from it for one round only (a client
// restarting), or seen on none for less than two minutes (between a stop
// and a start) keeps it; seen on none for two minutes, it is thawed; its
// processes another tenant's (a reload took it out of the tenants file),
// it is thawed at the next round, not two minutes later.
func TestPauseThawedWhenTenantLeft(t *testing.T) {
	on := func(uuid string) []tenant.Usage {
		return []tenant.Usage{{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid, PIDs: []uint32{7, 8}}}
	}
	snapOn := func(at time.Time, usage []tenant.Usage) *tenant.Snapshot {
		return snapshot(at, []gpu.Device{
			{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, nil), mpsProc(8, nil)}},
			{UUID: "GPU-1", Index: 1, Up: true, Mode: gpu.SharingMPS},
		}, usage)
	}
	as := func(uuid, name string, pids ...uint32) []tenant.Usage {
		return []tenant.Usage{{Tenant: name, Class: gpu.ClassBatch, UUID: uuid, PIDs: pids}}
	}
	for _, c := range []struct {
		name   string
		usage  [][]tenant.Usage // where train runs at the rounds after the pause
		moved  bool             // the slow loop moved train after the pause
		want   []string
		thawAt int    // the round after the pause that thaws (0: none)
		why    string // in the thaw's reason
	}{
		{"moved by the slow loop: thawed at the next round", [][]tenant.Usage{on("GPU-1")}, true, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, 1, "no longer runs on this GPU"},
		{"moved by someone else: thawed at the second round", [][]tenant.Usage{on("GPU-1"), on("GPU-1")}, false, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, 2, "no longer runs on this GPU"},
		{"away one round, back: kept", [][]tenant.Usage{on("GPU-1"), on(uuid0), on("GPU-1")}, false, nil, 0, ""},
		{"still on GPU-0: kept", [][]tenant.Usage{on(uuid0), on(uuid0)}, false, nil, 0, ""},
		{"seen on no GPU for a minute: kept", nowhere(5), false, nil, 0, ""},
		{"seen on no GPU for a minute twice, back between: kept", append(append(nowhere(5), on(uuid0)), nowhere(5)...), false, nil, 0, ""},
		{"seen on no GPU for two minutes: thawed", nowhere(9), false, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, 9, "no process of train to pause"},
		{"its processes another tenant's (a reload took train out of the file): thawed at the next round",
			[][]tenant.Usage{as(uuid0, "unassigned", 7, 8)}, false, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, 1, "are unassigned's now"},
		{"one of its PIDs another tenant's, train still running: kept (on its process left)",
			[][]tenant.Usage{append(as(uuid0, "train", 7), as(uuid0, "web", 8)...)}, false, []string{"SetPauseDuty(GPU-0,train,[7],0.5)"}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &pauseRecorder{}
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn,
				Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(context.Background(), snapOn(t0, on(uuid0))); err != nil {
				t.Fatal(err)
			}
			if c.moved {
				tu.reb.moved = map[string]time.Time{"train": t0.Add(10 * time.Second)}
			}
			rec.Calls = nil
			thawAt := 0
			for i, u := range c.usage {
				clk.Advance(15 * time.Second)
				ds, err := tu.RunOnce(context.Background(), snapOn(t0.Add(time.Duration(i+1)*15*time.Second), u))
				if err != nil {
					t.Fatal(err)
				}
				if len(rec.Calls) > 0 && thawAt == 0 {
					thawAt = i + 1
					if len(ds) == 0 || !strings.Contains(ds[0].Reason, c.why) {
						t.Errorf("decisions %+v, want the thaw with its reason", ds)
					}
				}
			}
			if !slices.Equal(rec.Calls, c.want) || thawAt != c.thawAt {
				t.Fatalf("calls %q at round %d, want %q at round %d", rec.Calls, thawAt, c.want, c.thawAt)
			}
		})
	}
}

// A policy finds the pause target the tuner holds for a tenant on a GPU
// (State.Paused), whatever the tenant's processes are now.
func TestStatePausedTarget(t *testing.T) {
	var seen []map[string]Target
	round := 0
	spy := deciderFunc(func(s *State) []Action {
		seen = append(seen, s.Paused)
		if round++; round == 1 {
			return []Action{pauseAction("train", gpu.ClassBatch, 0, 0.5)}
		}
		return nil
	})
	tu, err := New(Options{Policy: spy, Guards: []Guard{Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(&pauseRecorder{}), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Duration(i)*15*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	want := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}
	if len(seen) != 2 || len(seen[0]) != 0 || seen[1][PauseKey(uuid0, "train")] != want {
		t.Fatalf("State.Paused by round %v, want none then train's %v", seen, want)
	}
	if got, ok := (&State{Paused: seen[1]}).PauseTarget(uuid0, "train"); !ok || got != want {
		t.Errorf("PauseTarget = %v, %v", got, ok)
	}
}

// flakyPause is a pause actuator whose first fail calls fail.
type flakyPause struct {
	pauseRecorder
	fail int
}

func (p *flakyPause) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	if p.fail > 0 {
		p.fail--
		p.Calls = append(p.Calls, "failed")
		return fmt.Errorf("thaw failed")
	}
	return p.pauseRecorder.SetPauseDuty(ctx, uuid, tenant, pids, duty)
}

// A pause an earlier run left in the journal is thawed at start whatever
// the mode, before the first round (the start's Recover), and, where that
// thaw failed, again at exit: a stop before the first round, or after a
// thaw that failed, leaves no tenant paused in recommend mode either.
func TestPauseThawedAtStartAndExitInAnyMode(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		mode  Mode
		fail  int // the first calls that fail
		start []string
		exit  []string
	}{
		{"recommend", ModeRecommend, 0, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, nil},
		{"recommend, the thaw at start fails", ModeRecommend, 1, []string{"failed"}, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}},
		{"off for the host, a GPU in recommend", ModeOff, 0, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, nil},
		{"enforce", ModeEnforce, 0, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, nil},
		{"enforce, the thaw at start fails", ModeEnforce, 1, []string{"failed"}, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7},
				Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}})
			rec := &flakyPause{fail: c.fail}
			o := Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: c.mode}
			if c.mode == ModeOff {
				o.GPUModes = map[string]Mode{"1": ModeRecommend}
			}
			tu, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = tu.Recover(ctx, emptySnap(t0.Add(time.Hour)))
			if !slices.Equal(rec.Calls, c.start) {
				t.Errorf("at start: calls %q, want %q", rec.Calls, c.start)
			}
			rec.Calls = nil
			_, _ = tu.Restore(ctx) // stopped before the first round
			if !slices.Equal(rec.Calls, c.exit) {
				t.Errorf("at exit: calls %q, want %q", rec.Calls, c.exit)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d open originals after the exit, want 0", n)
			}
		})
	}
}

// pauseAndMPS records MPS and pause calls in one list, in order.
type pauseAndMPS struct{ recorder }

func (p *pauseAndMPS) SetPauseDuty(_ context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	return p.Do("SetPauseDuty", fmt.Sprintf("%s,%s,%v,%g", uuid, tenant, pids, duty))
}

// A tenant both capped (MPS) and paused: the restore thaws its processes
// before it restarts its client (an MPS cap is set back through a
// restart), at exit and at a start after a crash, the rest after in name
// order. (Before, the keys' name order alone restarted the client,
// .../mps_active_threads/pid8, while its tenant was still frozen, before
// .../pause_duty: a restart hook meeting frozen processes waits on them.)
func TestRestoreThawsPausesFirst(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "at exit", true: "at start after a crash"}[crash], func(t *testing.T) {
			rec := &pauseAndMPS{}
			_, _, _, err := capPausedAndRestore(t, context.Background(), ActuatorsOf(rec), gpu.NewManualClock(t0), crash, func() { rec.Calls = nil })
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"SetPauseDuty(GPU-0,train,[7 8],0)", "SetMPSActiveThreads(GPU-0,8,1.0000)", "RestartClient(GPU-0,8)"}
			if !slices.Equal(rec.Calls, want) {
				t.Errorf("the restore's calls: %q, want %q (the tenant thawed before its client is restarted)", rec.Calls, want)
			}
		})
	}
}

// A tenant both capped (MPS) and paused whose thaw fails: the restore does
// not restart its client in that pass (its processes may still be frozen,
// which a restart hook would wait on, up to its timeout, out of the
// restore's deadline); the cap's original stays open as a failed restore
// naming the failed thaw, journaled and counted, and a later restore,
// the tenant thawed, sets it back. A thaw refused as busy and tried again
// is waited for by the client's restart. (Before, the client was
// restarted all the same, right after the failed or refused thaw.)
func TestRestoreNoRestartAfterFailedThaw(t *testing.T) {
	thawed := []string{"SetPauseDuty(GPU-0,train,[7 8],0)", "SetMPSActiveThreads(GPU-0,8,1.0000)", "RestartClient(GPU-0,8)"}
	for _, tc := range []struct {
		name  string
		crash bool // the restore at start after a crash, else at exit
		busy  bool // the thaw refused as busy once, else failing until the next try
	}{
		{"failed at exit", false, false},
		{"failed at start after a crash", true, false},
		{"busy once at exit", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // (a deadline: a busy thaw is tried again)
			defer cancel()
			rec := &busyThaw{}
			tu, j, ds, err := capPausedAndRestore(t, ctx, ActuatorsOf(rec), gpu.RealClock{}, tc.crash, func() {
				rec.Calls = nil
				if tc.busy {
					rec.busy = 1
				} else {
					rec.Errs = map[string]error{"SetPauseDuty": errors.New("cgroup.freeze: write error")}
				}
			})
			if tc.busy {
				if want := append([]string{thawed[0]}, thawed...); err != nil || !slices.Equal(rec.Calls, want) {
					t.Errorf("the restore's calls: %q (error %v), want %q (train's client restarted once it is thawed)", rec.Calls, err, want)
				}
				return
			}
			if want := thawed[:1]; !slices.Equal(rec.Calls, want) {
				t.Errorf("the restore's calls: %q, want %q (train's client not restarted while train may be frozen)", rec.Calls, want)
			}
			if err == nil || !strings.Contains(err.Error(), "its thaw failed") {
				t.Errorf("restore error %v, want the cap's restore failed naming the failed thaw", err)
			}
			i := slices.IndexFunc(ds, func(d Decision) bool { return d.Knob == gpu.KnobMPSActiveThreads })
			if i < 0 || ds[i].Outcome != OutcomeFailed || !strings.Contains(ds[i].Reason, "train's pause") {
				t.Errorf("decisions %+v, want the cap's restore failed, its reason naming train's pause", ds)
			}
			if got := tu.Status().Counts.RestoreFailures; got != 2 {
				t.Errorf("restore failures %d, want 2 (the thaw and the cap)", got)
			}
			if got := len(j.Originals()); got != 2 {
				t.Errorf("open originals in the journal %d, want 2", got)
			}
			rec.Calls, rec.Errs = nil, nil
			if _, err := tu.Restore(ctx); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Calls, thawed) {
				t.Errorf("a later restore: calls %q, want %q", rec.Calls, thawed)
			}
		})
	}
}

// busyThaw is pauseAndMPS whose pause actuator refuses its first busy
// calls as busy (gpu.ErrBusy).
type busyThaw struct {
	pauseAndMPS
	busy int
}

func (p *busyThaw) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	err := p.pauseAndMPS.SetPauseDuty(ctx, uuid, tenant, pids, duty)
	if p.busy > 0 {
		p.busy--
		return fmt.Errorf("a stop in progress: %w", gpu.ErrBusy)
	}
	return err
}

// capPausedAndRestore runs a round of a tuner in enforce mode over act
// that caps train's MPS client 8 to 0.3 and pauses train, then, once
// between has run, sets back: at exit, or with crash at a start after a
// crash (a tuner of its own over the journal opened again). It returns
// the tuner that set back, its journal, and the restore's decisions and
// error.
func capPausedAndRestore(t *testing.T, ctx context.Context, act Actuators, clk gpu.Clock, crash bool, between func()) (*Tuner, *Journal, []Decision, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	t.Cleanup(func() { j.Close() }) // (the journal open at the end)
	capA := mpsAction(8, 1, 0.3)
	capA.Tenant = "train"
	pause := pauseAction("train", gpu.ClassBatch, 0, 0.5)
	opts := Options{Policy: fixed{capA, pause}, Enabled: pauseOn, Actuators: act, Journal: j, Clock: clk, Mode: ModeEnforce}
	tu, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(ctx, emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	between()
	if !crash {
		ds, err := tu.Restore(ctx)
		return tu, j, ds, err
	}
	j.Close()
	j = openJournal(t, p)
	opts.Policy, opts.Journal = fixed{}, j
	if tu, err = New(opts); err != nil {
		t.Fatal(err)
	}
	ds, err := tu.Recover(ctx, emptySnap(t0.Add(time.Minute)))
	return tu, j, ds, err
}
