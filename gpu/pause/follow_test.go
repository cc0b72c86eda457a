package pause

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A paused tenant whose processes restart elsewhere (a client restarted
// in a new container, a VM started again under a new scope) is paused by
// its new groups from the next call on, and the groups it left are thawed
// at once, even mid-pause: none stays frozen.
func TestPauseFollowsProcesses(t *testing.T) {
	h := newHost(t)
	oldDir, newDir := h.cgroupV2Dir(podPath), h.cgroupV2Dir(otherPod)
	h.process(10, podPath, "", 10)
	h.process(20, otherPod, "", 20)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	oldFreeze, newFreeze := filepath.Join(oldDir, "cgroup.freeze"), filepath.Join(newDir, "cgroup.freeze")

	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{10}, 0.5))
	waitBlocked(t, clock, 1)
	if got := read(t, oldFreeze); got != "1" {
		t.Fatalf("old pod: cgroup.freeze %s, want 1", got)
	}
	// mid-pause, the tenant is now process 20 in another pod: paused at
	// once with what is left of the period's pause
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{20}, 0.5))
	if got := read(t, oldFreeze); got != "0" {
		t.Errorf("the pod the tenant left stays frozen: cgroup.freeze %s", got)
	}
	if got := read(t, newFreeze); got != "1" {
		t.Errorf("the tenant's new pod runs in the pause under way: cgroup.freeze %s", got)
	}
	clock.Advance(250 * time.Millisecond) // thaw
	waitBlocked(t, clock, 1)
	if got := read(t, newFreeze); got != "0" {
		t.Errorf("the new pod is not thawed with the period: cgroup.freeze %s", got)
	}
	clock.Advance(250 * time.Millisecond) // next period
	waitBlocked(t, clock, 1)
	if got := read(t, newFreeze); got != "1" {
		t.Errorf("the new pod is not paused: cgroup.freeze %s", got)
	}
	if got := read(t, oldFreeze); got != "0" {
		t.Errorf("the old pod is frozen again: cgroup.freeze %s", got)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{20}, 0))
	if got := read(t, newFreeze); got != "0" {
		t.Errorf("after duty 0: cgroup.freeze %s", got)
	}
}

// A group whose processes all exited is passed over: the tenant's other
// processes are still paused every period (before, the failed freeze left
// the whole tenant running until its pause ended); with none left, the
// pulse freezes nothing and says so.
func TestPauseOutlivesAnExitedGroup(t *testing.T) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "ranks", []uint32{10, 13}, 0.5))
	waitBlocked(t, clock, 1)
	must(t, os.RemoveAll(dir)) // the pod is gone
	clock.Advance(250 * time.Millisecond)
	waitBlocked(t, clock, 1)
	clock.Advance(250 * time.Millisecond)
	waitBlocked(t, clock, 1)
	h.mu.Lock()
	got := strings.Join(h.signals, ",")
	h.mu.Unlock()
	want := "-130 stopped (signal),-130 continued,-130 stopped (signal)"
	if got != want {
		t.Errorf("signals %q, want %q (the process group paused in the second period too)", got, want)
	}
	if _, _, err := freezeAll([]group{cgroupV2{dir: dir}, procGroup{pgid: 130, kill: func(int, syscall.Signal) error { return syscall.ESRCH }}}, time.Now()); err == nil {
		t.Error("freezeAll with no group left: no error")
	}
}

// A process the tenant gained whose group does not freeze fails the call,
// which changes nothing: in the pause under way or in its thawed half,
// the tenant stays paused as it was, by the groups it had.
func TestPauseGainedGroupFails(t *testing.T) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(12, "/", "/system.slice/ranks.service", 12)
	must(t, os.Remove(filepath.Join(unit, "freezer.state")))
	must(t, os.Mkdir(filepath.Join(unit, "freezer.state"), 0o755)) // unwritable
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5))
	waitBlocked(t, clock, 1)
	for _, phase := range []string{"frozen", "thawed"} {
		if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.6); err == nil || !strings.Contains(err.Error(), "not set on those processes") {
			t.Errorf("%s half: a gained group that does not freeze: %v", phase, err)
		}
		if got := paused(p)["ranks"]; got != 0.5 {
			t.Errorf("%s half: duty %v after the failed call, want 0.5 as it was", phase, got)
		}
		clock.Advance(250 * time.Millisecond)
		waitBlocked(t, clock, 1)
	}
	// the next period: frozen, as before, by the group it had
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "1" {
		t.Errorf("the tenant is not paused as it was: cgroup.freeze %s", got)
	}
}

const otherPod = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + hex64 + ".scope"

// twoPeriods runs the pulse of period 500 ms, duty 0.5, two periods on.
func twoPeriods(t *testing.T, clock *gpu.ManualClock) {
	t.Helper()
	for range 4 {
		clock.Advance(250 * time.Millisecond)
		waitBlocked(t, clock, 1)
	}
}

// A duty of 0 for one GPU freezes nothing while another GPU keeps the
// tenant paused: the groups it names are thawed (a restore's, after a
// crash, with PIDs the journal kept), and that GPU's groups leave the
// set, so a group the tenant has since left is not frozen through it.
func TestPauseZeroDutyFreezesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls func(p *Pauser)
	}{
		{"a duty of 0 naming another's group", func(p *Pauser) {
			must(t, p.SetPauseDuty(context.Background(), "GPU-b", "trainer", []uint32{20}, 0))
		}},
		{"GPU-b released, then GPU-a follows the tenant away", func(p *Pauser) {
			ctx := context.Background()
			must(t, p.SetPauseDuty(ctx, "GPU-b", "trainer", []uint32{10}, 0.5))
			must(t, p.SetPauseDuty(ctx, "GPU-b", "trainer", []uint32{10}, 0))
			must(t, p.SetPauseDuty(ctx, "GPU-a", "trainer", []uint32{30}, 0.5))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const third = "/system.slice/trainer.service"
			h := newHost(t)
			first, other := h.cgroupV2Dir(podPath), h.cgroupV2Dir(otherPod)
			h.cgroupV2Dir(third)
			h.process(10, podPath, "", 10)
			h.process(20, otherPod, "", 20)
			h.process(30, third, "", 30)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.5))
			waitBlocked(t, clock, 1)
			tc.calls(p)
			twoPeriods(t, clock)
			if got := read(t, filepath.Join(other, "cgroup.freeze")); got != "0" {
				t.Errorf("the group a duty of 0 named: cgroup.freeze %s", got)
			}
			if tc.name != "a duty of 0 naming another's group" {
				if got := read(t, filepath.Join(first, "cgroup.freeze")); got != "0" {
					t.Errorf("the group the tenant left: cgroup.freeze %s", got)
				}
			}
		})
	}
}

// A group the tenant came to whose processes exited before it could be
// frozen is passed over: the rest of the tenant stays paused, the call
// succeeds.
func TestPauseGainedGroupGone(t *testing.T) {
	h := newHost(t)
	dir := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	h.process(12, "/user.slice/user-0.slice/session-1.scope", "/", 120)
	h.exited[120] = true
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5))
	waitBlocked(t, clock, 1)
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.5); err != nil {
		t.Errorf("a gained group gone already: %v", err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "1" {
		t.Errorf("the tenant's pod was thawed mid-pause: cgroup.freeze %s", got)
	}
}

// The watchdog's lease of a group frozen mid-pause ends where the others'
// does (what is left of the on time and half the off time), and a group
// left whose thaw fails keeps its lease (the watchdog is not told it was
// thawed) and is thawed at the pulse's next thaw once it can be.
func TestPauseLeasesOfChangedGroups(t *testing.T) {
	h := newHost(t)
	first, other := h.cgroupV2Dir(podPath), h.cgroupV2Dir(otherPod)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(10, podPath, "", 10)
	h.process(20, otherPod, "", 20)
	h.process(12, "/", "/system.slice/ranks.service", 12)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p, pipe := h.watchedPauser(t, clock)
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.4)) // on 200 ms
	waitBlocked(t, clock, 1)
	clock.Advance(100 * time.Millisecond)
	waitBlocked(t, clock, 1)
	state := filepath.Join(unit, "freezer.state")
	unwritable(t, state)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4)) // in force: the failed thaw is logged
	got := pipe.text()
	if want := "freeze v2 " + other + " 250ms\n"; !strings.Contains(got, want) {
		t.Errorf("watchdog lines\n%s\nwant %q (100 ms of the on time left, half the 300 ms off)", got, want)
	}
	if strings.Contains(got, "thawed v1 "+unit) {
		t.Errorf("the watchdog was told of a thaw that failed:\n%s", got)
	}
	if !strings.Contains(got, "thawed v2 "+first) {
		t.Errorf("the watchdog was not told of the thaw of %s:\n%s", first, got)
	}
	must(t, os.Remove(state))
	must(t, os.WriteFile(state, []byte("FROZEN"), 0o644))
	clock.Advance(100 * time.Millisecond) // the pulse's thaw
	waitBlocked(t, clock, 1)
	if got := read(t, state); got != "THAWED" {
		t.Errorf("the group left is not thawed at the next thaw: freezer.state %s", got)
	}
}

// The groups change under a running pulse on the real clock (races under
// -race), and a duty of 0 everywhere leaves nothing frozen.
func TestPauseGroupsChangeUnderPulse(t *testing.T) {
	h := newHost(t)
	var dirs []string
	for i := range 4 {
		path := fmt.Sprintf("/system.slice/t%d.service", i)
		dirs = append(dirs, h.cgroupV2Dir(path))
		h.process(10+i, path, "", 10+i)
	}
	p := h.pauser(t, gpu.RealClock{}, Options{Period: 4 * time.Millisecond})
	ctx := context.Background()
	for round := range 150 {
		a, b := uint32(10+round%4), uint32(10+(round/4)%4)
		must(t, p.SetPauseDuty(ctx, "GPU-a", "x", []uint32{a, b}, []float64{0.5, 0.8, 0.3}[round%3]))
		switch {
		case round%11 == 0:
			must(t, p.SetPauseDuty(ctx, "GPU-b", "x", []uint32{b}, 0))
		case round%7 == 0:
			must(t, p.SetPauseDuty(ctx, "GPU-b", "x", []uint32{b}, 0.2))
		}
		time.Sleep(time.Duration(round%3) * time.Millisecond)
		if round%50 == 49 {
			must(t, p.SetPauseDuty(ctx, "GPU-a", "x", []uint32{a}, 0))
			must(t, p.SetPauseDuty(ctx, "GPU-b", "x", []uint32{b}, 0))
			for _, d := range dirs {
				if got := read(t, filepath.Join(d, "cgroup.freeze")); got != "0" {
					t.Fatalf("round %d: %s frozen after a duty of 0 everywhere", round, d)
				}
			}
		}
	}
}

// A process group is stopped only while the process it was found from is
// in it, the same process: once that process is gone and its number, or
// the group's, taken again, the group is another's, and the pulse stops
// no one through it (it still continues it at the end of the pause).
func TestProcessGroupNumberTakenAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *host)
	}{
		{"the process restarted under its number", func(h *host) {
			must(t, os.WriteFile(filepath.Join(h.proc, "13", "stat"), []byte("13 (python3) S 1 130 130 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99999 0 0\n"), 0o644))
		}},
		{"the process left the group", func(h *host) { h.pgids[13] = 131 }},
		{"the process is gone", func(h *host) { must(t, os.RemoveAll(filepath.Join(h.proc, "13"))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "t", []uint32{13}, 0.5))
			waitBlocked(t, clock, 1)
			h.mu.Lock()
			tc.change(h)
			h.mu.Unlock()
			twoPeriods(t, clock)
			h.mu.Lock()
			got := strings.Join(h.signals, ",")
			h.mu.Unlock()
			if n := strings.Count(got, "stopped"); n != 1 || !strings.HasPrefix(got, "-130 stopped (signal),-130 continued") {
				t.Errorf("signals %q: stopped %d times, want once, while it was the tenant's", got, n)
			}
		})
	}
}

// A group the tenant gains (a restarted client, a new rank) in the last
// milliseconds of a pause is taken into its set where its freeze cannot
// settle by the pause's end, on after the others' write (it settles 2 ms
// after its own, or a watchdog started again took the rest, or none can be
// started again yet, the last started less than a period ago): the thaw is
// due, and the next period freezes it with the others. Before, the call
// failed and the new process ran unpaused until the tuner tried again
// (15 s on), the duty reading in force. One that has not settled within
// FreezeTimeout, well before the thaw, still fails the call.
func TestPauseGainedGroupNearTheThaw(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      time.Duration // the call, into a pause thawed at 250ms
		restart time.Duration // where set, the watchdog is gone, and its start again takes this
		later   bool          // in the second period (the watchdog started a period ago: started again)
		timeout time.Duration // FreezeTimeout (0: 1s)
		refused bool
	}{
		{name: "its freeze settles after the thaw", at: 249 * time.Millisecond},
		{name: "the watchdog's start takes the rest", at: 249 * time.Millisecond, restart: 5 * time.Millisecond, later: true},
		{name: "the watchdog not started again within a period", at: 249 * time.Millisecond, restart: 5 * time.Millisecond},
		{name: "not settled within FreezeTimeout", at: 200 * time.Millisecond, timeout: time.Millisecond, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			h.cgroupV2Dir(podPath)
			unit := h.cgroupV2Dir(unitPath)
			h.process(10, podPath, "", 10)
			h.process(12, unitPath, "", 12)
			events := filepath.Join(unit, "cgroup.events")
			must(t, os.WriteFile(events, []byte("populated 1\nfrozen 0\n"), 0o644)) // not settled until told
			clock := gpu.NewManualClock(time.Unix(0, 0))
			pipe, starts := &lines{}, 0
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, FreezeTimeout: tc.timeout, startWatchdog: func() (io.WriteCloser, func() error, error) {
				if starts++; starts > 1 {
					clock.Advance(tc.restart)
				}
				return pipe, func() error { return nil }, nil
			}})
			ctx := context.Background()
			must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10}, 0.5)) // on: 250ms
			waitBlocked(t, clock, 1)
			base := time.Unix(0, 0) // the pause's start
			if tc.later {
				base = base.Add(500 * time.Millisecond)
				clock.Advance(250 * time.Millisecond)
				waitBlocked(t, clock, 1)
				clock.Advance(250 * time.Millisecond)
				waitBlocked(t, clock, 1)
			}
			clock.Advance(tc.at)
			waitBlocked(t, clock, 1)
			if tc.restart > 0 {
				must(t, pipe.Close())
				pipe = &lines{}
			}
			errc := make(chan error, 1)
			go func() { errc <- p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.5) }()
			var err error
			for done := false; !done; {
				select {
				case err = <-errc:
					done = true
				case <-time.After(time.Millisecond):
					if clock.Waiters() == 2 { // the pulse's thaw, and the poll of the unit's freeze
						clock.Advance(time.Millisecond)
					}
				}
			}
			if refused := err != nil; refused != tc.refused {
				t.Errorf("the call at %v: %v, want refused %v", tc.at, err, tc.refused)
			}
			must(t, os.WriteFile(events, []byte("populated 1\nfrozen 1\n"), 0o644)) // settled by now
			waitBlocked(t, clock, 1)
			if thaw := base.Add(250 * time.Millisecond); clock.Now().Before(thaw) {
				clock.Advance(thaw.Sub(clock.Now()))
				waitBlocked(t, clock, 1)
			}
			if got := read(t, filepath.Join(unit, "cgroup.freeze")); got != "0" {
				t.Errorf("after the thaw: the unit's cgroup.freeze %s, want 0", got)
			}
			clock.Advance(250 * time.Millisecond) // the next period's freeze
			waitBlocked(t, clock, 1)
			if got, want := read(t, filepath.Join(unit, "cgroup.freeze")), map[bool]string{false: "1", true: "0"}[tc.refused]; got != want {
				t.Errorf("next period: the unit's cgroup.freeze %s, want %s", got, want)
			}
		})
	}
}
