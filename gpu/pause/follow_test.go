package pause

import (
	"context"
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
	const newPod = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + hex64 + ".scope"
	h := newHost(t)
	oldDir, newDir := h.cgroupV2Dir(podPath), h.cgroupV2Dir(newPod)
	h.process(10, podPath, "", 10)
	h.process(20, newPod, "", 20)
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
	if err := freezeAll([]group{cgroupV2{dir: dir}, procGroup{pgid: 130, kill: func(int, syscall.Signal) error { return syscall.ESRCH }}}); err == nil {
		t.Error("freezeAll with no group left: no error")
	}
}

// A process the tenant gained in the pause under way whose group does not
// freeze leaves the whole tenant running for the rest of the period (as a
// whole, or not at all), and the call says so.
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
	if err := p.SetPauseDuty(ctx, "GPU-a", "ranks", []uint32{10, 12}, 0.5); err == nil || !strings.Contains(err.Error(), "runs the rest of this period") {
		t.Errorf("a gained group that does not freeze: %v", err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("the tenant's other group stays frozen: cgroup.freeze %s", got)
	}
}
