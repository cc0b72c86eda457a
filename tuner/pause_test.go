package tuner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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

// A pause is journaled like every setting (its original: 0) and thawed at
// the next start whatever the mode, at the kill switch, and at exit.
func TestPauseThawed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
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
	want := []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7],0)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q (paused, then thawed at the kill switch)", rec.Calls, want)
	}
	kill.Engaged.Store(false)
	rec.Calls = nil
	if _, err := tu.RunOnce(ctx, emptySnap(t0.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	// An unclean exit: the journal is left with the pause's original.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
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
	if want := []string{"SetPauseDuty(GPU-0,train,[7],0)"}; !slices.Equal(rec2.Calls, want) {
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

func (deciderFunc) Name() string               { return "func" }
func (f deciderFunc) Decide(s *State) []Action { return f(s) }
