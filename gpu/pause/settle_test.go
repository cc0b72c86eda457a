package pause

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
// call's fails the call; the loop's is a failed period (the tenant runs
// through it, and the pause in force reads 0).
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
