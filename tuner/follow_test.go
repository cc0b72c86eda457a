package tuner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// crashedJournal returns a journal that an earlier run wrote recs to and
// left as a crash leaves it, opened again (closed at the test's end).
func crashedJournal(t *testing.T, recs ...Record) *Journal {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journal")
	return reopen(t, writeJournal(t, p, recs...), p)
}

// writeJournal returns the journal at path (opened, created) with recs
// written to it.
func writeJournal(t *testing.T, path string, recs ...Record) *Journal {
	t.Helper()
	j := openJournal(t, path)
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// reopen closes j, as a crash would leave it, and opens path again (closed
// at the test's end).
func reopen(t *testing.T, j *Journal, path string) *Journal {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := openJournal(t, path)
	t.Cleanup(func() { _ = j2.Close() })
	return j2
}

// A paused tenant's pause follows its processes when they change (a
// client restarted under a new PID), with no new decision of the
// policy's; the journal names the new processes, so that the restore
// after a crash thaws them, not the ones that were gone; a tenant seen
// with no process keeps the pause as it was.
func TestPauseFollowsProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	snapWith := func(at time.Time, pids ...uint32) *tenant.Snapshot {
		var procs []gpu.Process
		for _, p := range pids {
			procs = append(procs, mpsProc(p, nil))
		}
		var usage []tenant.Usage
		if len(pids) > 0 {
			usage = []tenant.Usage{{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid0, PIDs: pids}}
		}
		return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}}, usage)
	}
	rec := &pauseRecorder{}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for i, pids := range [][]uint32{{7, 8}, {7, 8}, {9}, {}, {9}, {9, 10}} {
		if _, err := tu.RunOnce(ctx, snapWith(t0.Add(time.Duration(i)*time.Second), pids...)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[9],0.5)", "SetPauseDuty(GPU-0,train,[9 10],0.5)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q", rec.Calls, want)
	}
	if got := tu.Status().Counts.Actions[ActionKey{Knob: gpu.KnobPauseDuty, Outcome: OutcomeApplied}]; got != 1 {
		t.Errorf("applied pause actions counted: %d, want the policy's 1 (a follow is not the policy's)", got)
	}
	// an unclean exit: the next start thaws the processes last paused
	j2 := reopen(t, j, path)
	if o := j2.Originals(); len(o) != 1 || !slices.Equal(o[0].PIDs, []uint32{9, 10}) {
		t.Fatalf("journal's originals %+v, want the pause with pid 9, 10", o)
	}
	rec2 := &pauseRecorder{}
	tu2, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec2), Journal: j2, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu2.RunOnce(ctx, snapWith(t0.Add(time.Hour), 9, 10)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetPauseDuty(GPU-0,train,[9 10],0)"}; !slices.Equal(rec2.Calls, want) {
		t.Errorf("at the next start: calls %q, want %q", rec2.Calls, want)
	}
}

// A tenant on an MPS GPU and a vGPU host is paused by its process on the
// one and its VM's host process on the other, never by the guest's PIDs,
// whichever GPU asks.
func TestPausePIDsAcrossModes(t *testing.T) {
	snap := &tenant.Snapshot{
		Readings: &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-A", Mode: gpu.SharingMPS}, {UUID: "GPU-B", Mode: gpu.SharingVGPU}}},
		Usage: []tenant.Usage{
			{Tenant: "train", UUID: "GPU-A", PIDs: []uint32{5}},
			{Tenant: "train", UUID: "GPU-B", PIDs: []uint32{1234}, VMPIDs: []uint32{4242}},
			{Tenant: "vdi", UUID: "GPU-B", PIDs: []uint32{77}},
		},
	}
	if got := PausePIDs(snap, "train"); !slices.Equal(got, []uint32{5, 4242}) {
		t.Errorf("train: %v, want its process 5 and its VM's host process 4242, not the guest's 1234", got)
	}
	if got := PausePIDs(snap, "vdi"); got != nil {
		t.Errorf("vdi (a VM whose host process is not known): %v, want none", got)
	}
}

// A tenant that runs on another GPU only, under new processes, is not
// followed there by the pause of the GPU it left: that pause is thawed.
func TestPauseNotFollowedToAnotherGPU(t *testing.T) {
	rec := &pauseRecorder{}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	devices := []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS}, {UUID: "GPU-1", Index: 1, Up: true, Mode: gpu.SharingMPS}}
	for i, u := range []tenant.Usage{{UUID: uuid0, PIDs: []uint32{7, 8}}, {UUID: "GPU-1", PIDs: []uint32{9}}, {UUID: "GPU-1", PIDs: []uint32{9}}} {
		u.Tenant, u.Class = "train", gpu.ClassBatch
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), devices, []tenant.Usage{u})); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			rec.Calls = nil
		}
	}
	if want := []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q (thawed at the second round, never followed)", rec.Calls, want)
	}
}

// trainSnap is train (batch, or latency) on GPU-0 with the processes pids.
func trainSnap(at time.Time, class gpu.TenantClass, pids ...uint32) *tenant.Snapshot {
	var usage []tenant.Usage
	if len(pids) > 0 {
		usage = []tenant.Usage{{Tenant: "train", Class: class, UUID: uuid0, PIDs: pids}}
	}
	s := snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS}}, usage)
	s.Tenants = []tenant.Info{{Name: "train", Class: class}}
	return s
}

// failPausing fails a pause above 0 of a process list holding pid.
type failPausing struct {
	pauseRecorder
	pid uint32
}

func (f *failPausing) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	_ = f.pauseRecorder.SetPauseDuty(ctx, uuid, tenant, pids, duty)
	if slices.Contains(pids, f.pid) && duty > 0 {
		return os.ErrPermission
	}
	return nil
}

// A follow is journaled before it is made: while the journal cannot be
// written nothing is paused; a follow whose apply fails leaves the
// journal naming the old processes and the new (either may be frozen),
// and is tried again 15 s later, then 30 s, twice as long each time.
func TestPauseFollowJournaledAndBackedOff(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	rec := &failPausing{pid: 9}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	round := func(pids ...uint32) []Decision {
		t.Helper()
		ds, err := tu.RunOnce(ctx, trainSnap(clk.Now(), gpu.ClassBatch, pids...))
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(5 * time.Second)
		return ds
	}
	round(7, 8)
	failWrites(t)
	rec.Calls = nil
	if ds := round(9); len(ds) != 1 || ds[0].Applied || !strings.Contains(ds[0].Reason, "could not be journaled") {
		t.Errorf("with the journal unwritable: decisions %+v, want the follow not made", ds)
	}
	if len(rec.Calls) != 0 {
		t.Errorf("with the journal unwritable the tuner acted: %q", rec.Calls)
	}
	writeFile = (*os.File).Write
	for clk.Now().Before(t0.Add(70 * time.Second)) {
		round(9) // t0+10 s ... t0+65 s
	}
	// tried at +20 s (15 s after the first failure at +5 s) and at +50 s
	want := []string{"SetPauseDuty(GPU-0,train,[9],0.5)", "SetPauseDuty(GPU-0,train,[9],0.5)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q", rec.Calls, want)
	}
	if got := tu.Status().Counts.Actions[ActionKey{Knob: gpu.KnobPauseDuty, Outcome: OutcomeFailed}]; got != 0 {
		t.Errorf("failed follows counted among the policy's actions: %d", got)
	}
	j2 := reopen(t, j, path)
	if o := j2.Originals(); len(o) != 1 || !slices.Equal(o[0].PIDs, []uint32{7, 8, 9}) {
		t.Errorf("journal's originals %+v, want the pause naming pid 7, 8 and 9", o)
	}
}

// thawFails is a pause actuator whose thaws fail.
type thawFails struct{ pauseRecorder }

func (f *thawFails) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	_ = f.pauseRecorder.SetPauseDuty(ctx, uuid, tenant, pids, duty)
	if duty == 0 {
		return os.ErrPermission
	}
	return nil
}

// A paused tenant classed latency now (its tenants file changed) is
// thawed, never followed, whether or not the thaw succeeds.
func TestPauseOfLatencyTenantThawed(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  gpu.PauseActuator
		want []string
	}{
		{"thawed", &pauseRecorder{}, []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0)"}},
		{"the thaw fails", &thawFails{}, []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0)", "SetPauseDuty(GPU-0,train,[7 8],0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(tc.act), Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*tenant.Snapshot{trainSnap(t0, gpu.ClassBatch, 7, 8), trainSnap(t0.Add(15*time.Second), gpu.ClassLatency, 9), trainSnap(t0.Add(30*time.Second), gpu.ClassLatency, 9)} {
				clk.Set(s.Time)
				if _, err := tu.RunOnce(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			var calls []string
			switch a := tc.act.(type) {
			case *pauseRecorder:
				calls = a.Calls
			case *thawFails:
				calls = a.Calls
			}
			if !slices.Equal(calls, tc.want) {
				t.Errorf("calls %q, want %q", calls, tc.want)
			}
		})
	}
}

// While the journal cannot be written nothing is followed, to fewer
// processes either; a pause set back forgets what the rounds counted of
// it (no map grows with the pauses a host has seen).
func TestPauseFollowNeedsTheJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	rec := &pauseRecorder{}
	clk := gpu.NewManualClock(t0)
	kill := &KillSwitch{}
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(ctx, trainSnap(t0, gpu.ClassBatch, 7, 8)); err != nil {
		t.Fatal(err)
	}
	failWrites(t)
	rec.Calls = nil
	clk.Advance(5 * time.Second)
	_, _ = tu.RunOnce(ctx, trainSnap(clk.Now(), gpu.ClassBatch, 7))
	if len(rec.Calls) != 0 {
		t.Errorf("with the journal unwritable, followed: %q", rec.Calls)
	}
	writeFile = (*os.File).Write
	for range 3 {
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(ctx, trainSnap(clk.Now(), gpu.ClassBatch)); err != nil { // unseen
			t.Fatal(err)
		}
	}
	kill.Engaged.Store(true)
	clk.Advance(15 * time.Second)
	if _, err := tu.RunOnce(ctx, trainSnap(clk.Now(), gpu.ClassBatch)); err != nil {
		t.Fatal(err)
	}
	if len(tu.originals) != 0 || len(tu.followAt) != 0 || len(tu.unseen) != 0 || len(tu.gone) != 0 {
		t.Errorf("after the thaw: originals %v, followAt %v, unseen %v, gone %v; want none", tu.originals, tu.followAt, tu.unseen, tu.gone)
	}
}

// What the rounds counted of a pause thawed while its tenant was unseen
// is not the next pause's: that one keeps through a short absence.
func TestPauseUnseenCountStartsAgain(t *testing.T) {
	rec := &pauseRecorder{}
	clk := gpu.NewManualClock(t0)
	kill := &KillSwitch{}
	n := 0
	policy := deciderFunc(func(*State) []Action {
		n++
		if n == 1 || n == 20 {
			return []Action{pauseAction("train", gpu.ClassBatch, 0, 0.5)}
		}
		return nil
	})
	tu, err := New(Options{Policy: policy, Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	step := func(pids ...uint32) {
		t.Helper()
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), trainSnap(clk.Now(), gpu.ClassBatch, pids...)); err != nil {
			t.Fatal(err)
		}
	}
	step(7, 8) // paused
	step()     // unseen from here
	step()
	kill.Engaged.Store(true)
	step() // thawed by the kill switch while unseen
	kill.Engaged.Store(false)
	for n < 19 {
		step(7, 8)
	}
	rec.Calls = nil
	step(7, 8) // paused again
	step()     // missing for one round (a client restarting)
	if want := []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("calls %q, want %q (a 15 s absence keeps the pause)", rec.Calls, want)
	}
}
