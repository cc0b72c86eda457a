package tuner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A device setting the tuner set back to its original itself (a revert, a
// rollback, a policy's change back) keeps its original open (the policies'
// setting to go back to), and the exit closes it as restored without an
// actuator call where the tuner knows the value in force is the original:
// its last change set it (and nothing failed since, and no snapshot taken
// after it reads another value). With VMs running, a vGPU host refuses a
// scheduler change as busy: before, the exit set the scheduler again,
// retried it until its deadline and counted a restore failure for a
// setting already at its original. Where the value in force is unknown (a
// failed change since, the GPU lost, a snapshot reading another value) the
// exit sets it back as before.
func TestExitClosesSettingAtOriginal(t *testing.T) {
	busy := fmt.Errorf("sim: vGPU scheduler of %s: VMs running (vm-a): %w", uuid0, gpu.ErrBusy)
	broke := errors.New("nvmlDeviceSetVgpuSchedulerState: ERROR_UNKNOWN")
	set := func(knob gpu.Knob, from, to Value, revert bool) Action {
		return Action{Target: Target{GPU: uuid0, Knob: knob}, Current: from, Want: to, Revert: revert, Reason: "test"}
	}
	sched := func(from, to string, revert bool) Action {
		return set(gpu.KnobVGPUScheduler, Scheduler{Policy: gpu.VGPUPolicy(from)}, Scheduler{Policy: gpu.VGPUPolicy(to)}, revert)
	}
	reads := func(policy gpu.VGPUPolicy) func(*gpu.Device) {
		return func(d *gpu.Device) { d.Scheduler = &gpu.VGPUScheduler{Policy: policy} }
	}
	down := func(d *gpu.Device) { d.Up = false }
	type round struct {
		a    []Action
		errs map[string]error // the actuators' answers in the round
		dev  func(*gpu.Device)
	}
	// a busy scheduler is tried at once and once more at the deadline
	again := []string{"SetVGPUScheduler(GPU-0,best-effort)", "SetVGPUScheduler(GPU-0,best-effort)"}
	changed := []round{{a: []Action{sched("best-effort", "equal-share", false)}}}
	reverted := append(slices.Clone(changed), round{a: []Action{sched("equal-share", "best-effort", true)}})
	tests := []struct {
		name   string
		mode   gpu.SharingMode
		rounds []round
		exit   []string // the actuator calls at exit (the scheduler's answer busy)
		closed int      // restores without a call
		failed uint64   // restore failures
	}{
		{"scheduler reverted, VMs running at exit", gpu.SharingVGPU, reverted, nil, 1, 0},
		{"scheduler's change back refused after the revert", gpu.SharingVGPU,
			append(slices.Clone(reverted), round{a: []Action{sched("best-effort", "fixed-share", false)}, errs: map[string]error{"SetVGPUScheduler": busy}}), nil, 1, 0},
		{"time slice: a policy's change back", gpu.SharingTimeSlice, []round{
			{a: []Action{set(gpu.KnobComputeTimeSlice, Level("default"), Level("short"), false)}},
			{a: []Action{set(gpu.KnobComputeTimeSlice, Level("short"), Level("default"), false)}}}, nil, 1, 0},
		{"power limit reverted", gpu.SharingMPS, []round{
			{a: []Action{set(gpu.KnobPowerLimit, Watts(700), Watts(490), false)}},
			{a: []Action{set(gpu.KnobPowerLimit, Watts(490), Watts(700), true)}}}, nil, 1, 0},
		{"clock lock rolled back (the power limit failed)", gpu.SharingMPS, []round{
			{a: []Action{set(gpu.KnobLockedClocks, ClockRange{}, ClockRange{MinMHz: 1980, MaxMHz: 1980}, false), set(gpu.KnobPowerLimit, Watts(700), Watts(490), false)},
				errs: map[string]error{"SetPowerLimit": errors.New("nvmlDeviceSetPowerManagementLimit: ERROR_UNKNOWN")}}},
			[]string{"SetPowerLimit(GPU-0,700)"}, 1, 0},

		// the value in force unknown, or another: set back as before
		{"scheduler's change failed after the revert", gpu.SharingVGPU,
			append(slices.Clone(reverted), round{a: []Action{sched("best-effort", "fixed-share", false)}, errs: map[string]error{"SetVGPUScheduler": broke}}),
			again, 0, 1},
		{"scheduler's revert failed", gpu.SharingVGPU,
			append(slices.Clone(changed), round{a: []Action{sched("equal-share", "best-effort", true)}, errs: map[string]error{"SetVGPUScheduler": broke}}),
			again, 0, 1},
		{"GPU read down after the revert", gpu.SharingVGPU, append(slices.Clone(reverted), round{dev: down}),
			again, 0, 1},
		{"GPU read down after the revert, then up", gpu.SharingVGPU, append(slices.Clone(reverted), round{dev: down}, round{}),
			again, 0, 1},
		{"scheduler read at another value after the revert", gpu.SharingVGPU, append(slices.Clone(reverted), round{dev: reads("equal-share")}),
			again, 0, 1},
		// a reading alone never stands for the tuner's call: a sample taken
		// while the change ran reads the value before it (the change left
		// in force, closed as restored, before)
		{"scheduler changed, then read at its original by a sample lagging the change", gpu.SharingVGPU,
			append(slices.Clone(changed), round{dev: reads("best-effort")}),
			again, 0, 1},
		{"scheduler read at its original by a snapshot after a failed revert", gpu.SharingVGPU,
			append(slices.Clone(changed), round{a: []Action{sched("equal-share", "best-effort", true)}, errs: map[string]error{"SetVGPUScheduler": broke}}, round{dev: reads("best-effort")}),
			again, 0, 1},
		{"scheduler reverted to another value", gpu.SharingVGPU, append(slices.Clone(changed),
			round{a: []Action{sched("equal-share", "fixed-share", false)}}, round{a: []Action{sched("fixed-share", "equal-share", true)}}),
			again, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			tu, clk := newTestTuner(t, ModeEnforce, rec, nil, j)
			for _, r := range tc.rounds {
				clk.Advance(5 * time.Minute)
				tu.o.Policy, rec.Errs = fixed(r.a), r.errs
				dev := gpu.Device{UUID: uuid0, Up: true, Mode: tc.mode}
				if r.dev != nil {
					r.dev(&dev)
				}
				if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), []gpu.Device{dev}, nil)); err != nil {
					t.Fatal(err)
				}
			}
			open := len(j.Originals())
			rec.Calls, rec.Errs = nil, map[string]error{"SetVGPUScheduler": busy}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			ds, err := tu.Restore(ctx)
			if (err != nil) != (tc.failed > 0) {
				t.Errorf("restore's error %v, want one: %v", err, tc.failed > 0)
			}
			if !slices.Equal(rec.Calls, tc.exit) {
				t.Errorf("calls at exit %q, want %q", rec.Calls, tc.exit)
			}
			closed := 0
			for _, d := range ds {
				if strings.Contains(d.Reason, "already at its original value: nothing to set back") {
					closed++
					if d.Outcome != OutcomeRestored {
						t.Errorf("decision %+v, want restored", d)
					}
				}
			}
			if closed != tc.closed {
				t.Errorf("%d restores closed without a call, want %d: %+v", closed, tc.closed, ds)
			}
			c := tu.Status().Counts
			if c.RestoreFailures != tc.failed || c.Restores != uint64(open)-tc.failed {
				t.Errorf("restores %d, failures %d; want %d, %d", c.Restores, c.RestoreFailures, uint64(open)-tc.failed, tc.failed)
			}
			if got := len(j.Originals()); got != int(tc.failed) {
				t.Errorf("%d originals open in the journal after the exit, want %d: %+v", got, tc.failed, j.Originals())
			}
		})
	}
}

// Where the power limit reads back, the exit closes its original without
// a call only where the tuner's change back read it back at the original:
// a change back whose read-back failed leaves the value in force unknown,
// and the exit sets the limit back.
func TestExitPowerLimitReadBackAtOriginal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		readErr error // the read-back's answer in the change back
		exit    []string
	}{
		{"read back at the original", nil, nil},
		{"not read back", errors.New("nvmlDeviceGetPowerManagementLimit: ERROR_UNKNOWN"), []string{"SetPowerLimit(GPU-0,700)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := &clampingGPU{minW: 200, defW: 700, limitW: 700}
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			watts := func(from, to Watts) Action {
				return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: from, Want: to, Reason: "test"}
			}
			for i, a := range []Action{watts(700, 450), watts(450, 700)} {
				clk.Advance(5 * time.Minute)
				tu.o.Policy = fixed{a}
				if i == 1 {
					host.readErr = tc.readErr
				}
				if ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil || len(ds) != 1 || !ds[0].Applied {
					t.Fatalf("round of %v: %+v, %v; want it applied", a, ds, err)
				}
			}
			host.Calls, host.readErr = nil, nil
			ds, err := tu.Restore(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(host.Calls, tc.exit) {
				t.Errorf("calls at exit %q, want %q", host.Calls, tc.exit)
			}
			want := "restored at exit; " + whyAtOriginal + " (as the tuner's last change of it set it, read back)"
			if tc.exit != nil {
				want = "restored at exit"
			}
			if len(ds) != 1 || ds[0].Outcome != OutcomeRestored || ds[0].Reason != want {
				t.Errorf("decisions %+v, want one restored: %q", ds, want)
			}
		})
	}
}

// An original an earlier run left open in the journal, whose restore at
// start was refused (VMs running), is set back at exit unless a snapshot
// of this run reads the setting at its original (this process made no
// call for a reading to lag); the start's restore never closes one
// without a call.
func TestExitRecoveredOriginalAtOriginal(t *testing.T) {
	busy := fmt.Errorf("VMs running (vm-a): %w", gpu.ErrBusy)
	for _, tc := range []struct {
		name   string
		reads  gpu.VGPUPolicy // the scheduler the rounds' snapshots read ("": none)
		exit   []string
		failed uint64
	}{
		{"never read", "", []string{"SetVGPUScheduler(GPU-0,best-effort)"}, 2},
		{"read at another value", "equal-share", []string{"SetVGPUScheduler(GPU-0,best-effort)"}, 2},
		{"read at the original", "best-effort", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			dev := func(p gpu.VGPUPolicy) gpu.Device {
				d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingVGPU}
				if p != "" {
					d.Scheduler = &gpu.VGPUScheduler{Policy: p}
				}
				return d
			}
			a := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}, Current: Scheduler{Policy: "best-effort"}, Want: Scheduler{Policy: "equal-share"}, Reason: "test"}
			earlier, _ := newTestTuner(t, ModeEnforce, &recorder{}, []Action{a}, j)
			if ds, err := earlier.RunOnce(context.Background(), snapshot(t0, []gpu.Device{dev("best-effort")}, nil)); err != nil || len(ds) != 1 || !ds[0].Applied {
				t.Fatalf("earlier run: %+v, %v", ds, err)
			}
			j.Close() // (an exit without its restore)
			j = openJournal(t, path)
			defer j.Close()
			rec := &recorder{}
			rec.Errs = map[string]error{"SetVGPUScheduler": busy}
			tu, clk := newTestTuner(t, ModeEnforce, rec, nil, j)
			clk.Advance(time.Hour)
			if _, err := tu.Recover(context.Background(), snapshot(clk.Now(), []gpu.Device{dev(tc.reads)}, nil)); err == nil {
				t.Fatal("the start's restore took, want it refused")
			}
			clk.Advance(time.Minute)
			if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), []gpu.Device{dev(tc.reads)}, nil)); err != nil {
				t.Fatal(err)
			}
			rec.Calls = nil
			if _, err := tu.Restore(context.Background()); (err != nil) != (tc.exit != nil) {
				t.Errorf("exit's error %v, want one: %v", err, tc.exit != nil)
			}
			if !slices.Equal(rec.Calls, tc.exit) {
				t.Errorf("calls at exit %q, want %q", rec.Calls, tc.exit)
			}
			if c := tu.Status().Counts; c.RestoreFailures != tc.failed {
				t.Errorf("restore failures %d, want %d (the start's, and the exit's)", c.RestoreFailures, tc.failed)
			}
		})
	}
}

// An original adopted from a journal another exporter renamed over this
// one, whose setting this run never changed, is set back at exit though
// this run's last snapshot reads the setting at its original: that
// reading may be older than the other exporter's change, which the
// adopted record says is in force. Before, the exit trusted the reading
// and closed it without a call, the other's change left in force.
func TestExitAdoptedOriginalNotClosedOnAReading(t *testing.T) {
	dir := t.TempDir()
	dev := func(p gpu.VGPUPolicy) []gpu.Device {
		return []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: p}}}
	}
	put := filepath.Join(dir, "other")
	jb := openJournal(t, put)
	change := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}, Current: Scheduler{Policy: "best-effort"}, Want: Scheduler{Policy: "equal-share"}, Reason: "test"}
	other, _ := newTestTuner(t, ModeEnforce, &recorder{}, []Action{change}, jb)
	if ds, err := other.RunOnce(context.Background(), snapshot(t0, dev("best-effort"), nil)); err != nil || len(ds) != 1 || !ds[0].Applied {
		t.Fatalf("the other exporter's change: %+v, %v", ds, err)
	}
	jb.Close()

	p := filepath.Join(dir, "journal")
	j := openJournal(t, p)
	defer j.Close()
	rec := &recorder{}
	tu, clk := newTestTuner(t, ModeEnforce, rec, nil, j)
	clk.Advance(time.Minute)
	if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), dev("best-effort"), nil)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(put, p); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), dev("best-effort"), nil)); err != nil {
		t.Fatal(err)
	}
	if e := tu.Status().Exit; e.AtExit != 1 {
		t.Fatalf("exit restores %+v, want the adopted original", e)
	}
	rec.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetVGPUScheduler(GPU-0,best-effort)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("calls at exit %q, want %q: the adopted original set back", rec.Calls, want)
	}
}

// readSetting reads the clock lock as the readings carry it: not read
// where they carry none, read with no range where locked, read as no
// range set where not locked.
func TestReadSettingClocks(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name   string
		locked *bool
		v      Value
		read   bool
	}{
		{"not carried", nil, nil, false},
		{"locked", &yes, nil, true},
		{"not locked", &no, ClockRange{}, true},
	} {
		v, read := readSetting(&gpu.Device{ClocksLocked: c.locked}, gpu.KnobLockedClocks)
		if v != c.v || read != c.read {
			t.Errorf("%s: readSetting = %v, %v; want %v, %v", c.name, v, read, c.v, c.read)
		}
	}
}
