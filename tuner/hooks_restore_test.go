package tuner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A restore at start deferred to a restarted client's successor (an
// earlier run restarted embed's client 7 and crashed before its successor
// came) runs through the restart hook off the round, as every other hook:
// the round that finds the successor (9) starts the restore's hook and
// goes on (another tenant's pause is set in that round while the hook
// runs), the status says the hook runs, and the first round after it
// ends settles it: restored, counted, its original closed in the journal.
// (Before, that round ran the hook to its end: every GPU's round waited
// for it, up to --mps.restart-hook.timeout.)
func TestSuccessorRestoreHookOffTheRound(t *testing.T) {
	r, after := successorRestoreStarted(t)
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	d := r.roundOn(t, after)
	if got, want := outcomes(d), []string{"mps_active_threads restored"}; !slices.Equal(got, want) || d[0].Reason != whyRecovered {
		t.Fatalf("round after the restore's hook ended: %v (%+v), want %v, %q", got, d, want, whyRecovered)
	}
	if o := mpsOriginals(r.j); len(o) != 0 {
		t.Errorf("journaled MPS originals %+v after the restore, want none", o)
	}
	st := r.tu.Status()
	if len(st.Hooks) != 0 || st.Unrestored != 1 || st.Counts.Restores != 1 || st.Counts.RestoreFailures != 0 {
		t.Errorf("status hooks %+v, %d unrestored, %d restores, %d failed after the restore; want none, batch's pause alone, 1, 0",
			st.Hooks, st.Unrestored, st.Counts.Restores, st.Counts.RestoreFailures)
	}
	want := []string{"SetPauseDuty(GPU-0,batch,0.5)", "SetMPSActiveThreads(GPU-0,9,1.00)", "RestartClient(GPU-0,9)"}
	if got := r.host.Calls(); len(got) != len(want) || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) || !slices.Equal(slices.DeleteFunc(slices.Clone(got), isPause), want[1:]) {
		t.Errorf("calls %q, want %q (the pause in any place)", got, want)
	}
}

// mpsOriginals are the MPS originals open in j.
func mpsOriginals(j *Journal) []Original {
	return slices.DeleteFunc(j.Originals(), func(o Original) bool { return o.Target.Knob != gpu.KnobMPSActiveThreads })
}

func isPause(c string) bool { return len(c) > 12 && c[:12] == "SetPauseDuty" }

// successorRestoreStarted runs a start whose restore at start waits for
// the successor of embed's client 7, which an earlier run restarted and
// crashed; the successor, 9, comes at once, and is told once the bound has
// passed, in a round that also pauses batch. It returns the run, the
// restore's hook blocked, and the processes on the GPU.
func successorRestoreStarted(t *testing.T) (*hookRun, []proc) {
	t.Helper()
	return successorRestoreStartedOn(t, 0)
}

// hookRunAfterCrash is a hookRun over the journal of an earlier run that
// restarted embed's client 7 and crashed (nothing restored), started 5 s
// after that restart; it returns the run and the restart's time.
func hookRunAfterCrash(t *testing.T) (*hookRun, time.Time) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journal")
	first := newUnnamedRun(t, p)
	restartAt := first.clk.Now()
	first.restart(t, proc{7, "embed"}, proc{8, "batch"})
	if err := first.j.Close(); err != nil { // a crash: nothing restored
		t.Fatal(err)
	}
	r := newHookRunAt(t, p)
	r.clk.Set(restartAt.Add(5 * time.Second))
	return r, restartAt
}

// successorRestoreStartedOn is successorRestoreStarted with the GPU
// listed at index.
func successorRestoreStartedOn(t *testing.T, index int) (*hookRun, []proc) {
	t.Helper()
	r, restartAt := hookRunAfterCrash(t)
	r.index = index
	if _, err := r.tu.Recover(context.Background(), r.snapOf(proc{8, "batch"})); err != nil {
		t.Fatal(err)
	}
	after := []proc{{8, "batch"}, {9, "embed"}}
	for r.clk.Now().Sub(restartAt) <= successorWithin-15*time.Second {
		r.roundOn(t, after)
	}
	if c := r.host.Calls(); len(c) != 0 {
		t.Fatalf("calls %q before the successor is told, want none", c)
	}
	d := r.roundOn(t, after, pauseOf("batch", 8, 0.5))
	if got, want := outcomes(d), []string{"pause_duty applied"}; !slices.Equal(got, want) {
		t.Fatalf("round that finds the successor: %v, want batch's pause set while the restore's hook runs", got)
	}
	r.host.waitStarted(t)
	if h := r.tu.Status().Hooks; len(h) != 1 || h[0].PID != 9 || h[0].To != "100%" {
		t.Fatalf("status hooks %+v, want the restore of PID 9 to 100%%", h)
	}
	if o := mpsOriginals(r.j); len(o) != 1 || o[0].Target.PID != 9 {
		t.Fatalf("journaled MPS originals %+v while the restore's hook runs, want PID 9's open", o)
	}
	return r, after
}

// A successor's restore whose hook fails teaches the guards what a
// restore made in the round teaches them, nothing (the back-off refuses
// no later change of the target for it), and ends the dwell's hold it
// took at its start. (Before, the back-off and the retry learned its
// failure, as of a change's.)
func TestSuccessorRestoreHookGuards(t *testing.T) {
	r, after := successorRestoreStarted(t)
	tg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}
	backoff, dwell := &Backoff{Base: time.Hour, Max: time.Hour}, &Dwell{For: time.Hour}
	r.tu.mu.Lock()
	dwell.Started(r.tu.hooks[tg.String()].a, r.clk.Now())
	r.tu.o.Guards = append(r.tu.o.Guards, backoff, dwell)
	r.tu.o.Policy = fixed(nil)
	r.tu.mu.Unlock()
	r.host.release <- errors.New("exit status 3")
	waitHookEnded(t, r.tu)
	r.clk.Advance(15 * time.Second)
	if d, _ := r.tu.RunOnce(context.Background(), r.snapOf(after...)); !slices.Equal(outcomes(d), []string{"mps_active_threads failed"}) {
		t.Fatalf("round after the restore's hook failed: %v, want it settled as failed", outcomes(d))
	}
	if ok, why := backoff.Admit(nil, Action{Target: tg, Want: Fraction(0.5)}, r.clk.Now()); !ok {
		t.Errorf("back-off after the failed restore: %s, want none (as after a restore in the round)", why)
	}
	if w := dwell.Waits(r.clk.Now()); len(w) != 0 {
		t.Errorf("dwell waits %+v after the restore was settled, want none", w)
	}
}

// A successor's restore whose hook runs on the GPU listed at index 1 is
// told on that GPU in the status (Hooks, and the hook a wait names).
// (Before, it was told on GPU 0 wherever it ran.)
func TestSuccessorRestoreHookGPUIndex(t *testing.T) {
	r, _ := successorRestoreStartedOn(t, 1)
	h := r.tu.Status().Hooks
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if len(h) != 1 || h[0].GPU != uuid0 || h[0].GPUIndex != 1 {
		t.Errorf("status hooks %+v, want the restore's on GPU 1", h)
	}
}

// A successor's restore whose hook fails is settled as a failed restore
// at the round after it: decided failed, counted, the round's error (the
// exit status says a restore failed while running), its original left
// open, which the restore at exit sets back.
func TestSuccessorRestoreHookFails(t *testing.T) {
	r, after := successorRestoreStarted(t)
	r.host.release <- errors.New("exit status 3")
	waitHookEnded(t, r.tu)
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = fixed(nil)
	d, err := r.tu.RunOnce(context.Background(), tenantSnap(r.clk.Now(), after...))
	if got, want := outcomes(d), []string{"mps_active_threads failed"}; !slices.Equal(got, want) || err == nil {
		t.Fatalf("round after the restore's hook failed: %v, error %v; want %v and an error", got, err, want)
	}
	if o := mpsOriginals(r.j); len(o) != 1 || o[0].Target.PID != 9 {
		t.Errorf("journaled MPS originals %+v after the failed restore, want PID 9's open", o)
	}
	if c := r.tu.Status().Counts; c.RestoreFailures != 1 || c.Restores != 0 {
		t.Errorf("restores %d, failed %d; want 0, 1", c.Restores, c.RestoreFailures)
	}
	if _, err := r.tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore at exit, want none", o)
	}
}

// A start's restore of an MPS client the first snapshot does not list
// (embed's 7) waits for a snapshot that lists it, not for a hook: while
// embed's restart hook of another client (11) runs and 7 is not listed,
// the status names no wait (before, it said the restore waited for that
// hook, "of the successor"); once listed, it waits for that hook, said
// so, and is made through its own restart hook once that one is settled.
func TestUnlistedClientRestoreWaitsForListing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	if err := writeJournal(t, p, mpsOriginal(7, Identity{Boot: testBoot, Starts: []uint64{700}})).Close(); err != nil {
		t.Fatal(err)
	}
	r := newHookRunAt(t, p)
	r.tu.o.Actuators = ActuatorsOf(&idHookHost{r.host, map[uint32]uint64{7: 700, 8: 80, 11: 110}}) // (the client told by its identity)
	if _, err := r.tu.Recover(context.Background(), r.snapOf(proc{8, "batch"}, proc{11, "embed"})); err != nil {
		t.Fatal(err)
	}
	capEmbed := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 11}, Tenant: "embed", Current: Fraction(1), Want: Fraction(0.5), Restart: true, Reason: "test"}
	r.roundOn(t, []proc{{8, "batch"}, {11, "embed"}}, capEmbed)
	r.host.waitStarted(t)
	if w := r.tu.Status().HookWaits; len(w) != 0 {
		t.Errorf("hook waits %+v while PID 7 is not listed, want none", w)
	}
	listed := []proc{{7, "embed"}, {8, "batch"}, {11, "embed"}}
	r.roundOn(t, listed)
	if w := r.tu.Status().HookWaits; len(w) != 1 || !w[0].Restore || w[0].PID != 7 || !strings.Contains(w[0].Why(r.clk.Now()), "of PID 7, started once that hook is settled") {
		t.Errorf("hook waits %+v once PID 7 is listed, want its restore waiting for embed's hook", w)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	r.roundOn(t, listed) // (settles 11's change, starts 7's restore)
	waitHookEnded(t, r.tu)
	d := r.roundOn(t, listed)
	if got, want := outcomes(d), []string{"mps_active_threads restored"}; !slices.Equal(got, want) || d[0].Reason != whyRecovered {
		t.Errorf("round after the restore's hook: %v (%+v), want PID 7 restored", got, d)
	}
	if got := restartsOf(r.host.Calls()); !slices.Equal(got, []string{"RestartClient(GPU-0,11)", "RestartClient(GPU-0,7)"}) {
		t.Errorf("restarts %q, want 11's change, then 7's restore", got)
	}
	if o := mpsOriginals(r.j); len(o) != 1 || o[0].Target.PID != 11 {
		t.Errorf("journaled MPS originals %+v, want 11's alone", o)
	}
}

// idHookHost is a hookHost that tells its clients apart, as the host's
// procfs does (idClients).
type idHookHost struct {
	*hookHost
	starts map[uint32]uint64
}

func (c *idHookHost) ProcessStarts(pids []uint32) (string, []uint64, error) {
	return processStarts(testBoot, c.starts, nil, pids)
}
