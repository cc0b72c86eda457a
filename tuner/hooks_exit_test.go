package tuner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// exitRun is the run's tuner logging to the buffer returned, and the
// host's onCall set to on.
func (r *hookRun) exitRun(on func(call string)) *bytes.Buffer {
	var buf bytes.Buffer
	r.tu.mu.Lock()
	r.tu.o.Logger = log.NewLogfmtLogger(log.NewSyncWriter(&buf))
	r.tu.mu.Unlock()
	r.host.mu.Lock()
	r.host.onCall = on
	r.host.mu.Unlock()
	return &buf
}

// restoreReleasing runs the exit's restore (a minute's deadline, not
// reached), the hook running at exit released once the exit makes a call
// release names; it returns the exit's decisions and its log.
func (r *hookRun) restoreReleasing(t *testing.T, release func(call string) bool) ([]Decision, *bytes.Buffer) {
	t.Helper()
	logs := r.exitRun(func(c string) {
		if release(c) {
			r.host.release <- nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // (not reached)
	defer cancel()
	d, err := r.tu.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d, logs
}

// checkSetBackByItsHook fails the test unless the exit's decisions d set
// the power limit back, then settled what (a change of batch's cap back to
// 50%, whose hook ran at exit) as applied and its original as restored,
// with no restart of the exit's own and no original left open.
func (r *hookRun) checkSetBackByItsHook(t *testing.T, d []Decision, what string) {
	t.Helper()
	if got, want := outcomes(d), []string{"power_limit restored", "mps_active_threads applied", "mps_active_threads restored"}; !slices.Equal(got, want) || d[1].To != "50%" {
		t.Errorf("restore at exit: %+v, want the power limit, then the %s to 50%% settled as applied and its original closed as restored", d, what)
	}
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-0,8)", "RestartClient(GPU-0,8)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q (the relax's and the %s's, none at exit)", got, want, what)
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore at exit, want none", o)
	}
}

// checkNoRestoreFailure fails the test where the run counted, journaled
// or logged a restore failure, or logged an error.
func (r *hookRun) checkNoRestoreFailure(t *testing.T, logs *bytes.Buffer) {
	t.Helper()
	if c := r.tu.Status().Counts; c.RestoreFailures != 0 {
		t.Errorf("%d restore failures counted, want none", c.RestoreFailures)
	}
	if b := r.journalText(t); strings.Contains(b, EventRestoreFailed) {
		t.Errorf("journal holds a %s record, want none:\n%s", EventRestoreFailed, b)
	}
	if strings.Contains(logs.String(), "level=error") {
		t.Errorf("log holds an error line, want none:\n%s", logs)
	}
}

// journalText is the run's journal file, the test failed where it cannot
// be read.
func (r *hookRun) journalText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.j.path)
	if err != nil {
		t.Fatalf("reading the journal at %s: %v", r.j.path, err)
	}
	return string(b)
}

// The restore at exit sets back first the originals no hook holds
// (batch's pause, thawed), then waits for a successor's restore whose
// hook still runs: it ends within the deadline (once batch is thawed,
// here) and is settled as the restore, the client restarted once, no
// failure. (Before, the exit cancelled it, settled it as failed and
// restarted the client again: the tenant's serving stack restarted twice
// at every such exit, a restore failure counted, journaled and logged.)
func TestSuccessorRestoreHookAtExit(t *testing.T) {
	r, _ := successorRestoreStarted(t)
	d, logs := r.restoreReleasing(t, isPause)
	if got, want := outcomes(d), []string{"pause_duty restored", "mps_active_threads restored"}; !slices.Equal(got, want) {
		t.Errorf("restore at exit: %v, want batch's pause, then the restore's hook settled as restored", got)
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore at exit, want none", o)
	}
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-0,9)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q (once)", got, want)
	}
	if c := r.tu.Status().Counts; c.Restores != 2 {
		t.Errorf("%d restores counted, want 2", c.Restores)
	}
	r.checkNoRestoreFailure(t, logs)
}

// A restore's hook on GPU 0 that outlasts the restore's deadline keeps
// from nothing the rest: GPU 1's power limit is set back before the
// exit waits for it. The deadline comes (here, once GPU 1's limit is
// set back); the hook is cut then and its original left open in the
// journal for the next start, not set back beside it, the error naming
// it. (Waiting for it first, the exit used the whole deadline on it and
// left GPU 1's limit as the tuner set it; before that, it cut the hook
// at once and restarted the client again.)
func TestExitRestoresTheRestBeforeWaitingForAHook(t *testing.T) {
	r, after := successorRestoreStarted(t)
	power1 := Action{Target: Target{GPU: "GPU-1", Knob: gpu.KnobPowerLimit}, GPUIndex: 1, Current: Watts(700), Want: Watts(600), Reason: "test"}
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = fixed{power1}
	if d, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), after, nil)); err != nil || !slices.Equal(outcomes(d), []string{"power_limit applied"}) {
		t.Fatalf("round setting GPU 1's power limit: %v, %v", outcomes(d), err)
	}
	// the restore's deadline: once GPU 1's limit is set back (a second,
	// where the exit waits for the hook first)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.exitRun(func(c string) {
		if c == "SetPowerLimit(GPU-1,700)" {
			cancel()
		}
	})
	r.tu.mu.Lock()
	h := r.tu.hooks[Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}.String()]
	r.tu.mu.Unlock()
	d, err := r.tu.Restore(ctx)
	<-h.done
	if got := outcomes(d); !slices.Contains(got, "power_limit restored") || !slices.Contains(got, "pause_duty restored") || slices.ContainsFunc(got, func(o string) bool { return strings.HasPrefix(o, "mps") }) {
		t.Errorf("restore at exit: %v, want GPU 1's limit and batch's pause restored, the restore's hook not settled", got)
	}
	if !slices.Contains(r.host.Calls(), "SetPowerLimit(GPU-1,700)") {
		t.Errorf("calls %q, want GPU 1's limit set back within the deadline", r.host.Calls())
	}
	if err == nil || !strings.Contains(err.Error(), "GPU-0/mps_active_threads/pid9: its hook") || !strings.Contains(err.Error(), "did not end within the restore's deadline and was cut then") {
		t.Errorf("restore at exit: error %v, want the restore's hook named, cut at the deadline", err)
	}
	if !errors.Is(h.err, context.Canceled) {
		t.Errorf("the hook returned %v, want it cut at the deadline", h.err)
	}
	if o := mpsOriginals(r.j); len(o) != 1 || o[0].Target.PID != 9 {
		t.Errorf("journaled MPS originals %+v, want PID 9's left open", o)
	}
	if got, want := restartCalls(r.host), []string{"RestartClient(GPU-0,9)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q (none beside it)", got, want)
	}
	if b := r.journalText(t); strings.Contains(b, EventRestoreFailed) {
		t.Errorf("journal holds a %s record, want PID 9's original left open as it was:\n%s", EventRestoreFailed, b)
	}
}

// revertToOriginal is a run whose batch client 8 was relaxed by the
// tuner from 50% (its original) to 100%, and whose revert back to 50%
// is under way through a blocked restart hook, GPU 0's power limit set
// meanwhile.
func revertToOriginal(t *testing.T) *hookRun {
	t.Helper()
	r := newHookRun(t)
	r.round(t, relaxedBatch())
	r.host.waitStarted(t)
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if d := r.round(t); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
		t.Fatalf("round after the relax's hook: %v, want it applied", outcomes(d))
	}
	r.host.blockNext()
	r.revertsDue(relaxedBatch()) // (it made things worse)
	if d := r.round(t, power); !slices.Equal(outcomes(d), []string{"power_limit applied"}) {
		t.Fatalf("round of the revert: %v, want the power limit set while the revert's hook runs", outcomes(d))
	}
	r.host.waitStarted(t)
	return r
}

// The restore at exit waits, once GPU 0's power limit is set back, for a
// revert whose restart hook sets back its client's original: it ends
// within the deadline and is settled as applied, the original closed as
// restored by it, the client restarted by no one else. (Before, the exit
// cancelled it, settled it as failed and restarted the client again.)
func TestRevertHookAtExit(t *testing.T) {
	r := revertToOriginal(t)
	d, logs := r.restoreReleasing(t, isPower)
	r.checkSetBackByItsHook(t, d, "revert")
	if c := r.tu.Status().Counts; c.Reverts != 1 || c.Restores != 2 {
		t.Errorf("reverts %d, restores %d; want 1, 2", c.Reverts, c.Restores)
	}
	r.checkNoRestoreFailure(t, logs)
}

// A revert whose value is not its target's original (50% where the
// original is 100%) is not what the exit sets back: it is cut at once,
// as a change is, and the original set back.
func TestRevertHookNotToTheOriginalCutAtExit(t *testing.T) {
	r := newHookRun(t)
	r.revertsDue(relaxedBatch())
	r.round(t)
	r.host.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // (not reached)
	defer cancel()
	d, err := r.tu.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(d), []string{"mps_active_threads failed", "mps_active_threads restored"}; !slices.Equal(got, want) || d[1].To != "100%" {
		t.Errorf("restore at exit: %+v, want the revert cut (failed), then the original, 100%%, restored", d)
	}
}

// An original whose restore waits for a hook still running at exit (a
// client restart of the tenant whose revert's hook runs on another GPU:
// one tenant's restart hooks run one at a time) is set back once that
// hook has ended, not beside it.
func TestExitRestoresTheTenantsOtherClientAfterItsHook(t *testing.T) {
	r := newHookRun(t)
	round := func(actions ...Action) []Decision {
		t.Helper()
		r.clk.Advance(15 * time.Second)
		r.tu.o.Policy = fixed(actions)
		d, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), []proc{{8, "batch"}}, []proc{{9, "batch"}}))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	relax := relaxedBatch()
	other := capBatch
	other.GPUIndex, other.Target = 1, Target{GPU: "GPU-1", Knob: gpu.KnobMPSActiveThreads, PID: 9}
	round(relax)
	r.host.waitStarted(t)
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	round()
	round(other) // (its hook answers at once)
	waitHookEnded(t, r.tu)
	if d := round(); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
		t.Fatalf("round after GPU 1's cap: %v, want it applied", outcomes(d))
	}
	r.host.blockNext()
	r.revertsDue(relax) // (it made things worse)
	round(power)
	r.host.waitStarted(t)
	r.tu.mu.Lock()
	h := r.tu.hooks[capBatch.Target.String()]
	r.tu.mu.Unlock()
	beside := false
	r.exitRun(func(c string) {
		switch c {
		case "SetPowerLimit(GPU-0,700)":
			r.host.release <- nil
		case "RestartClient(GPU-1,9)":
			select {
			case <-h.done:
			default:
				beside = true
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // (not reached)
	defer cancel()
	d, err := r.tu.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(d), []string{"power_limit restored", "mps_active_threads applied", "mps_active_threads restored", "mps_active_threads restored"}; !slices.Equal(got, want) || d[3].GPU != "GPU-1" {
		t.Errorf("restore at exit: %+v, want the power limit, the revert and its original, then GPU 1's client", d)
	}
	if beside {
		t.Error("GPU 1's client of batch was restarted while batch's revert hook still ran on GPU 0")
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore at exit, want none", o)
	}
}

// A restore's hook that outlasts the restore's deadline at exit is named
// in the exit's error, and the journal and the actuators are closed when
// RestoreAtExit returns: the hooks are waited for a share of the deadline
// (hooksShare), the rest kept for the held originals and the closes.
// (On one deadline, the exit returned a bare "not finished" as the hook
// was cut, and the closes ran after it had returned, or never.)
func TestRestoreAtExitNamesTheCutHookAndCloses(t *testing.T) {
	r, after := successorRestoreStarted(t)
	rn := NewRunner(r.tu, r.j, r.clk, time.Minute, func() *tenant.Snapshot { return r.snapOf(after...) }, nil)
	rn.SetRestoreTimeout(300 * time.Millisecond)
	closes := countCloses(rn)
	runEnded(rn)
	err := rn.RestoreAtExit()
	if err == nil || !strings.Contains(err.Error(), "GPU-0/mps_active_threads/pid9: its hook") {
		t.Errorf("RestoreAtExit: %v, want the restore's hook named", err)
	}
	r.j.mu.Lock()
	closed := r.j.closed
	r.j.mu.Unlock()
	if !closed {
		t.Error("the journal was not closed when RestoreAtExit returned")
	}
	if n := closes.Load(); n != 1 {
		t.Errorf("the actuator closed %d times when RestoreAtExit returned, want 1", n)
	}
}

// deafHookStarted is a hook run whose round has capped batch's client
// PID 8, its restart hook started and not ending, cancelled or not, until
// r.host.release.
func deafHookStarted(t *testing.T) *hookRun {
	t.Helper()
	r := newHookRun(t)
	r.tu.bind(ActuatorsOf(deafHost{r.host}))
	r.round(t, capBatch)
	r.host.waitStarted(t)
	return r
}

// exitRunner is a runner of r's tuner and journal on r's snapshots, its
// restore at exit given 200 ms.
func (r *hookRun) exitRunner() *Runner {
	rn := NewRunner(r.tu, r.j, r.clk, time.Minute, func() *tenant.Snapshot { return r.snapOf() }, nil)
	rn.SetRestoreTimeout(200 * time.Millisecond)
	return rn
}

// closeFunc is an io.Closer calling itself.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// A policy's change back to the original (no revert) whose restart hook
// still runs at exit is waited for as a revert to it is: it ends within
// the deadline, is settled as applied and its original closed as
// restored, the client restarted by no one else. (Before, the exit
// waited only for reverts: it cut the change, settled it as failed and
// restarted the client a third time.)
func TestChangeBackHookAtExit(t *testing.T) {
	r := newHookRun(t)
	r.round(t, relaxedBatch())
	r.host.waitStarted(t)
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if d := r.round(t); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
		t.Fatalf("round after the relax's hook: %v, want it applied", outcomes(d))
	}
	r.host.blockNext()
	if d := r.round(t, capBatch, power); !slices.Equal(outcomes(d), []string{"power_limit applied"}) {
		t.Fatalf("round of the change back: %v, want the power limit set while the change's hook runs", outcomes(d))
	}
	r.host.waitStarted(t)
	d, logs := r.restoreReleasing(t, isPower)
	r.checkSetBackByItsHook(t, d, "change back")
	r.checkNoRestoreFailure(t, logs)
}

// A hook the exit cancels at its start (a change that sets back no
// original) and that has not ended by the restore's deadline is named so
// in the exit's error, not as one waited for and cut at the deadline.
func TestExitErrorNamesAHookCancelledAtItsStart(t *testing.T) {
	r := deafHookStarted(t)
	defer func() { r.host.release <- nil }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := r.tu.Restore(ctx)
	if err == nil || !strings.Contains(err.Error(), "GPU-0/mps_active_threads/pid8: its hook") || !strings.Contains(err.Error(), "was cancelled at the start of the exit's restore") {
		t.Errorf("restore at exit: error %v, want batch's change named as cancelled at the exit's start", err)
	}
}
