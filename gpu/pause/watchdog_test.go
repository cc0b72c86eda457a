package pause

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The watchdog thaws what is still frozen when the pipe ends, and a group
// whose lease runs out; a group the parent thawed it leaves alone.
func TestWatch(t *testing.T) {
	for _, c := range []struct {
		name    string
		lines   []string // %s: the cgroup directory
		advance time.Duration
		eof     bool
		want    string // the cgroup's freeze file at the end
		signals string
	}{
		{"end of the pipe thaws", []string{"freeze v2 %s 1s"}, 0, true, "0", ""},
		{"a thawed group is left alone", []string{"freeze v2 %s 1s", "thawed v2 %s"}, 0, true, "1", ""},
		{"a lease that runs out thaws", []string{"freeze v2 %s 300ms"}, 300 * time.Millisecond, false, "0", ""},
		{"a renewed lease holds", []string{"freeze v2 %s 300ms", "freeze v2 %s 1s"}, 300 * time.Millisecond, false, "1", ""},
		{"process groups", []string{"freeze pgid 77 1s", "freeze v2 %s 1s", "thawed v2 %s"}, 0, true, "1", "-77 continued"},
		{"bad lines are skipped", []string{"freeze v2 relative 1s", "freeze v9 %s 1s", "freeze v2 %s", "thaw v2 %s", "freeze pgid 1 1s"}, 0, true, "1", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a b.service") // a path with a space
			must(t, os.MkdirAll(dir, 0o755))
			freeze := filepath.Join(dir, "cgroup.freeze")
			must(t, os.WriteFile(freeze, []byte("1"), 0o644))
			clock := gpu.NewManualClock(time.Unix(0, 0))
			var mu sync.Mutex
			var signals []string
			kill := func(pid int, sig syscall.Signal) error {
				mu.Lock()
				defer mu.Unlock()
				signals = append(signals, fmt.Sprintf("%d %s", pid, sig))
				return nil
			}
			r, w := io.Pipe()
			done := make(chan error, 1)
			go func() { _, err := watch(r, clock, kill); done <- err }()
			for _, l := range c.lines {
				if strings.Contains(l, "%s") {
					l = fmt.Sprintf(l, dir)
				}
				_, err := fmt.Fprintln(w, l)
				must(t, err)
			}
			if c.advance > 0 {
				// The last line is read once the watchdog waits on its lease.
				eventually(t, "the watchdog never waited", func() bool { return clock.Waiters() == len(c.lines) })
				clock.Advance(c.advance)
				if c.want == "0" {
					eventually(t, "the lease did not thaw", func() bool { return read(t, freeze) == "0" })
				}
			}
			if c.eof {
				must(t, w.Close())
				err := <-done
				if bad := c.name == "bad lines are skipped"; bad != (err != nil) {
					t.Errorf("watch: %v", err)
				}
			} else {
				// the end of the pipe, once looked at: the watchdog
				// thaws, and is done before the directory is removed
				defer func() { <-done }()
			}
			if got := read(t, freeze); got != c.want {
				t.Errorf("cgroup.freeze %s, want %s", got, c.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(signals, ","); got != c.signals {
				t.Errorf("signals %q, want %q", got, c.signals)
			}
			_ = w.Close()
		})
	}
}

// lines is a fake watchdog's pipe.
type lines struct {
	mu     sync.Mutex
	b      strings.Builder
	closed bool
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, io.ErrClosedPipe
	}
	return l.b.Write(p)
}

func (l *lines) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The pulse tells the watchdog of each freeze, with a lease of the on time
// and half the rest of the period, and of each thaw; without a watchdog
// it pauses nothing.
func TestPulseLeases(t *testing.T) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	pipe := &lines{}
	starts := 0
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
		starts++
		return pipe, func() error { return nil }, nil
	}})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.4))
	waitBlocked(t, clock, 1)
	clock.Advance(200 * time.Millisecond)
	waitBlocked(t, clock, 1)
	clock.Advance(300 * time.Millisecond)
	waitBlocked(t, clock, 1)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0))
	must(t, p.Close())
	want := strings.Repeat(fmt.Sprintf("freeze v2 %s 350ms\nthawed v2 %[1]s\n", dir), 2)
	if got := pipe.String(); got != want {
		t.Errorf("watchdog lines\n%s\nwant\n%s", got, want)
	}
	if starts != 1 || !pipe.closed {
		t.Errorf("watchdog started %d times, closed %v: want once, closed at Close", starts, pipe.closed)
	}

	q := h.pauser(t, clock, Options{startWatchdog: func() (io.WriteCloser, func() error, error) {
		return nil, nil, errors.New("no watchdog")
	}})
	if err := q.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.4); err == nil {
		t.Error("paused without its watchdog")
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze %s without a watchdog, want 0", got)
	}
}

// A watchdog started again (the last one gone while tenants were frozen)
// is told first of every lease the last one held, with what is left of
// it: a tenant frozen under the watchdog that died stays bounded by the
// new one.
func TestWatchdogStartedAgainLeased(t *testing.T) {
	h := newHost(t)
	a, b := h.cgroupV2Dir(podPath), h.cgroupV2Dir(unitPath)
	h.process(10, podPath, "", 10)
	h.process(11, unitPath, "", 11)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	var mu sync.Mutex
	var pipes []*lines
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
		mu.Lock()
		defer mu.Unlock()
		pipes = append(pipes, &lines{})
		return pipes[len(pipes)-1], func() error { return nil }, nil
	}})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "a", []uint32{10}, 0.2)) // frozen 0-100 ms
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond) // a thawed till 500 ms
	waitBlocked(t, clock, 1)
	clock.Advance(150 * time.Millisecond)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "b", []uint32{11}, 0.8)) // frozen 250-650 ms, leased to 700 ms
	waitBlocked(t, clock, 2)
	mu.Lock()
	must(t, pipes[0].Close()) // the watchdog dies
	mu.Unlock()
	clock.Advance(250 * time.Millisecond) // a's next freeze starts another
	waitBlocked(t, clock, 2)
	mu.Lock()
	n, got := len(pipes), pipes[len(pipes)-1].String()
	mu.Unlock()
	want := fmt.Sprintf("freeze v2 %s 200ms\nfreeze v2 %s 300ms\n", b, a)
	if n != 2 || got != want {
		t.Errorf("%d watchdogs; the last was told\n%s\nwant\n%s", n, got, want)
	}
	if got := read(t, filepath.Join(b, "cgroup.freeze")); got != "1" {
		t.Errorf("b's cgroup.freeze %s, want 1 (frozen till 650 ms)", got)
	}
}

// The watchdog does not inherit systemd's NOTIFY_SOCKET, the exporter's
// channel alone, as no program the exporter runs does; the rest of the
// environment it does.
func TestWatchdogEnvironment(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("VGPU_KEPT", "kept")
	out := filepath.Join(t.TempDir(), "env")
	start := watchdogCommand([]string{"/bin/sh", "-c", `echo "${NOTIFY_SOCKET-unset} $VGPU_KEPT" > "$0"`, out})
	w, wait, err := start()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "unset kept\n" {
		t.Errorf("the watchdog's environment: %q (%v), want NOTIFY_SOCKET unset and the rest kept", b, err)
	}
}

// A watchdog that dies after every line it reads (killed out of memory at
// each start, say), its start taking 30 ms, is started again at most once
// a period, each time logged as such (a line a minute), and the thaws,
// which succeed, are not logged as failed. Before, each period started it
// twice (the lease given again started another), 8 starts in 3 periods,
// and the only line was "pause: thaw failed" with the watchdog's closed
// pipe.
func TestWatchdogDyingStartedAgainOnceAPeriod(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	var logs lines
	var starts atomic.Int32
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, Logger: log.NewLogfmtLogger(&logs), startWatchdog: func() (io.WriteCloser, func() error, error) {
		clock.Advance(30 * time.Millisecond)
		starts.Add(1)
		return &dying{n: 1, all: &lines{}}, func() error { return nil }, nil
	}})
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.9))
	for range 1700 {
		waitBlocked(t, clock, 1)
		clock.Advance(time.Millisecond)
	}
	waitBlocked(t, clock, 1)
	if n := starts.Load(); n > 4 {
		t.Errorf("the watchdog started %d times in 1.7 s of 500 ms periods, want at most once a period", n)
	}
	got := logs.String()
	for _, want := range []struct {
		msg string
		n   int
	}{
		{"pause: thaw failed", 0},
		{"pause: the watchdog is gone", 1},
		{"pause: the watchdog was gone; started again", 1},
	} {
		if n := strings.Count(got, want.msg); n != want.n {
			t.Errorf("%d lines %q, want %d; the log:\n%s", n, want.msg, want.n, got)
		}
	}
}

// A watchdog that died less than a period after its start is not started
// again before then: a lease it would take is given to none, and nothing
// is frozen on it. Another tenant's pause fails (the tenant runs); a
// group the paused tenant gains is taken in unfrozen, and frozen with the
// others from the next period, whose freeze starts a watchdog. Before,
// each started another at once.
func TestWatchdogNotStartedAgainWithinAPeriod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenant  string
		pids    []uint32
		refused bool
		next    string // the unit's cgroup.freeze in the next period's pause
	}{
		{name: "another tenant's pause", tenant: "b", pids: []uint32{12}, refused: true, next: "0"},
		{name: "a group the tenant gains", tenant: "a", pids: []uint32{10, 12}, next: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			h.cgroupV2Dir(podPath)
			unit := h.cgroupV2Dir(unitPath)
			h.process(10, podPath, "", 10)
			h.process(12, unitPath, "", 12)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			var mu sync.Mutex
			var pipe *lines
			starts := 0
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
				mu.Lock()
				defer mu.Unlock()
				starts++
				pipe = &lines{}
				return pipe, func() error { return nil }, nil
			}})
			ctx := context.Background()
			must(t, p.SetPauseDuty(ctx, "GPU-a", "a", []uint32{10}, 0.5)) // frozen 0-250 ms
			waitBlocked(t, clock, 1)
			clock.Advance(100 * time.Millisecond)
			mu.Lock()
			must(t, pipe.Close()) // the watchdog dies
			mu.Unlock()
			err := p.SetPauseDuty(ctx, "GPU-a", tc.tenant, tc.pids, 0.5)
			if refused := err != nil; refused != tc.refused {
				t.Errorf("the call 100 ms after the watchdog's start, it gone: %v, want refused %v", err, tc.refused)
			}
			mu.Lock()
			n := starts
			mu.Unlock()
			if got := read(t, filepath.Join(unit, "cgroup.freeze")); got != "0" || n != 1 {
				t.Fatalf("the unit's cgroup.freeze %s, the watchdog started %d times: want 0 and once (none started again within the period)", got, n)
			}
			clock.Advance(150 * time.Millisecond) // a's thaw
			waitBlocked(t, clock, 1)
			clock.Advance(250 * time.Millisecond) // a's next freeze: a watchdog started
			waitBlocked(t, clock, 1)
			mu.Lock()
			n = starts
			mu.Unlock()
			if got := read(t, filepath.Join(unit, "cgroup.freeze")); got != tc.next || n != 2 {
				t.Errorf("next period: the unit's cgroup.freeze %s, the watchdog started %d times: want %s and twice", got, n, tc.next)
			}
		})
	}
}
