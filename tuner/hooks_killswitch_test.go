package tuner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// scriptHost is an MPS host whose client restart runs the program hook
// (as --mps.restart-hook does).
type scriptHost struct {
	hook string
	sets []float64
}

func (h *scriptHost) RunsHooks() bool { return true }

func (h *scriptHost) SetMPSActiveThreads(_ context.Context, _ string, _ uint32, f float64) error {
	h.sets = append(h.sets, f)
	return nil
}

func (h *scriptHost) RestartClient(ctx context.Context, _ string, _ uint32, _ string) error {
	_, err := command.Run(ctx, command.Spec{Path: h.hook})
	return err
}

func (h *scriptHost) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (h *scriptHost) SetPowerLimit(context.Context, string, float64) error    { return nil }

// pidIn reads the PID the hook wrote to file, waiting for it.
func pidIn(t *testing.T, file string) int {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if s := strings.TrimSpace(string(b)); err == nil && strings.HasSuffix(string(b), "\n") {
			if pid, err := strconv.Atoi(s); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("the hook did not write %s", file)
	return 0
}

// Engaging the kill switch kills a restart hook under way, and what it
// started: the round that finds the switch engaged cancels it (before, the
// hook ran on to its timeout, minutes, whatever the operator wanted), and
// the next settles it as failed, its reason and journal record saying it
// was cut and what it may have left; its original stays in the journal, and
// the restore at exit sets it back.
func TestKillSwitchCutsHookUnderWay(t *testing.T) {
	// the hook's first run writes its PID and its child's, then waits for
	// the child, a long sleep; a later run (the restore's) answers at once
	fake := commandtest.New(t)
	dir := fake.Dir
	hook := fake.Script(t, "restart-hook", `[ -e "$D/hook.pid" ] && exit 0
echo $$ > "$D/hook.pid"
sleep 600 &
echo $! > "$D/child.pid"
wait`)
	j := openJournal(t, filepath.Join(dir, "journal"))
	defer j.Close()
	host := &scriptHost{hook: hook}
	clk := gpu.NewManualClock(t0)
	kill := &KillSwitch{}
	tu, err := New(Options{Policy: fixed([]Action{capBatch}), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce,
		Guards: append([]Guard{kill}, budgets()...)})
	if err != nil {
		t.Fatal(err)
	}
	round := func() []Decision { t.Helper(); return tenantRound(t, tu, clk) }
	round()
	hookPID, childPID := pidIn(t, filepath.Join(dir, "hook.pid")), pidIn(t, filepath.Join(dir, "child.pid"))
	t.Cleanup(func() { _ = syscall.Kill(-hookPID, syscall.SIGKILL) })
	tu.mu.Lock()
	hs := tu.hooksByAge()
	tu.mu.Unlock()
	if len(hs) != 1 {
		t.Fatalf("hooks running %d, want the restart's", len(hs))
	}

	kill.Engaged.Store(true)
	round()
	select {
	case <-hs[0].done:
	case <-time.After(20 * time.Second):
		t.Fatal("the hook still runs 20 s after a round found the kill switch engaged")
	}
	for _, pid := range []int{hookPID, childPID} {
		for end := time.Now().Add(10 * time.Second); commandtest.Alive(pid) && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if commandtest.Alive(pid) {
			t.Errorf("process %d the hook started still runs", pid)
		}
	}
	d := round()
	// settled first; then the policy's restart asked for again, refused
	if got, want := outcomes(d), []string{"mps_active_threads failed", "mps_active_threads guarded"}; !slices.Equal(got, want) {
		t.Fatalf("round after the cut: %v, want %v", got, want)
	}
	if !strings.Contains(d[0].Reason, "cut by the kill switch after 15s") || !strings.Contains(d[0].Reason, "client 8 may be stopped") {
		t.Errorf("reason %q, want it to say the kill switch cut the hook and what it may have left", d[0].Reason)
	}
	if o := j.Originals(); len(o) != 1 || o[0].Target != capBatch.Target {
		t.Fatalf("journaled originals %+v, want PID 8's kept for the restore", o)
	}
	if d[1].Guard != GuardKillSwitch {
		t.Errorf("restart asked for again refused by %q, want the kill switch", d[1].Guard)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := tu.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(r); !slices.Contains(got, "mps_active_threads restored") {
		t.Errorf("restore at exit: %v, want the original set back", got)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore, want none", o)
	}
}

// A revert's hook is not cut: the kill switch lets reverts through, and
// one started while it is engaged runs to its end and is settled.
func TestKillSwitchLetsRevertHookRun(t *testing.T) {
	r := newHookRun(t)
	kill := &KillSwitch{}
	kill.Engaged.Store(true)
	r.tu.o.Guards = append([]Guard{kill}, r.tu.o.Guards...)
	back := capBatch
	back.Current, back.Want, back.Revert = Fraction(0.5), Fraction(1), true
	r.round(t, back)
	r.host.waitStarted(t)
	r.round(t)
	r.tu.mu.Lock()
	hs := r.tu.hooksByAge()
	r.tu.mu.Unlock()
	if len(hs) != 1 {
		t.Fatalf("hooks running %d, want the revert's", len(hs))
	}
	if hs[0].cut != "" {
		t.Fatalf("revert's hook cut after a round with the kill switch engaged: %q", hs[0].cut)
	}
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if got, want := outcomes(r.round(t)), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
		t.Errorf("round after the revert's hook ended: %v, want %v", got, want)
	}
}

// tenantRound runs tu's round 15 s after the last, on GPU-0 running
// embed's client 7 and batch's 8, and returns its decisions.
func tenantRound(t *testing.T, tu *Tuner, clk *gpu.ManualClock) []Decision {
	t.Helper()
	clk.Advance(15 * time.Second)
	d, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"}))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
