package pause

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A group gained mid-pause in the same call as a lower duty gets a lease
// that ends with the others' (before the next period begins).
func TestPauseGainedLeaseWithDutyChange(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	other := h.cgroupV2Dir(otherPod)
	h.process(10, podPath, "", 10)
	h.process(20, otherPod, "", 20)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p, pipe := h.watchedPauser(t, clock)
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.9)) // on 450ms, lease 475ms (ends t=475ms)
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 20}, 0.1))
	if got, want := pipe.text(), "freeze v2 "+other+" 375ms\n"; !strings.Contains(got, want) {
		t.Errorf("the added group's lease does not end with the others' (t=475ms); want %q in\n%s", want, got)
	}
}

// skewClock is a ManualClock whose Now runs ahead of its timers.
type skewClock struct {
	*gpu.ManualClock
	mu   sync.Mutex
	skew time.Duration
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ManualClock.Now().Add(c.skew)
}

// A group gained while the thaw is due (frozen, its on time over, the
// pulse not yet at its thaw) is checked: one that cannot be frozen fails
// the call.
func TestPauseGainedWhenThawDueChecked(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(12, "/", "/system.slice/ranks.service", 12)
	unwritable(t, filepath.Join(unit, "freezer.state"))
	mc := gpu.NewManualClock(time.Unix(0, 0))
	clock := &skewClock{ManualClock: mc}
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5))
	waitBlocked(t, mc, 1)
	clock.mu.Lock()
	clock.skew = 250 * time.Millisecond // the thaw is due; the pulse has not taken it yet
	clock.mu.Unlock()
	// the same call in the thawed half fails (TestPauseGainedGroupFails)
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.5); err == nil {
		t.Errorf("a gained group that cannot be frozen, the thaw due: no error, and the next period's freeze will fail")
	}
}

// A call that fails in the thawed half does not set its duty for the next
// period, even where the pulse reads the duty while the call runs (it
// reads it under the pulse's lock).
func TestPauseDutyReadUnderLockControl(t *testing.T) { testFailedCallDuty(t, false) }
func TestPauseFailedCallDutyNotInForce(t *testing.T) { testFailedCallDuty(t, true) }
func testFailedCallDuty(t *testing.T, adv bool) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
	mc := gpu.NewManualClock(time.Unix(0, 0))
	h.pgidHook = movesAway(13, 2, func() {
		// the Check, under act, in the thawed half
		if adv {
			mc.Advance(250 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // the pulse reads the duty, then waits on act
	})
	p := h.pauser(t, mc, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5)) // on 250ms
	waitBlocked(t, mc, 1)
	mc.Advance(250 * time.Millisecond) // thaw
	waitBlocked(t, mc, 1)
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 13}, 0.8); err == nil {
		t.Fatal("want the call to fail")
	}
	if !adv {
		mc.Advance(250 * time.Millisecond)
	}
	waitBlocked(t, mc, 1)              // frozen for the next period
	mc.Advance(250 * time.Millisecond) // the duty in force (0.5) thaws here
	time.Sleep(50 * time.Millisecond)
	waitBlocked(t, mc, 1)
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("250ms into the period after a failed call to 0.8: cgroup.freeze %s; the failed call's duty is in force", got)
	}
}

// movesAway is a getpgid hook: process pid reads as in group 131 from
// its nth getpgid on (then once runs first, at the nth only), the groups
// as they are before.
func movesAway(pid, nth int, once func()) func(int) (int, bool) {
	var mu sync.Mutex
	calls := 0
	return func(p int) (int, bool) {
		if p != pid {
			return 0, false
		}
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < nth {
			return 0, false
		}
		if n == nth && once != nil {
			once()
		}
		return 131, true
	}
}

// A first pause that fails at the watchdog's lease keeps the tenant's
// leftover groups it names: they are thawed once they can be.
func TestPauseFailedFirstPauseKeepsLeftover(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(10, podPath, "", 10)
	h.process(12, "/", "/system.slice/ranks.service", 12)
	mc := gpu.NewManualClock(time.Unix(0, 0))
	pipe := &lines{}
	var fail bool
	var mu sync.Mutex
	p := h.pauser(t, mc, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return nil, nil, errors.New("no watchdog")
		}
		return pipe, func() error { return nil }, nil
	}})
	ctx := context.Background()
	state := filepath.Join(unit, "freezer.state")
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.4))
	waitBlocked(t, mc, 1)
	unwritable(t, state)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.4)) // the unit left: its thaw fails (leftover)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0))   // the leftover logged
	// the watchdog is gone and cannot start again
	mu.Lock()
	fail = true
	mu.Unlock()
	pipe.mu.Lock()
	pipe.closed = true
	pipe.mu.Unlock()
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.4); err == nil {
		t.Fatal("want the pause refused without a watchdog")
	}
	// the unit can be thawed now, and is still frozen
	must(t, os.Remove(state))
	must(t, os.WriteFile(state, []byte("FROZEN"), 0o644))
	_ = p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0)
	_ = p.Close()
	if got := read(t, state); got != "THAWED" {
		t.Errorf("the group left stays frozen after a duty of 0 and Close: freezer.state %s (dropped from the leftover by the failed call)", got)
	}
}

// A gained process group whose process moved to another group between
// resolve and freeze fails the call, in the thawed half and the frozen
// half alike (it is not taken as gone).
func TestPauseGainedGroupMovedAway(t *testing.T) {
	for _, half := range []string{"thawed", "frozen"} {
		t.Run(half, func(t *testing.T) {
			h := newHost(t)
			h.cgroupV2Dir(podPath)
			h.process(10, podPath, "", 10)
			h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
			mc := gpu.NewManualClock(time.Unix(0, 0))
			h.pgidHook = movesAway(13, 2, nil) // it left group 130 after it was resolved
			p := h.pauser(t, mc, Options{Period: 500 * time.Millisecond})
			ctx := context.Background()
			must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5))
			waitBlocked(t, mc, 1)
			if half == "thawed" {
				mc.Advance(250 * time.Millisecond)
				waitBlocked(t, mc, 1)
			}
			if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 13}, 0.5); err == nil {
				h.mu.Lock()
				sig := strings.Join(h.signals, ",")
				h.mu.Unlock()
				t.Errorf("%s half: the call succeeded; process 13 is in group 131, not paused (signals %q)", half, sig)
			}
		})
	}
}
