package pause

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// settleHost is a tenant in a v2 cgroup whose freeze does not settle at
// once (cgroup.events reads "frozen 0" until told), paused with a period
// of 2 s and --pause.max 500 ms (on: 500 ms at a duty of 0.9), a
// watchdog's lines in pipe. first: the freeze watched is the call's (the
// first period's); else the next period's, the loop's (the first settles
// at once). The clock is at the write of the watched freeze, the pauser
// polling it (or, first, errc bringing the call's error).
type settleHost struct {
	clock          *gpu.ManualClock
	p              *Pauser
	pipe           *lines
	dir            string
	freeze, events string
	errc           chan error
	pending        bool // a call under way, its error to come on errc
}

const (
	settlePeriod = 2 * time.Second
	settleOn     = 500 * time.Millisecond
)

func newSettleHost(t *testing.T, first bool) *settleHost {
	h := newHost(t)
	s := &settleHost{clock: gpu.NewManualClock(time.Unix(0, 0)), pipe: &lines{}, dir: h.cgroupV2Dir(podPath), errc: make(chan error, 1)}
	s.freeze, s.events = filepath.Join(s.dir, "cgroup.freeze"), filepath.Join(s.dir, "cgroup.events")
	h.process(10, podPath, "", 10)
	s.p = h.pauser(t, s.clock, Options{Period: settlePeriod, MaxPause: settleOn, startWatchdog: func() (io.WriteCloser, func() error, error) {
		return s.pipe, func() error { return nil }, nil
	}})
	t.Cleanup(func() {
		// a freeze still polled (a test failed) settles, and a call
		// still under way returns: Close waits for them
		s.settles(t, true)
		s.clock.Advance(time.Millisecond)
		for s.pending {
			select {
			case <-s.errc:
				s.pending = false
			case <-time.After(time.Millisecond):
				s.clock.Advance(time.Millisecond)
			}
		}
	})
	pause := func() { s.errc <- s.p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.9) }
	if first {
		s.settles(t, false)
		s.pending = true
		go pause()
		waitBlocked(t, s.clock, 1) // polling cgroup.events
		return s
	}
	pause()
	must(t, <-s.errc)
	waitBlocked(t, s.clock, 1)
	s.clock.Advance(settleOn) // thawed
	waitBlocked(t, s.clock, 1)
	s.settles(t, false)
	s.clock.Advance(settlePeriod - settleOn) // the next period's freeze
	waitBlocked(t, s.clock, 1)               // polling cgroup.events
	return s
}

// settles sets what cgroup.events says of the freeze.
func (s *settleHost) settles(t *testing.T, frozen bool) {
	v := map[bool]string{false: "0", true: "1"}[frozen]
	must(t, os.WriteFile(s.events, []byte("populated 1\nfrozen "+v+"\n"), 0o644))
}

// step advances the clock a millisecond at a time, n times, each once
// the pauser waits on it.
func (s *settleHost) step(t *testing.T, n int) {
	for range n {
		waitBlocked(t, s.clock, 1)
		s.clock.Advance(time.Millisecond)
	}
}

// returned waits until the call under way returns (its error, true) or
// the pauser waits on the clock again, the call still under way (false).
func (s *settleHost) returned(t *testing.T) (error, bool) {
	t.Helper()
	for {
		select {
		case err := <-s.errc:
			s.pending = false
			return err, true
		default:
		}
		if s.clock.Waiters() > 0 {
			return nil, false
		}
		time.Sleep(time.Millisecond)
	}
}

// A freeze that takes 400 ms to settle (a task in an uninterruptible
// driver call; the tasks frozen from the write on are stopped all that
// while) is thawed on (500 ms, --pause.max) after its write, not on after
// it settled (900 ms at once, beyond --pause.max); the watchdog's lease,
// given before the write, outlasts the thaw.
func TestPauseThawedOnAfterTheFreezeIsWritten(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "the call's freeze", false: "the loop's freeze"}[first], func(t *testing.T) {
			s := newSettleHost(t, first)
			start := s.clock.Now()
			s.step(t, 400)
			s.settles(t, true)
			s.step(t, 1)
			if first {
				must(t, <-s.errc)
				s.pending = false
			}
			waitBlocked(t, s.clock, 1)
			s.clock.Advance(start.Add(settleOn - time.Millisecond).Sub(s.clock.Now()))
			if got := read(t, s.freeze); got != "1" {
				t.Fatalf("cgroup.freeze %s %v after the write, before the on time: want 1", got, settleOn-time.Millisecond)
			}
			s.clock.Advance(time.Millisecond)
			waitBlocked(t, s.clock, 1)
			if got := read(t, s.freeze); got != "0" {
				t.Errorf("cgroup.freeze %s %v after the write (settled after 400ms): frozen beyond --pause.max %v", got, s.clock.Now().Sub(start), settleOn)
			}
			// a lease of on and half the rest of the period: 1.25s
			if want := fmt.Sprintf("freeze v2 %s 1.25s\nthawed v2 %[1]s\n", s.dir); !strings.HasSuffix(s.pipe.String(), want) {
				t.Errorf("watchdog lines\n%s\nwant them to end with\n%s", s.pipe.String(), want)
			}
			if f := s.p.PauseFreezeFailures()["trainer"]; f != 0 {
				t.Errorf("%d freeze failures, want none (it settled in time)", f)
			}
		})
	}
}

// A freeze that has not settled by the end of the pause (a task that never
// reaches the freezer) fails then, on after its write, and is thawed:
// before, it was polled for FreezeTimeout (1 s), the tasks that did
// freeze stopped all that second, twice --pause.max, every period. The
// call's fails the call; the loop's is a failed period (its tasks that
// froze stopped until then, and the pause in force reads 0).
func TestPauseFreezeNotSettledByTheEndOfThePause(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "the call's freeze", false: "the loop's freeze"}[first], func(t *testing.T) {
			s := newSettleHost(t, first)
			start := s.clock.Now()
			s.step(t, int(settleOn/time.Millisecond))
			if first {
				err, ok := s.returned(t)
				switch {
				case !ok:
					t.Fatalf("still freezing %v after the write (--pause.max %v)", s.clock.Now().Sub(start), settleOn)
				case err == nil || !strings.Contains(err.Error(), "not frozen after 500ms"):
					t.Errorf("SetPauseDuty: %v, want the tenant not paused, not frozen after 500ms", err)
				}
			} else {
				waitBlocked(t, s.clock, 1)
				in := s.p.PausesInForce()
				if f := s.p.PauseFreezeFailures()["trainer"]; f != 1 || len(in) != 1 || !in[0].FreezeFailed || in[0].Duty != 0 {
					t.Errorf("%d freeze failures, pause in force %+v: want 1, failed, duty 0", f, in)
				}
			}
			if got := read(t, s.freeze); got != "0" {
				t.Errorf("cgroup.freeze %s %v after the write, the freeze not settled: frozen beyond --pause.max %v", got, s.clock.Now().Sub(start), settleOn)
			}
		})
	}
}

// A watchdog that takes 30 ms to start (the exporter's binary run again
// on a busy node) takes none of the pause's settle time: the pause starts
// once the lease is given, and the thaw comes on after the write of the
// freeze. Before, its start was counted in the pause: at a duty of 0.05
// of 500 ms (on: 25 ms) the freeze was written after its pause had ended
// and failed whatever ("not frozen after 0s"): the first pause's call, or
// a period's freeze where the watchdog was started again.
func TestPauseWatchdogStartTakesNoneOfThePause(t *testing.T) {
	const on = 25 * time.Millisecond
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "the call's freeze", false: "the loop's freeze, the watchdog started again"}[first], func(t *testing.T) {
			h := newHost(t)
			dir := h.cgroupV2Dir(podPath)
			freeze, events := filepath.Join(dir, "cgroup.freeze"), filepath.Join(dir, "cgroup.events")
			h.process(10, podPath, "", 10)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			var took atomic.Int64 // what a start of the watchdog takes
			pipe := &lines{}
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
				clock.Advance(time.Duration(took.Load()))
				return pipe, func() error { return nil }, nil
			}})
			settles := func(frozen string) {
				must(t, os.WriteFile(events, []byte("populated 1\nfrozen "+frozen+"\n"), 0o644))
			}
			errc := make(chan error, 1)
			if first {
				took.Store(int64(30 * time.Millisecond))
				settles("0")
				go func() { errc <- p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.05) }()
			} else {
				must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.05))
				waitBlocked(t, clock, 1)
				clock.Advance(on) // thawed
				waitBlocked(t, clock, 1)
				settles("0")
				must(t, pipe.Close()) // the watchdog is gone: the next lease starts another
				pipe = &lines{}
				took.Store(int64(30 * time.Millisecond))
				clock.Advance(500*time.Millisecond - on) // the next period's freeze
			}
			// the freeze written (after the watchdog's start), polled: it
			// settles a millisecond on
			for first && clock.Waiters() == 0 {
				select {
				case err := <-errc:
					t.Fatalf("first pause, the watchdog's start taking 30ms, its cgroup not settled yet: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			waitBlocked(t, clock, 1)
			written := clock.Now()
			settles("1")
			clock.Advance(time.Millisecond)
			if first {
				if err := <-errc; err != nil {
					t.Fatalf("first pause, the watchdog's start taking 30ms, its cgroup settled 1ms after the write: %v", err)
				}
			}
			waitBlocked(t, clock, 1)
			if f := p.PauseFreezeFailures()["trainer"]; f != 0 {
				t.Errorf("%d freeze failures, want none (it settled 1ms after its write)", f)
			}
			clock.Advance(written.Add(on - time.Millisecond).Sub(clock.Now()))
			if got := read(t, freeze); got != "1" {
				t.Errorf("cgroup.freeze %s %v after the write, before the on time: want 1", got, on-time.Millisecond)
			}
			clock.Advance(time.Millisecond)
			waitBlocked(t, clock, 1)
			if got := read(t, freeze); got != "0" {
				t.Errorf("cgroup.freeze %s %v after the write: want 0, thawed", got, on)
			}
		})
	}
}

// A lease whose giving took more than half the rest of the period (a
// watchdog's start of 30 ms, at a duty of 0.9 of 500 ms: on 450 ms, the
// lease 475 ms) would end before the thaw, on after the freeze's write;
// it is given again, and a group the tenant gains mid-pause gets a lease
// to its end, past the thaw.
func TestPauseLeaseGivenAgainCoversTheThaw(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	other := h.cgroupV2Dir(otherPod)
	h.process(10, podPath, "", 10)
	h.process(20, otherPod, "", 20)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	pipe := &lines{}
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
		clock.Advance(30 * time.Millisecond)
		return pipe, func() error { return nil }, nil
	}})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.9)) // written at 30ms: thawed at 480ms
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 20}, 0.9))
	// the lease given again at 30ms ends at 505ms: 375ms on
	if got, want := pipe.text(), "freeze v2 "+other+" 375ms\n"; !strings.Contains(got, want) {
		t.Errorf("the gained group's lease does not reach past the thaw (480ms); want %q in\n%s", want, got)
	}
}

// dying is a watchdog's pipe that takes n lines (n < 0: every one), then
// is gone (the watchdog died having read them); what it takes goes to
// all, the lines every watchdog read.
type dying struct {
	mu  sync.Mutex
	n   int
	all *lines
}

func (d *dying) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return 0, io.ErrClosedPipe
	}
	d.n--
	return d.all.Write(p)
}

func (d *dying) Close() error { return nil }

// A lease given again (its giving took a watchdog's start of 30 ms, at a
// duty of 0.9 of 500 ms) is given only to the watchdog running: where
// that one died having read the first, the pause ends with the first
// lease (475 ms), none started again for it. Before, the second giving
// started another (30 ms more): the lease ended at 505 ms, the thaw at
// 510 ms, and a group gained 3 ms before the thaw was told the watchdog
// with a lease of -2ms, a line it refuses: frozen with no lease, a crash
// then left it frozen. Whatever the watchdog, a group gained then is
// frozen under a lease past the thaw, or not at all.
func TestPauseLeaseGivenAgainToTheRunningWatchdogOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines int           // those the first watchdog reads before it dies (-1: all)
		thaw  time.Duration // from the first giving
	}{
		{name: "the watchdog runs", lines: -1, thaw: 480 * time.Millisecond},
		{name: "the watchdog dies after the first lease", lines: 1, thaw: 475 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			h.cgroupV2Dir(podPath)
			other := h.cgroupV2Dir(otherPod)
			h.process(10, podPath, "", 10)
			h.process(20, otherPod, "", 20)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			all := &lines{}
			var starts atomic.Int32
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
				clock.Advance(30 * time.Millisecond)
				n := -1
				if starts.Add(1) == 1 {
					n = tc.lines
				}
				return &dying{n: n, all: all}, func() error { return nil }, nil
			}})
			ctx := context.Background()
			must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.9))
			waitBlocked(t, clock, 1)
			pl := p.tenants["ranks"]
			pl.act.Lock()
			onUntil, leaseUntil := pl.onUntil.Sub(time.Unix(0, 0)), pl.leaseUntil.Sub(time.Unix(0, 0))
			pl.act.Unlock()
			if n := starts.Load(); n != 1 {
				t.Errorf("the watchdog started %d times for the first pause, want once", n)
			}
			if onUntil != tc.thaw || leaseUntil < onUntil {
				t.Errorf("thawed at %v, the lease ending at %v: want the thaw at %v, within the lease", onUntil, leaseUntil, tc.thaw)
			}
			clock.Advance(time.Unix(0, 0).Add(onUntil - 3*time.Millisecond).Sub(clock.Now()))
			must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 20}, 0.9))
			for _, l := range strings.Split(strings.TrimSpace(all.text()), "\n") {
				if _, _, _, err := parseLine(l, nil); err != nil {
					t.Errorf("the watchdog refuses a line it was told: %v", err)
				}
			}
			// the exporter killed now: the watchdog reads every line, the
			// pipe ends, it thaws what it holds
			_, _ = watch(strings.NewReader(all.text()), gpu.NewManualClock(time.Unix(0, 0)), h.kill)
			if got := read(t, other+"/cgroup.freeze"); got != "0" {
				t.Errorf("a crash 3 ms before the thaw left the gained group frozen (cgroup.freeze %s)", got)
			}
		})
	}
}
