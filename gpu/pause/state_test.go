package pause

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// What is in force is reported: the largest duty of a tenant's GPUs on
// each of them, the longest pause capped, and a period whose freeze
// failed as no pause (counted), until a freeze succeeds again.
func TestPausesInForce(t *testing.T) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	const period, on = 500 * time.Millisecond, 150 * time.Millisecond
	p := h.pauser(t, clock, Options{Period: period, MaxPause: on})
	if got := p.PausesInForce(); len(got) != 0 {
		t.Fatalf("before any pause: %v", got)
	}
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.2))
	must(t, p.SetPauseDuty(ctx, "GPU-b", "trainer", []uint32{10}, 0.25))
	want := []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0.25}, {UUID: "GPU-b", Tenant: "trainer", Duty: 0.25}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Fatalf("two GPUs: %+v, want %+v (the larger duty on both)", got, want)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-b", "trainer", []uint32{10}, 0.6))
	want = []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0.3}, {UUID: "GPU-b", Tenant: "trainer", Duty: 0.3}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Fatalf("capped: %+v, want %+v (MaxPause 150ms of 500ms)", got, want)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-b", "trainer", []uint32{10}, 0))
	want = []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0.2}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Fatalf("one GPU thawed: %+v, want %+v", got, want)
	}

	// the next period's freeze fails: the tenant runs through it
	freeze := filepath.Join(dir, "cgroup.freeze")
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond) // thaw
	waitBlocked(t, clock, 1)
	must(t, os.Remove(freeze))
	must(t, os.Mkdir(freeze, 0o755)) // unwritable
	clock.Advance(period - 100*time.Millisecond)
	waitBlocked(t, clock, 1)
	want = []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", FreezeFailed: true}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Fatalf("freeze failed: %+v, want %+v", got, want)
	}
	if got := p.PauseFreezeFailures(); !reflect.DeepEqual(got, map[string]uint64{"trainer": 1}) {
		t.Fatalf("failures %v, want trainer 1", got)
	}

	// it freezes again
	must(t, os.Remove(freeze))
	must(t, os.WriteFile(freeze, []byte("0"), 0o644))
	clock.Advance(100 * time.Millisecond) // thaw
	waitBlocked(t, clock, 1)
	clock.Advance(period - 100*time.Millisecond)
	waitBlocked(t, clock, 1)
	if got := read(t, freeze); got != "1" {
		t.Fatalf("cgroup.freeze %s, want 1", got)
	}
	want = []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0.2}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Fatalf("frozen again: %+v, want %+v", got, want)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0))
	if got := p.PausesInForce(); len(got) != 0 {
		t.Fatalf("after the thaw: %v", got)
	}
	if got := p.PauseFreezeFailures(); !reflect.DeepEqual(got, map[string]uint64{"trainer": 1}) {
		t.Fatalf("failures %v after the thaw, want trainer 1 (a counter)", got)
	}
	// the tuner tells it the tenant is gone for good: its count goes
	p.ForgetPauseFailures("trainer")
	if got := p.PauseFreezeFailures(); len(got) != 0 {
		t.Fatalf("failures %v after the tenant was forgotten, want none", got)
	}
}

// A failed-freeze count is dropped when the tuner says its tenant is gone
// for good, not while a pulse still pauses the tenant.
func TestForgetPauseFailuresKeepsPaused(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{Period: 500 * time.Millisecond})
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.2))
	p.countFailure("trainer")
	p.countFailure("gone")
	p.ForgetPauseFailures("trainer")
	p.ForgetPauseFailures("gone")
	if got := p.PauseFreezeFailures(); !reflect.DeepEqual(got, map[string]uint64{"trainer": 1}) {
		t.Errorf("failures %v, want trainer's kept (paused) and gone's dropped", got)
	}
}

// A period that finds none of the tenant's processes left (they exited
// before the tuner's next round ends the pause) is no failed freeze:
// nothing ran through it, it is not counted; nor is it paused: the pause
// is reported at duty 0 (the effective ratio where nothing is paused).
func TestPausesInForceProcessesGone(t *testing.T) {
	h := newHost(t)
	h.process(12, "/user.slice/user-0.slice/session-1.scope", "/", 120)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	const period = 500 * time.Millisecond
	p := h.pauser(t, clock, Options{Period: period})
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{12}, 0.2))
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond) // thaw
	waitBlocked(t, clock, 1)
	h.mu.Lock()
	h.exited[120] = true
	h.mu.Unlock()
	for range 3 {
		clock.Advance(period - 100*time.Millisecond) // a freeze: none left
		waitBlocked(t, clock, 1)
		clock.Advance(100 * time.Millisecond)
		waitBlocked(t, clock, 1)
	}
	if got := p.PauseFreezeFailures(); len(got) != 0 {
		t.Errorf("failures %v, want none (no process left to run)", got)
	}
	want := []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0}}
	if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
		t.Errorf("pauses in force %+v, want %+v", got, want)
	}
}

// A pause of the tenant that starts while its count is being forgotten,
// and fails a freeze, keeps its count: the check that the tenant is not
// paused and the drop are one critical section. The test holds the
// count's lock, so the forgetting stops before its drop; the pause
// starts then if it can, and its failed freeze is counted (the test
// makes the count, as it holds the lock).
func TestForgetPauseFailuresPauseStartingBetween(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{Period: 500 * time.Millisecond})
	ctx := context.Background()

	p.failMu.Lock()
	forgot := make(chan struct{})
	go func() {
		defer close(forgot)
		p.ForgetPauseFailures("trainer")
	}()
	waitLockWait(t, "ForgetPauseFailures")
	if p.mu.TryLock() { // the forgetting let go of the tenants: a pause can start
		p.mu.Unlock()
		if err := p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.2); err != nil {
			p.failMu.Unlock()
			t.Fatal(err)
		}
		if p.failures == nil {
			p.failures = map[string]uint64{}
		}
		p.failures["trainer"]++
	}
	p.failMu.Unlock()
	<-forgot
	if len(p.PausesInForce()) > 0 {
		if got := p.PauseFreezeFailures(); !reflect.DeepEqual(got, map[string]uint64{"trainer": 1}) {
			t.Fatalf("failures %v, want trainer 1: a pause that started while its count was forgotten lost it", got)
		}
	}

	// after the forgetting, the pause and its failure are kept
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.2))
	p.countFailure("trainer")
	p.ForgetPauseFailures("trainer")
	if got := p.PauseFreezeFailures(); !reflect.DeepEqual(got, map[string]uint64{"trainer": 1}) {
		t.Errorf("failures %v, want trainer 1 (paused)", got)
	}
}

// waitLockWait waits until a goroutine in the Pauser's method fn waits
// for a sync.Mutex.
func waitLockWait(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "(*Pauser)."+fn+"(") {
				return
			}
		}
	}
	t.Fatalf("no goroutine of (*Pauser).%s waits for a lock after 10s", fn)
}

// The period reported is the one the pulses run at: the default where
// none is given.
func TestPausePeriod(t *testing.T) {
	for _, c := range []struct {
		name       string
		period     time.Duration
		wantPeriod time.Duration
	}{
		{"the default", 0, DefaultPeriod},
		{"given", 15 * time.Second, 15 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newHost(t).pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{Period: c.period})
			if got := p.PausePeriod(); got != c.wantPeriod {
				t.Errorf("period %s, want %s", got, c.wantPeriod)
			}
		})
	}
}
