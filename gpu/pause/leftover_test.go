package pause

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The watchdog is told of a thaw only where it succeeded: a group whose
// thaw fails at the pulse's thaw keeps its lease (which ends its freeze
// should nothing else).
func TestPauseFailedThawKeepsLease(t *testing.T) {
	_, pipe, clock, _, unit := pausedRanks(t)
	clock.Advance(200 * time.Millisecond) // the pulse's thaw
	waitBlocked(t, clock, 1)
	got := pipe.text()
	if strings.Contains(got, "thawed v1 "+unit) {
		t.Errorf("the watchdog was told of a thaw that failed:\n%s", got)
	}
}

// A group the tenant left whose thaw keeps failing does not fail the
// tenant's calls, the one that ends the pause either (what they ask for
// is in force; the failure is logged); it outlives the tenant's pulse, and
// is thawed by the tenant's next call once it can be.
func TestPauseLeftGroupThawedOnceItCan(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.cgroupV2Dir(otherPod)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(10, podPath, "", 10)
	h.process(12, "/", "/system.slice/ranks.service", 12)
	h.process(20, otherPod, "", 20)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.4))
	waitBlocked(t, clock, 1)
	state := filepath.Join(unit, "freezer.state")
	unwritable(t, state)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4))
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0)) // the tenant's own groups thawed: in force
	// the cgroup can be thawed now, and is still frozen
	must(t, os.Remove(state))
	must(t, os.WriteFile(state, []byte("FROZEN"), 0o644))
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4))
	if got := read(t, state); got != "THAWED" {
		t.Errorf("the group left is not thawed at the tenant's next call: freezer.state %s", got)
	}
}

// watchedPauser is h's pauser with a period of 500 ms and a watchdog
// whose lines it returns.
func (h *host) watchedPauser(t *testing.T, clock gpu.Clock) (*Pauser, *lines) {
	pipe := &lines{}
	p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, startWatchdog: func() (io.WriteCloser, func() error, error) {
		return pipe, func() error { return nil }, nil
	}})
	return p, pipe
}

// text is what the watchdog was told.
func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// unwritable makes a v1 freezer.state a directory: its thaw fails.
func unwritable(t *testing.T, state string) {
	must(t, os.Remove(state))
	must(t, os.Mkdir(state, 0o755))
}

// A freeze that fails at one group thaws every group of the tenant, also
// one after it still frozen (its last thaw failed): the watchdog is told
// of none it did not thaw, and a group that stays frozen is kept to be
// thawed again (by Close here).
func TestFailedFreezeThawsEveryGroup(t *testing.T) {
	p, pipe, clock, pod, unit := pausedRanks(t)
	state := filepath.Join(unit, "freezer.state")
	ev := filepath.Join(pod, "cgroup.events")
	must(t, os.Remove(ev))
	must(t, os.Mkdir(ev, 0o755))          // the pod's next freeze fails
	clock.Advance(200 * time.Millisecond) // the thaw: the unit's fails
	waitBlocked(t, clock, 1)
	clock.Advance(300 * time.Millisecond) // the freeze: the pod's fails first
	waitBlocked(t, clock, 1)
	got := pipe.text()
	if i, j := strings.LastIndex(got, "thawed v1 "+unit), strings.LastIndex(got, "freeze v1 "+unit); i > j {
		t.Errorf("the watchdog was told %s was thawed; it is still frozen:\n%s", unit, got)
	}
	must(t, os.Remove(state))
	must(t, os.WriteFile(state, []byte("FROZEN"), 0o644))
	must(t, p.Close())
	if s := read(t, state); s != "THAWED" {
		t.Errorf("after Close: freezer.state %s", s)
	}
}

// A call that fails changes nothing: a first pause refused (a group that
// cannot be frozen) starts no pulse and pauses nothing.
func TestFailedFirstPauseStartsNothing(t *testing.T) {
	h := newHost(t)
	pod := h.cgroupV2Dir(podPath)
	bad := h.cgroupV2Dir(otherPod)
	h.process(10, podPath, "", 10)
	h.process(20, otherPod, "", 20)
	ev := filepath.Join(bad, "cgroup.events")
	must(t, os.Remove(ev))
	must(t, os.Mkdir(ev, 0o755))
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{Period: 500 * time.Millisecond})
	if err := p.SetPauseDuty(context.Background(), "GPU-a", "ranks", []uint32{10, 20}, 0.4); err == nil {
		t.Fatal("a pause with a group that cannot be frozen: no error")
	}
	if d := paused(p); len(d) != 0 {
		t.Errorf("a failed first pause runs a pulse: %v", d)
	}
	if got := read(t, filepath.Join(pod, "cgroup.freeze")); got != "0" {
		t.Errorf("a failed first pause left a group frozen: cgroup.freeze %s", got)
	}
}

// pausedRanks pauses ranks (a pod's process and a unit's, 40% of 500 ms,
// with a watchdog) and makes the unit's thaw fail; it returns the pod's
// and the unit's cgroup directories.
func pausedRanks(t *testing.T) (p *Pauser, pipe *lines, clock *gpu.ManualClock, pod, unit string) {
	h := newHost(t)
	pod = h.cgroupV2Dir(podPath)
	unit = h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(10, podPath, "", 10)
	h.process(12, "/", "/system.slice/ranks.service", 12)
	clock = gpu.NewManualClock(time.Unix(0, 0))
	p, pipe = h.watchedPauser(t, clock)
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "ranks", []uint32{10, 12}, 0.4))
	waitBlocked(t, clock, 1)
	unwritable(t, filepath.Join(unit, "freezer.state"))
	return p, pipe, clock, pod, unit
}
