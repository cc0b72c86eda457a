package pause

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A process group whose processes are all gone leaves the pulse: its
// number, taken again by another's group (a new session's leader, which
// someone may stop on purpose), is continued once at most, at the end of
// the pause the exit came in and only where the group's own stopped
// processes may be left (its leader is not known to be another's), and
// never after; the watchdog holds no lease of it (a hung exporter's would
// end in a SIGCONT), and the rest of the tenant stays paused. Before,
// every thaw sent SIGCONT to the number until the tuner dropped the pause
// (two minutes: some 240 of them), and the lease of every freeze named it.
func TestGoneProcessGroupLeavesThePulse(t *testing.T) {
	const other = "/user.slice/user-2000.slice/session-9.scope"
	for _, tc := range []struct {
		name     string
		pid      int  // the tenant's only process, in group 130 (or its own number)
		midPause bool // it exits mid-pause (else in the thawed half)
		want     string
	}{
		{"the leader exits mid-pause, its number taken by another's leader", 130, true, ""},
		{"the leader exits in the thawed half, its number taken", 130, false, ""},
		{"a member exits mid-pause: its group's other processes may be stopped", 13, true, "-130 continued"},
		{"a member exits in the thawed half", 13, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			h.process(tc.pid, "/user.slice/user-1000.slice/session-1.scope", "", 130)
			pod := filepath.Join(h.cgroupV2Dir(podPath), "cgroup.freeze")
			h.process(20, podPath, "", 20)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p, pipe := h.watchedPauser(t, clock)
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{uint32(tc.pid), 20}, 0.4))
			waitBlocked(t, clock, 1)
			if !tc.midPause {
				clock.Advance(200 * time.Millisecond) // thaw
				waitBlocked(t, clock, 1)
			}
			h.mu.Lock()
			must(t, os.RemoveAll(filepath.Join(h.proc, fmt.Sprint(tc.pid))))
			delete(h.pgids, tc.pid)
			if tc.pid == 130 { // another session's leader under the number
				h.process(130, other, "", 130)
				must(t, os.WriteFile(filepath.Join(h.proc, "130", "stat"), []byte("130 (sh) S 1 130 130 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99999 0 0\n"), 0o644))
			}
			h.signals = nil
			h.mu.Unlock()
			if tc.midPause {
				clock.Advance(200 * time.Millisecond) // thaw
				waitBlocked(t, clock, 1)
			}
			clock.Advance(300 * time.Millisecond) // the next freeze: gone
			waitBlocked(t, clock, 1)
			before := pipe.text()
			for range 6 {
				clock.Advance(200 * time.Millisecond)
				waitBlocked(t, clock, 1)
				clock.Advance(300 * time.Millisecond)
				waitBlocked(t, clock, 1)
			}
			h.mu.Lock()
			got := strings.Join(h.signals, ",")
			h.mu.Unlock()
			if got != tc.want {
				t.Errorf("signals to the group once its processes were gone %q, want %q", got, tc.want)
			}
			if !strings.HasSuffix(before, "thawed pgid 130\n") {
				t.Errorf("the watchdog still holds a lease of the group gone:\n%s", before)
			}
			if after := strings.TrimPrefix(pipe.text(), before); strings.Contains(after, "pgid 130") {
				t.Errorf("the watchdog was told of the group after it was gone:\n%s", after)
			}
			if got := read(t, pod); got != "1" {
				t.Errorf("the rest of the tenant is not paused: its pod's cgroup.freeze %s", got)
			}
			want := []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0.4}}
			if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
				t.Errorf("pauses in force %+v, want %+v", got, want)
			}
		})
	}
}

// A cgroup removed and created again under the same path (a unit
// restarted, running someone else's work) while a pause of the tenant is
// in force is another's: the pulse neither freezes it (in the thawed half)
// nor thaws it (mid-pause: someone else's freeze stands), and drops it;
// with nothing left, the pause is reported at duty 0. Before, the pulse
// froze it by its path every period.
func TestRecreatedCgroupLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v1       bool
		midPause bool
	}{
		{"v2, in the thawed half", false, false},
		{"v2, mid-pause", false, true},
		{"v1, in the thawed half", true, false},
		{"v1, mid-pause", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			control, frozen, thawed := "cgroup.freeze", "1", "0"
			var dir string
			if tc.v1 {
				control, frozen, thawed = "freezer.state", "FROZEN", "THAWED"
				dir = h.cgroupV1Dir(unitPath)
				h.process(10, "/", unitPath, 10)
			} else {
				dir = h.cgroupV2Dir(unitPath)
				h.process(10, unitPath, "", 10)
			}
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond})
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0.4))
			waitBlocked(t, clock, 1)
			if !tc.midPause {
				clock.Advance(200 * time.Millisecond) // thaw
				waitBlocked(t, clock, 1)
			}
			// the unit stops (the cgroup removed) and starts again under
			// the same path: another directory (made before the old one
			// goes, so that its inode number is another), its state
			// someone else's
			next := dir + ".new"
			must(t, os.MkdirAll(next, 0o755))
			state := thawed
			if tc.midPause {
				state = frozen // frozen by someone else
			}
			must(t, os.WriteFile(filepath.Join(next, control), []byte(state), 0o644))
			if !tc.v1 {
				must(t, os.WriteFile(filepath.Join(next, "cgroup.events"), []byte("populated 1\nfrozen 1\n"), 0o644))
			}
			must(t, os.RemoveAll(dir))
			must(t, os.Rename(next, dir))
			for range 3 {
				clock.Advance(200 * time.Millisecond)
				waitBlocked(t, clock, 1)
				if got := read(t, filepath.Join(dir, control)); got != state {
					t.Fatalf("the cgroup made again under the path: %s %s, want %s as its owner left it", control, got, state)
				}
				clock.Advance(300 * time.Millisecond)
				waitBlocked(t, clock, 1)
				if got := read(t, filepath.Join(dir, control)); got != state {
					t.Fatalf("the cgroup made again under the path: %s %s, want %s as its owner left it", control, got, state)
				}
			}
			want := []gpu.PauseInForce{{UUID: "GPU-a", Tenant: "trainer", Duty: 0}}
			if got := p.PausesInForce(); !reflect.DeepEqual(got, want) {
				t.Errorf("pauses in force %+v, want %+v: nothing is paused", got, want)
			}
		})
	}
}
