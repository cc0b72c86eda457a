package tuner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An MPS client's cap set back to its original by a change of a round (a
// revert, a policy's change back to it, a rollback) closes that original:
// the exit sets nothing back and restarts the client no second time, the
// journal holds it open no more, and no restore is counted; the next
// change of the cap journals a fresh original. A revert to another value,
// and a device setting's revert (its original is the policy's setting to
// go back to: State.Originals), keep the original open for the exit.
// (Before, every MPS original stayed open, and the exit restarted the
// client again for nothing.)
func TestMPSSetBackClosesOriginal(t *testing.T) {
	watts := func(from, to Watts, revert bool) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: from, Want: to, Revert: revert, Reason: "test"}
	}
	powerFails := errors.New("power limit refused by the driver")
	back := revertOf(mpsAction(7, 1, 0.4))
	tests := []struct {
		name   string
		rounds [][]Action
		fail   error // SetPowerLimit's answer
		// exit are the actuator calls of the restore at exit; open, the
		// originals open before it
		exit []string
		open int
	}{
		{"revert to the original", [][]Action{{mpsAction(7, 1, 0.4)}, {back}}, nil, nil, 0},
		{"policy's change back to the original", [][]Action{{mpsAction(7, 1, 0.4)}, {mpsAction(7, 0.4, 1)}}, nil, nil, 0},
		{"rolled back to the original", [][]Action{{mpsAction(7, 1, 0.4), watts(700, 490, false)}}, powerFails,
			[]string{"SetPowerLimit(GPU-0,700)"}, 1}, // (the failed power limit's, which nobody knows the state of)
		{"revert to another value", [][]Action{{mpsAction(7, 1, 0.4)}, {mpsAction(7, 0.4, 0.6)}, {revertOf(mpsAction(7, 0.4, 0.6))}},
			nil, []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)"}, 1},
		// (open for the exit, which finds it at its original: no call,
		// TestExitClosesSettingAtOriginal)
		{"power limit's revert", [][]Action{{watts(700, 490, false)}, {watts(490, 700, true)}}, nil, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			rec.Errs = map[string]error{"SetPowerLimit": tc.fail}
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			tu, clk := newTestTuner(t, ModeEnforce, rec, nil, j)
			for _, actions := range tc.rounds {
				clk.Advance(5 * time.Minute)
				tu.o.Policy = fixed(actions)
				ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if !d.Applied && d.Outcome != OutcomeFailed {
						t.Fatalf("round %v: %+v, want each change applied", actions, ds)
					}
				}
			}
			if got := len(j.Originals()); got != tc.open {
				t.Errorf("%d originals open in the journal, want %d: %+v", got, tc.open, j.Originals())
			}
			if got := tu.Status().Unrestored; got != tc.open {
				t.Errorf("%d unrestored, want %d", got, tc.open)
			}
			rec.Calls, rec.Errs = nil, nil
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Calls, tc.exit) {
				t.Errorf("calls at exit %q, want %q", rec.Calls, tc.exit)
			}
			if got := tu.Status().Counts.Restores; got != uint64(tc.open) {
				t.Errorf("%d restores counted, want %d", got, tc.open)
			}
		})
	}
}

// The next change of a cap whose original was closed so journals a fresh
// one, of the value in force then, which the exit sets back.
func TestMPSSetBackThenFreshOriginal(t *testing.T) {
	rec := &recorder{}
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	tu, clk := newTestTuner(t, ModeEnforce, rec, nil, j)
	for _, a := range []Action{mpsAction(7, 1, 0.4), revertOf(mpsAction(7, 1, 0.4)), mpsAction(7, 1, 0.5)} {
		clk.Advance(5 * time.Minute)
		tu.o.Policy = fixed([]Action{a})
		if ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil || len(ds) != 1 || !ds[0].Applied {
			t.Fatalf("round of %v: %+v, %v; want it applied", a, ds, err)
		}
	}
	o := j.Originals()
	if len(o) != 1 || o[0].Value != Value(Fraction(1)) || !o[0].At.Equal(clk.Now()) {
		t.Fatalf("originals %+v, want one, 100%%, journaled by the last change", o)
	}
	rec.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("calls at exit %q, want %q", rec.Calls, want)
	}
}

// A revert to the original through the restart hook closes the original
// once it is settled: by a round, or by the exit that finds it ended and
// not settled yet (cancelHooks). The client is restarted by the relax and
// the revert alone.
func TestMPSRevertHookSetBackClosesOriginal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round bool
	}{{"settled by a round", true}, {"ended before the exit", false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := revertToOriginal(t)
			r.host.release <- nil
			waitHookEnded(t, r.tu)
			if tc.round {
				if d := r.round(t); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
					t.Fatalf("round after the revert's hook: %v, want it applied", outcomes(d))
				}
				if o := r.j.Originals(); len(o) != 1 || o[0].Target.Knob != gpu.KnobPowerLimit {
					t.Errorf("originals open after the revert %+v, want the power limit's alone", o)
				}
			}
			if _, err := r.tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := restartCalls(r.host), []string{"RestartClient(GPU-0,8)", "RestartClient(GPU-0,8)"}; !slices.Equal(got, want) {
				t.Errorf("restarts %q, want %q (the relax's and the revert's, none at exit)", got, want)
			}
			if c := r.tu.Status().Counts; c.Reverts != 1 || c.Restores != 1 {
				t.Errorf("reverts %d, restores %d; want 1, 1 (the power limit's)", c.Reverts, c.Restores)
			}
		})
	}
}

// A client restarted under a new PID the restart hook names takes its
// original there; the revert of its cap on that successor closes it, and
// the successor of that restart takes no original: the exit restarts no
// client. (Before, the original followed it, and the exit restarted it.)
func TestMPSSetBackOnSuccessor(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	host := &successorHost{next: map[uint32]uint32{7: 9, 9: 11}}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	on9 := mpsAction(9, 0.5, 1)
	on9.Revert = true
	for _, r := range []struct {
		a   []Action
		pid uint32 // the client's PID in the snapshot
	}{{[]Action{mpsAction(7, 1, 0.5)}, 7}, {nil, 9}, {[]Action{on9}, 9}, {nil, 11}} {
		clk.Advance(5 * time.Minute)
		tu.o.Policy = fixed(r.a)
		s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(r.pid, nil), mpsProc(8, nil)}}}, nil)
		if _, err := tu.RunOnce(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals open %+v, want none", o)
	}
	host.Calls = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(host.Calls) != 0 {
		t.Errorf("calls at exit %q, want none", host.Calls)
	}
}

// Under a server at 50%, client 8 (uncapped: original 1, in force as the
// server's 50%) is capped to 30% and later given back as autotune gives a
// share back (thousandthCap 0.8: held as the server's 50%, the very state
// of the original). That change sets the cap back to its original as the
// MPS controller holds it (State.MPSHeld): the original is closed, and the
// exit restarts the client no second time. (Before, the raw 0.8 and 1
// were compared: the original stayed open, and the exit, or after a crash
// the next start, restarted the client again for nothing.)
func TestMPSGiveBackHeldAsOriginalClosesOriginal(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	c, f := mpsDaemon(t, "50.0", `echo ok`, clk)
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	tu, err := New(Options{Policy: thousandthCap(0.3), Actuators: ActuatorsOf(c), MPSStates: c, Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func() {
		if _, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
			t.Fatal(err)
		}
		waitHookEnded(t, tu)
		clk.Advance(10 * time.Minute)
	}
	run()
	run()
	tu.o.Policy = thousandthCap(0.8) // give back: held as the server's 50%
	run()
	run()
	st, _ := c.State(uuid0, 8)
	before := len(f.Calls(t, "restart-hook"))
	if before != 2 {
		t.Fatalf("client 8 restarted %d times by the cap and its give-back, want 2", before)
	}
	if n := len(j.Originals()); n != 0 {
		t.Errorf("the journal holds %d originals open after the give-back, want none (%v)", n, j.Originals())
	}
	if _, err := tu.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls(t, "restart-hook")) - before; n != 0 {
		t.Errorf("the exit restarted client 8 %d more time(s), though its cap in force (%s) is its original's (1, held as the server's 50%%)", n, orNil(st.Effective))
	}
}
