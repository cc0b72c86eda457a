package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// recorder is fakeControl with clocks and power: every actuator.
type recorder struct{ fakeControl }

func (r *recorder) LockClocks(_ context.Context, uuid string, l gpu.ClockLock) error {
	return r.Do("LockClocks", fmt.Sprintf("%s,%d,%d", uuid, l.MinMHz, l.MaxMHz))
}
func (r *recorder) LockMemoryClocks(_ context.Context, uuid string, l gpu.ClockLock) error {
	return r.Do("LockMemoryClocks", fmt.Sprintf("%s,%d,%d", uuid, l.MinMHz, l.MaxMHz))
}
func (r *recorder) SetPowerLimit(_ context.Context, uuid string, w float64) error {
	return r.Do("SetPowerLimit", fmt.Sprintf("%s,%g", uuid, w))
}

// fixed is a Decider that always returns the same actions.
type fixed []Action

func (fixed) Name() string             { return "fixed" }
func (f fixed) Decide(*State) []Action { return f }

const uuid0 = "GPU-0"

func mpsAction(pid uint32, from, to Fraction) Action {
	return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: pid}, Tenant: "embed", Current: from, Want: to, Restart: true, Reason: "test"}
}

func emptySnap(at time.Time) *tenant.Snapshot {
	return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, nil), mpsProc(8, nil)}}}, nil)
}

func newTestTuner(t *testing.T, mode Mode, act *recorder, actions []Action, j *Journal, guards ...Guard) (*Tuner, *gpu.ManualClock) {
	t.Helper()
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(actions), Guards: guards, Actuators: ActuatorsOf(act), Journal: j, Clock: clk, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return tu, clk
}

// Every kind of action reaches its actuator with its value.
func TestActuatorCalls(t *testing.T) {
	tests := []struct {
		name string
		a    Action
		want []string
	}{
		{"mps with restart", mpsAction(7, 1, 0.4), []string{"SetMPSActiveThreads(GPU-0,7,0.4000)", "RestartClient(GPU-0,7)"}},
		{"mps pending", Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}, Current: Fraction(0.5), Want: Fraction(1)}, []string{"SetMPSActiveThreads(GPU-0,7,1.0000)"}},
		{"time slice", Action{Target: Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice}, Current: Level("default"), Want: Level("short")}, []string{"SetComputeTimeSlice(GPU-0,short)"}},
		{"vgpu", Action{Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}, Current: Scheduler{Policy: "best-effort"}, Want: Scheduler{Policy: "equal-share"}}, []string{"SetVGPUScheduler(GPU-0,equal-share)"}},
		{"clocks", Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}}, []string{"LockClocks(GPU-0,1980,1980)"}},
		{"power", Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}, []string{"SetPowerLimit(GPU-0,490)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			tu, _ := newTestTuner(t, ModeEnforce, rec, []Action{tc.a}, nil)
			ds, err := tu.RunOnce(context.Background(), emptySnap(t0))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Calls, tc.want) {
				t.Errorf("calls %q, want %q", rec.Calls, tc.want)
			}
			if len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
				t.Errorf("decisions %+v, want one applied", ds)
			}
		})
	}
}

// In off and recommend modes no actuator is ever called, per host or per
// GPU, and restores do not act either.
func TestNoActuatorUnlessEnforce(t *testing.T) {
	acts := []Action{mpsAction(7, 1, 0.4), {Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	for _, tc := range []struct {
		name     string
		mode     Mode
		gpuModes map[string]Mode
		outcome  Outcome
	}{
		{"off", ModeOff, nil, ""},
		{"recommend", ModeRecommend, nil, OutcomeRecommended},
		{"enforce host, recommend GPU", ModeEnforce, map[string]Mode{uuid0: ModeRecommend}, OutcomeRecommended},
		{"enforce host, GPU 0 off", ModeEnforce, map[string]Mode{"0": ModeOff}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			j := openJournal(t, filepath.Join(t.TempDir(), "j"))
			defer j.Close()
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(acts), Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: tc.mode, GPUModes: tc.gpuModes})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				clk.Advance(time.Minute)
				ds, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Duration(i)*time.Minute)))
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if d.Outcome != tc.outcome || d.Applied {
						t.Errorf("decision %v, want outcome %q", d, tc.outcome)
					}
				}
				if tc.outcome != "" && len(ds) != len(acts) {
					t.Errorf("%d decisions, want %d", len(ds), len(acts))
				}
			}
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(rec.Calls) != 0 {
				t.Errorf("actuator called in %s: %q", tc.name, rec.Calls)
			}
			if len(j.Originals()) != 0 {
				t.Errorf("originals journaled without a change: %v", j.Originals())
			}
		})
	}
}

// A failed restart puts the previous fraction back, rolls back what the
// round applied on that GPU, refuses the GPU's actions after it untried
// (the GPU keeps neither the plan's head nor its tail), backs every target
// off, and shows in the counters.
func TestFailureRollsBackAndBacksOff(t *testing.T) {
	rec := &recorder{}
	first, second, third := mpsAction(7, 1, 0.4), mpsAction(8, 1, 0.5), mpsAction(9, 1, 0.3)
	bo := &Backoff{Base: time.Minute, Max: 4 * time.Minute}
	tu, clk := newTestTuner(t, ModeEnforce, rec, []Action{first, second, third}, nil, bo)
	// the restart of the second client fails
	tu.o.Actuators = ActuatorsOf(&failOn{recorder: rec, nth: 2, err: errors.New("hook exited 1")})
	snap := func(at time.Time) *tenant.Snapshot {
		return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, nil), mpsProc(8, nil), mpsProc(9, nil)}}}, nil)
	}
	ds, err := tu.RunOnce(context.Background(), snap(t0))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SetMPSActiveThreads(GPU-0,7,0.4000)", "RestartClient(GPU-0,7)",
		"SetMPSActiveThreads(GPU-0,8,0.5000)", "RestartClient(GPU-0,8)", "SetMPSActiveThreads(GPU-0,8,1.0000)",
		"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)",
	}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("calls\n%q\nwant\n%q", rec.Calls, want)
	}
	var outcomes []Outcome
	for _, d := range ds {
		outcomes = append(outcomes, d.Outcome)
	}
	if !slices.Equal(outcomes, []Outcome{OutcomeApplied, OutcomeFailed, OutcomeRolledBack, OutcomeRefused}) {
		t.Errorf("outcomes %v", outcomes)
	}
	if r := ds[len(ds)-1].Reason; !strings.Contains(r, "refused, not tried: GPU-0/mps_active_threads/pid8 failed before it in the round, and what the round applied on the GPU was rolled back") {
		t.Errorf("the third client's reason %q does not say the GPU's changes were rolled back", r)
	}
	st := tu.Status()
	if st.Counts.Actions[ActionKey{gpu.KnobMPSActiveThreads, OutcomeFailed}] != 1 || st.Counts.Actions[ActionKey{gpu.KnobMPSActiveThreads, OutcomeRolledBack}] != 1 ||
		st.Counts.Actions[ActionKey{gpu.KnobMPSActiveThreads, OutcomeRefused}] != 1 || st.Counts.Reverts != 1 {
		t.Errorf("counts %+v", st.Counts)
	}
	// The failed and the rolled-back targets back off: the next round the
	// backoff guard refuses them; the third, refused untried, is not backed
	// off, and is applied.
	rec.Calls = nil
	clk.Advance(30 * time.Second)
	ds, _ = tu.RunOnce(context.Background(), snap(clk.Now()))
	outcomes = nil
	for _, d := range ds {
		outcomes = append(outcomes, d.Outcome)
		if d.Outcome == OutcomeGuarded && d.Guard != GuardBackoff {
			t.Errorf("during back-off: %v", d)
		}
	}
	if !slices.Equal(outcomes, []Outcome{OutcomeGuarded, OutcomeGuarded, OutcomeApplied}) {
		t.Errorf("during back-off: %v", ds)
	}
	if want := []string{"SetMPSActiveThreads(GPU-0,9,0.3000)", "RestartClient(GPU-0,9)"}; !slices.Equal(rec.Calls, want) || tu.Status().Counts.Refusals[GuardBackoff] != 2 {
		t.Errorf("calls %q, want %q; refusals %v", rec.Calls, want, tu.Status().Counts.Refusals)
	}
	clk.Advance(time.Minute)
	if ds, _ = tu.RunOnce(context.Background(), snap(clk.Now())); len(ds) == 0 || ds[0].Outcome != OutcomeApplied {
		t.Errorf("after back-off: %v", ds)
	}
}

// failOn fails the nth client restart.
type failOn struct {
	*recorder
	nth, n int
	err    error
}

func (f *failOn) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	err := f.recorder.RestartClient(ctx, uuid, pid, tenant)
	if f.n++; f.n == f.nth {
		return f.err
	}
	return err
}

// The journal holds the original before the first change, and a restore
// sets it back and marks it restored.
func TestJournalOriginalsAndRestore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := openJournal(t, path)
	rec := &recorder{}
	acts := []Action{mpsAction(7, 1, 0.4), {Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	tu, clk := newTestTuner(t, ModeEnforce, rec, acts, j)
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	// a second change keeps the first original
	tu.o.Policy = fixed{mpsAction(7, 0.4, 0.3)}
	clk.Advance(time.Minute)
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	origs := j.Originals()
	if len(origs) != 2 {
		t.Fatalf("originals %v", origs)
	}
	data, _ := os.ReadFile(path)
	for _, ev := range []string{`"event":"original"`, `"event":"planned"`, `"event":"applied"`} {
		if !strings.Contains(string(data), ev) {
			t.Errorf("journal lacks %s:\n%s", ev, data)
		}
	}
	rec.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)", "SetPowerLimit(GPU-0,700)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("restore calls %q, want %q", rec.Calls, want)
	}
	j.Close()
	j2 := openJournal(t, path)
	defer j2.Close()
	if n := len(j2.Originals()); n != 0 {
		t.Errorf("%d originals open after the restore", n)
	}
}

// A failed restore is returned, counted and journaled.
func TestRestoreFailureIsLoud(t *testing.T) {
	rec := &recorder{fakeControl{Errs: map[string]error{}}}
	acts := []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	j := openJournal(t, filepath.Join(t.TempDir(), "j"))
	defer j.Close()
	tu, _ := newTestTuner(t, ModeEnforce, rec, acts, j)
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	rec.Errs["SetPowerLimit"] = errors.New("insufficient permissions")
	if _, err := tu.Restore(context.Background()); err == nil || !strings.Contains(err.Error(), "insufficient permissions") {
		t.Fatalf("restore error %v", err)
	}
	if tu.Status().Counts.RestoreFailures != 1 || len(j.Originals()) != 1 {
		t.Errorf("restore failures %d, open originals %d", tu.Status().Counts.RestoreFailures, len(j.Originals()))
	}
}

// The earlier format (JSON lines) is still read: a torn last line is cut
// off, a bad line elsewhere is dropped and counted; neither stops the
// start.
func TestJournalLoad(t *testing.T) {
	dir := t.TempDir()
	good := `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
	for _, tc := range []struct {
		name, data string
		open       int
		dropped    map[string]int
	}{
		{"empty", "", 0, map[string]int{}},
		{"one original", good, 1, map[string]int{}},
		{"torn last line", good + `{"time":"2026`, 1, map[string]int{"torn": 1}},
		{"restored", good + `{"event":"restored","target":{"gpu":"GPU-0","knob":"power_limit"}}` + "\n", 0, map[string]int{}},
		{"bad line", "nonsense\n" + good, 1, map[string]int{"corrupt": 1}},
		{"bad kind", `{"event":"original","target":{"gpu":"G","knob":"power_limit"},"from":{"kind":"volts"}}` + "\n" + good, 1, map[string]int{"invalid": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			j := openJournal(t, p)
			defer j.Close()
			if n := len(j.Originals()); n != tc.open {
				t.Errorf("%d open originals, want %d", n, tc.open)
			}
			if d := j.Stats().Dropped; !maps.Equal(d, tc.dropped) {
				t.Errorf("dropped %v, want %v", d, tc.dropped)
			}
		})
	}
}

// A disabled knob is never changed: the policy's actions on it are dropped,
// the others go through.
func TestDisabledKnobs(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	acts := []Action{
		{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1584, MaxMHz: 1584}},
		{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)},
		mpsAction(7, 1, 0.4),
	}
	tu, err := New(Options{Policy: fixed(acts), Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce,
		Disabled: []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := tu.RunOnce(context.Background(), emptySnap(t0))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetMPSActiveThreads(GPU-0,7,0.4000)", "RestartClient(GPU-0,7)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q", rec.Calls, want)
	}
	if len(ds) != 1 || ds[0].Knob != gpu.KnobMPSActiveThreads {
		t.Errorf("decisions %+v, want the MPS one only", ds)
	}
}

// A policy's step back with HoldLeft holds the value it left: the
// revert_hold guard refuses going back to it.
func TestHoldLeft(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	hold := &RevertHold{Hold: 10 * time.Minute}
	clockT := Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}
	low, high := ClockRange{MinMHz: 1386, MaxMHz: 1386}, ClockRange{MinMHz: 1584, MaxMHz: 1584}
	pol := &fixed{{Target: clockT, Current: low, Want: high, HoldLeft: true}}
	tu, err := New(Options{Policy: pol, Guards: []Guard{hold}, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce, Hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	if ds, _ := tu.RunOnce(context.Background(), emptySnap(t0)); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Fatalf("step back: %+v", ds)
	}
	*pol = fixed{{Target: clockT, Current: high, Want: low}}
	clk.Advance(time.Minute)
	ds, _ := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
	if len(ds) != 1 || ds[0].Outcome != OutcomeGuarded || ds[0].Guard != GuardRevert {
		t.Errorf("going back to the held value: %+v, want guarded by %s", ds, GuardRevert)
	}
}

// Every kind of value comes back from the journal as it went in.
func TestValueRoundTrip(t *testing.T) {
	for _, v := range []Value{Fraction(0.25), Watts(490), Level("long"), Scheduler{Policy: "fixed-share"}, ClockRange{MinMHz: 1980, MaxMHz: 1980},
		Placement("GPU-1"), LayoutOf([]string{"1g.10gb", "3g.40gb"})} {
		got, err := encodeValue(v).decode()
		if err != nil || got != v {
			t.Errorf("%T %v came back as %v (%v)", v, v, got, err)
		}
	}
	if l := LayoutOf([]string{"1g.10gb", "3g.40gb"}); l.String() != "[1g.10gb, 3g.40gb]" || strings.Join(l.Profiles(), " ") != "1g.10gb 3g.40gb" {
		t.Errorf("layout %v, profiles %v", l, l.Profiles())
	}
}

// A change supersedes the pending judgement of the change before it on the
// same target, so that a late revert cannot undo the newer setting.
func TestChangeSupersedesEvaluation(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	powT := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	pol := &fixed{{Target: powT, Current: Watts(700), Want: Watts(490), Relax: true}}
	tu, err := New(Options{Policy: pol, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce, RevertAfter: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ds, _ := tu.RunOnce(context.Background(), emptySnap(t0)); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Fatalf("first change: %+v", ds)
	}
	if len(tu.evals) != 1 {
		t.Fatalf("%d evaluations pending after a relaxing change, want 1", len(tu.evals))
	}
	*pol = fixed{{Target: powT, Current: Watts(490), Want: Watts(700)}}
	clk.Advance(time.Minute)
	if ds, _ := tu.RunOnce(context.Background(), emptySnap(clk.Now())); len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
		t.Fatalf("second change: %+v", ds)
	}
	if len(tu.evals) != 0 {
		t.Errorf("%d evaluations pending after the target changed again, want 0", len(tu.evals))
	}
}

// TestTunerKeepsTrail checks that the loop hands the policy its trail: each
// applied change with the request counters and the SLO error at the time.
func TestTunerKeepsTrail(t *testing.T) {
	act := &recorder{}
	tu, _ := newTestTuner(t, ModeEnforce, act, []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice},
		Current: Level(gpu.TimeSliceDefault), Want: Level(gpu.TimeSliceLong), Reason: "test"}}, nil)
	snap := snapshot(t0, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: gpu.TimeSliceDefault}}, nil)
	snap.SLOs = []tenant.SLOStatus{{Tenant: "vision", Status: latency.Status{Quantile: 0.9, GoodKnown: true, RequestsTotal: 100, GoodRequestsTotal: 90}}}
	if _, err := tu.RunOnce(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	h := tu.history[Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice}.DomainKey()]
	if len(h) != 1 || h[0].To != Value(Level(gpu.TimeSliceLong)) || h[0].Counters["vision"] != (RequestCount{Total: 100, Good: 90}) {
		t.Fatalf("trail %+v", h)
	}
}

// hangingGPU is a power actuator whose calls on the GPU lost hang until
// the restore's deadline (it ends the context and fails), as nvidia-smi
// does on a GPU that fell off the bus; calls on the others fail once the
// deadline is past, and are recorded otherwise.
type hangingGPU struct {
	lost   string
	cancel context.CancelFunc
	Calls  []string
}

func (h *hangingGPU) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if uuid == h.lost {
		h.cancel()
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h.Calls = append(h.Calls, fmt.Sprintf("SetPowerLimit(%s,%g)", uuid, w))
	return nil
}

func (h *hangingGPU) LockClocks(context.Context, string, gpu.ClockLock) error {
	return gpu.ErrNotSupported
}

// A GPU lost (fell off the bus, read down) whose actuator hangs is
// restored last, at start and at exit: the GPUs that answer are set back
// before its calls use up the restore's deadline.
func TestRestoreLostGPULast(t *testing.T) {
	for _, c := range []struct {
		name string
		devs []gpu.Device
	}{
		{"read down", []gpu.Device{{UUID: "GPU-a", Up: false}, {UUID: "GPU-b", Up: true}}},
		{"gone from the readings", []gpu.Device{{UUID: "GPU-b", Up: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, originalRec("GPU-a", 700), originalRec("GPU-b", 700))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			act := &hangingGPU{lost: "GPU-a", cancel: cancel}
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(act), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tu.Recover(ctx, snapshot(t0, c.devs, nil))
			if want := []string{"SetPowerLimit(GPU-b,700)"}; !slices.Equal(act.Calls, want) {
				t.Errorf("calls %q, want %q (the GPU that answers restored)", act.Calls, want)
			}
			if err == nil || len(j.Originals()) != 1 || j.Originals()[0].Target.GPU != "GPU-a" {
				t.Errorf("restore error %v, open originals %+v; want the lost GPU's alone", err, j.Originals())
			}
		})
	}
}

// An MPS original an earlier run left is not restored at an exit that
// comes before the first snapshot, or whose snapshot reads its GPU down:
// whether its process still runs is unknown, and restarting the client by
// a PID from before the crash could restart whatever runs under that PID
// now. It stays open, for the next start, and the exit says so; after a
// snapshot that reads the GPU it is restored where it lists the process;
// one that does not list it is closed as gone, this original naming no
// identity its client could be told by when a later snapshot lists its
// PID (with one, it waits for that: TestMPSRestoreAtStartWaitsForListing).
func TestRestoreMPSWithoutSnapshotLeftOpen(t *testing.T) {
	for _, c := range []struct {
		name  string
		snap  *tenant.Snapshot
		calls []string
		open  int
	}{
		{"no snapshot", nil, nil, 1},
		{"process running", emptySnap(t0), []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)"}, 0},
		{"process not listed", snapshot(t0, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS}}, nil), nil, 0},
		// a read that timed out lists no process: the client may run on
		{"GPU read down", snapshot(t0, []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil), nil, 1},
		// nor does a GPU not listed at all (not enumerated at this start)
		{"GPU not listed", snapshot(t0, []gpu.Device{{UUID: "GPU-other", Up: true, Mode: gpu.SharingMPS}}, nil), nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7},
				Tenant: "embed", From: encodeValue(Fraction(1))})
			rec := &recorder{}
			tu, _ := newTestTuner(t, ModeEnforce, rec, nil, j)
			if c.snap != nil {
				_, _ = tu.Recover(context.Background(), c.snap) // fails as the exit does, where left open
			}
			_, err := tu.Restore(context.Background())
			if !slices.Equal(rec.Calls, c.calls) || len(j.Originals()) != c.open {
				t.Errorf("calls %q, %d open; want %q, %d", rec.Calls, len(j.Originals()), c.calls, c.open)
			}
			if (err != nil) != (c.open > 0) {
				t.Errorf("restore error %v with %d left open", err, c.open)
			}
		})
	}
}

// A client the last sample missed (a process list read between two
// calls, as the gone-process memory allows for) is restored at exit, not
// closed as gone: it ran a round ago under the tuner's cap. One missing
// for longer than a sample's miss is closed as gone.
func TestRestoreMPSClientMissedBySample(t *testing.T) {
	for _, c := range []struct {
		name   string
		missed time.Duration // since the process was last seen
		calls  int
	}{
		{"missed by the last sample", 10 * time.Second, 2},
		{"gone for longer", 2 * time.Minute, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			acts := []Action{mpsAction(7, 1, 0.5)}
			tu, clk := newTestTuner(t, ModeEnforce, rec, acts, nil)
			if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil || len(rec.Calls) != 2 {
				t.Fatalf("round: %v, calls %q", err, rec.Calls)
			}
			rec.Calls = nil
			tu.o.Policy = fixed(nil)
			without := snapshot(t0, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(8, nil)}}}, nil)
			clk.Advance(c.missed)
			without.Time = clk.Now()
			if _, err := tu.RunOnce(context.Background(), without); err != nil {
				t.Fatal(err)
			}
			_, _ = tu.Restore(context.Background())
			if len(rec.Calls) != c.calls || tu.Status().Unrestored != 0 {
				t.Errorf("calls %q, %d unrestored; want %d calls, none", rec.Calls, tu.Status().Unrestored, c.calls)
			}
		})
	}
}

// successorHost is an MPS actuator whose client restarts go on under a
// new PID, as a restart hook that names its successor does.
type successorHost struct {
	recorder
	next map[uint32]uint32 // restarted PID -> successor
	succ map[uint32]uint32
}

func (s *successorHost) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	if n, ok := s.next[pid]; ok {
		if s.succ == nil {
			s.succ = map[uint32]uint32{}
		}
		s.succ[pid] = n
	}
	return s.recorder.RestartClient(ctx, uuid, pid, tenant)
}

func (s *successorHost) Successor(_ string, pid uint32) (uint32, bool) {
	n, ok := s.succ[pid]
	return n, ok
}

// A cap set with a client restart that goes on under a new PID follows
// the successor: its original moves there, in the journal too, and the
// restore at exit (or after a crash) sets the successor back, where the
// original of the old PID, gone, was closed and the successor ran on
// with the tuner's cap.
func TestMPSOriginalFollowsSuccessor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	host := &successorHost{next: map[uint32]uint32{7: 9}}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.5)}, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	tu.o.Policy = fixed(nil)
	half := 0.5
	for range 6 { // the successor runs; PID 7 is gone for good
		clk.Advance(15 * time.Second)
		s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(9, &half), mpsProc(8, nil)}}}, nil)
		if _, err := tu.RunOnce(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if o := j.Originals(); len(o) != 1 || o[0].Target.PID != 9 || o[0].Value != Fraction(1) {
		t.Fatalf("journaled originals %+v, want the successor's, 100%%", o)
	}
	host.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetMPSActiveThreads(GPU-0,9,1.0000)", "RestartClient(GPU-0,9)"}; !slices.Equal(host.Calls, want) {
		t.Errorf("restore at exit: calls %q, want %q", host.Calls, want)
	}
}

// A relaxing change is judged with the tenants its SLO error before
// counted. One whose counters a reload restarts just before the judgement
// has no request in its new fast window yet, and Objective leaves it out:
// judged then, by the other tenant alone, a change that made it late five
// times as often was kept. The judgement waits for its new window's
// requests, all after the change, and reverts it.
func TestRevertJudgedWithRestartedTenant(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	powT := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	pol := &fixed{}
	tu, err := New(Options{Policy: pol, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce, RevertAfter: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	usage := []tenant.Usage{{Tenant: "chat", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{7}}, {Tenant: "vision", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{8}}}
	slo := func(name string, total, good float64, epoch uint64) tenant.SLOStatus {
		return tenant.SLOStatus{Tenant: name, Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, GoodKnown: true,
			WindowRequests: 100, RequestsTotal: total, GoodRequestsTotal: good, Epoch: epoch}}
	}
	// vision: 1 late in 100 (burn 1) before the change, 5 in 100 after
	// (burn 5); chat never late. A reload restarts vision's counters at
	// the round the judgement comes due.
	visionAt := func(i int) tenant.SLOStatus {
		switch {
		case i < 9:
			return slo("vision", float64(1000+100*i), float64(1000+99*i), 1)
		case i == 9:
			return slo("vision", 0, 0, 2)
		default:
			return slo("vision", float64(100*(i-9)), float64(95*(i-9)), 2)
		}
	}
	reverted := false
	for i := range 12 {
		if i == 1 {
			*pol = fixed{{Target: powT, Current: Watts(700), Want: Watts(490), Relax: true}}
		} else {
			*pol = fixed{}
		}
		s := emptySnap(clk.Now())
		s.Usage = usage
		s.SLOs = []tenant.SLOStatus{slo("chat", float64(1000+100*i), float64(1000+100*i), 1), visionAt(i)}
		ds, err := tu.RunOnce(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if strings.HasPrefix(d.Reason, "revert:") {
				t.Logf("round %d: %s", i, d.Reason)
				reverted = i == 10
			}
		}
		clk.Advance(15 * time.Second)
	}
	if !reverted {
		t.Errorf("the change that made vision late five times as often is kept, or reverted without vision's requests after it")
	}
}
