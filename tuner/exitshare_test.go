package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// slowPower sets a power limit in took, its context honoured; with
// release set, its first call waits for release and fails (the start's
// restore held by a stuck call).
type slowPower struct {
	recorder
	took    time.Duration
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

// callsMade is how many calls s has had.
func (s *slowPower) callsMade() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *slowPower) SetPowerLimit(ctx context.Context, _ string, _ float64) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first && s.release != nil {
		<-s.release
		return context.DeadlineExceeded
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-time.After(s.took):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exitRunner is a runner whose tuner has GPU-0's power limit open in
// its journal, set back through host; on a real clock where real is set.
func exitRunner(t *testing.T, host any, real bool) *Runner {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journal")
	openWithOriginal(t, p, uuid0).Close()
	j := openJournal(t, p)
	var clk gpu.Clock = gpu.NewManualClock(t0)
	if real {
		clk = gpu.RealClock{}
	}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	return NewRunner(tu, j, clk, time.Hour, func() *tenant.Snapshot { return emptySnap(t0) }, nil)
}

// With no hook running at exit, the restore has the deadline to its
// closes' share (heldShare), not the hooks' (hooksShare): a restore of
// 7/8 of it succeeds. (It was cut at four fifths whatever ran, journaled
// failed, the exit non-zero.)
func TestNoHookRestoreGetsWholeDeadline(t *testing.T) {
	rn := exitRunner(t, &slowPower{took: 1750 * time.Millisecond}, false)
	rn.SetRestoreTimeout(2 * time.Second)
	runEnded(rn)
	if err := rn.RestoreAtExit(); err != nil {
		t.Errorf("a 1.75 s restore within a 2 s deadline, no hook running: %v", err)
	}
}

// The deadline's split is made of what is left once the last round ends:
// a round ending at 85% of it leaves a restore taking a third of the rest
// its time. (The split was fixed at the call: past four fifths the
// restore ran on a context already done, every original failing.)
// It runs in a bubble of its own (synctest): the deadline's wall time is
// the bubble's, which moves only once every goroutine in it waits, so a
// loaded host cannot make the round end late.
func TestLateRoundEndLeavesTimeForTheRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &slowPower{release: make(chan struct{}), took: 100 * time.Millisecond}
		rn := exitRunner(t, host, true)
		rn.SetRestoreTimeout(2 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); rn.Run(ctx) }()
		synctest.Wait() // (in the start's restore, held)
		if host.callsMade() != 1 {
			t.Fatalf("%d calls before the exit, want the start's restore held in its first", host.callsMade())
		}
		cancel()
		time.AfterFunc(1700*time.Millisecond, func() { close(host.release) })
		if err := rn.RestoreAtExit(); err != nil {
			t.Errorf("the round ended at 85%% of the deadline, a 100 ms restore after it: %v", err)
		}
		<-ran
	})
}

// A round stuck at exit sets nothing back, but the actuators (the pause's
// thaw) and the journal are closed before the error, the lock kept while
// the call hangs. (They were left as they were.)
func TestStuckRoundAtExitStillCloses(t *testing.T) {
	host := &hangingPower{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	defer close(host.release)
	rn := exitRunner(t, host, true)
	rn.SetRestoreTimeout(2 * time.Second) // (its last 5%, 100 ms, is the closes' after the stuck round: a loaded machine can take longer than 10 ms to run them)
	closes, releases := countCloses(rn), countReleases(rn)
	ctx, cancel := context.WithCancel(context.Background())
	go rn.Run(ctx)
	hangs(t, host) // (a wait of 30 ms could end before the round began, on a loaded machine)
	cancel()
	err := rn.RestoreAtExit()
	if err == nil || !strings.Contains(err.Error(), "round did not end") {
		t.Errorf("RestoreAtExit: %v, want the stuck round named", err)
	}
	if c, r := closes.Load(), releases.Load(); c != 1 || r != 0 {
		t.Errorf("closes %d, releases %d when RestoreAtExit returned, want 1 close and the node lock kept while the call hangs", c, r)
	}
	if !journalClosed(rn) {
		t.Error("the journal was not closed when RestoreAtExit returned")
	}
}

// runEnded runs rn on a context done before it starts: Run returns at
// once, as on a stop at start.
func runEnded(rn *Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rn.Run(ctx)
}

// countCloses has rn close at exit, after the closers it has, one that
// counts its closes.
func countCloses(rn *Runner) *atomic.Int32 {
	var n atomic.Int32
	rn.CloseAtExit(closeFunc(func() error { n.Add(1); return nil }))
	return &n
}

// countReleases has rn release at exit, as its node lock, one that counts
// its releases.
func countReleases(rn *Runner) *atomic.Int32 {
	var n atomic.Int32
	rn.ReleaseAtExit(closeFunc(func() error { n.Add(1); return nil }))
	return &n
}

func journalClosed(rn *Runner) bool {
	rn.journal.mu.Lock()
	defer rn.journal.mu.Unlock()
	return rn.journal.closed
}

// lockingPower hangs in its call holding mu until release, as the pause
// holds its lock through a freeze's write; its Close takes mu.
type lockingPower struct {
	recorder
	mu      sync.Mutex
	in      chan struct{}
	release chan struct{}
}

func (h *lockingPower) SetPowerLimit(context.Context, string, float64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.in)
	<-h.release
	return nil
}

func (h *lockingPower) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return nil
}

// A closer blocked on the lock the stuck call holds keeps neither the
// journal's close nor the others': each closes on its own, the one
// blocked named in the error; the node lock is released only once the
// stuck call has ended. (The closes ran one after another, the journal
// last and never closed, the lock released beside the call still in
// flight.)
func TestStuckRoundBlockedCloserKeepsNoOther(t *testing.T) {
	host := &lockingPower{in: make(chan struct{}), release: make(chan struct{})}
	rn := exitRunner(t, host, true)
	rn.SetRestoreTimeout(400 * time.Millisecond)
	rn.CloseAtExit(host)
	closes, releases := countCloses(rn), countReleases(rn)
	ctx, cancel := context.WithCancel(context.Background())
	go rn.Run(ctx)
	<-host.in
	cancel()
	err := rn.RestoreAtExit()
	if err == nil || !strings.Contains(err.Error(), "round did not end") || !strings.Contains(err.Error(), "not closed") || !strings.Contains(err.Error(), "lockingPower") {
		t.Errorf("RestoreAtExit: %v, want the stuck round and the closer not closed named", err)
	}
	if strings.Contains(err.Error(), "the journal") {
		t.Errorf("RestoreAtExit: %v, the journal named as not closed", err)
	}
	if !journalClosed(rn) || closes.Load() != 1 {
		t.Errorf("journal closed %v, other closer closed %d times, want both closed", journalClosed(rn), closes.Load())
	}
	if r := releases.Load(); r != 0 {
		t.Errorf("node lock released %d times while the stuck call was in flight", r)
	}
	close(host.release)
	for deadline := time.Now().Add(30 * time.Second); releases.Load() != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if r := releases.Load(); r != 1 {
		t.Errorf("node lock released %d times once the stuck call ended, want 1", r)
	}
}

// A hook the exit waits for that ends within the hooks' share leaves the
// rest of the restore the rest of its deadline: GPU 1's limit, reached
// once the hooks' share is over, is set back. (The restore of what no
// hook holds was cut at the hooks' share wherever one ran at its start.)
func TestExitHookEndedLeavesTheRestTheDeadline(t *testing.T) {
	r, after := successorRestoreStarted(t)
	power1 := Action{Target: Target{GPU: "GPU-1", Knob: gpu.KnobPowerLimit}, GPUIndex: 1, Current: Watts(700), Want: Watts(600), Reason: "test"}
	r.clk.Advance(15 * time.Second)
	r.tu.o.Policy = fixed{power1}
	if d, err := r.tu.RunOnce(context.Background(), twoGPUSnap(r.clk.Now(), after, nil)); err != nil || !slices.Equal(outcomes(d), []string{"power_limit applied"}) {
		t.Fatalf("round setting GPU 1's power limit: %v, %v", outcomes(d), err)
	}
	r.tu.mu.Lock()
	h := r.tu.hooks[Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}.String()]
	r.tu.mu.Unlock()
	hooks, endHooks := context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // (not reached)
	defer cancel()
	logs := r.exitRun(func(c string) {
		if isPause(c) { // (batch thawed before GPU 1's limit)
			r.host.release <- nil
			<-h.done
			endHooks() // the hooks' share over, the hook ended
		}
	})
	d, err := r.tu.restoreAtExit(hooks, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(d); !slices.Contains(got, "power_limit restored") || !slices.Contains(got, "mps_active_threads restored") {
		t.Errorf("restore at exit: %v, want GPU 1's limit restored and the restore's hook settled as restored", got)
	}
	r.checkNoRestoreFailure(t, logs)
}

// The shares of a context with no deadline (RestoreAtExit and Restore
// give theirs one) are done at once: nothing waits without bound. (Both
// were the context itself: a hook still running waited for as long as it
// ran.)
func TestExitSharesWithoutDeadlineDoneAtOnce(t *testing.T) {
	hooks, held, cancel := exitShares(context.Background())
	defer cancel()
	for name, c := range map[string]context.Context{"hooks": hooks, "held": held} {
		if c.Err() == nil {
			t.Errorf("%s share of a context with no deadline not done, want done at once", name)
		}
	}
}
