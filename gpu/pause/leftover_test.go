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
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(10, podPath, "", 10)
	h.process(12, "/", "/system.slice/ranks.service", 12)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p, pipe := h.watchedPauser(t, clock)
	must(t, p.SetPauseDuty(context.Background(), "GPU-a", "ranks", []uint32{10, 12}, 0.4))
	waitBlocked(t, clock, 1)
	state := filepath.Join(unit, "freezer.state")
	unwritable(t, state)
	clock.Advance(200 * time.Millisecond) // the pulse's thaw
	waitBlocked(t, clock, 1)
	got := pipe.text()
	if strings.Contains(got, "thawed v1 "+unit) {
		t.Errorf("the watchdog was told of a thaw that failed:\n%s", got)
	}
}

// A group the tenant left whose thaw keeps failing fails every call of
// the tenant while it stays frozen (so the tuner keeps naming it in its
// journal), outlives the tenant's pulse, and is thawed by a later call or
// Close once it can be.
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
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4); err == nil {
		t.Fatal("first follow: no error")
	}
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4); err == nil {
		t.Errorf("a call succeeds while a group the tenant left is still frozen")
	}
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0); err == nil {
		t.Errorf("the pulse ends with no error while a group the tenant left is still frozen")
	}
	// the cgroup can be thawed now, and is still frozen
	must(t, os.Remove(state))
	must(t, os.WriteFile(state, []byte("FROZEN"), 0o644))
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0.4))
	twoPeriods(t, clock)
	must(t, p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{20}, 0))
	must(t, p.Close())
	if got := read(t, state); got != "THAWED" {
		t.Errorf("the group left stays frozen for good: freezer.state %s", got)
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
