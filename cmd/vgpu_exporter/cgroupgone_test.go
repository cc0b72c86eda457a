package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A pause froze a container's cgroup from its GPU process; that process
// was killed while frozen (cgroup v2 lets SIGKILL through, as the OOM
// killer's does) and the exporter crashed. A start thaws the cgroup the
// pause journaled, still there under the same ID on the same boot, though
// no PID journaled names it any more: the container's other process runs
// again. A cgroup created again under the path (another ID) is another's
// and stays frozen, as does one journaled on another boot; a pause
// journaled without its cgroups (an earlier version) is thawed by PID
// alone, which finds nothing. Every original is closed.
func TestThawWithTunerOffThawsTheCgroupOfAKilledProcess(t *testing.T) {
	procs, boot := hostBoot(t)
	for _, c := range []struct {
		name      string
		recreated bool   // the cgroup removed and made again under its path before the freeze
		boot      string // the boot journaled; "" for this one
		cgroups   bool   // the pause journaled with its cgroup
		frozen    bool
		log       string
	}{
		{"the cgroup it froze", false, "", true, false, "the cgroups it froze thawed"},
		{"the cgroup recreated under its path", true, "", true, true, "another ID (recreated, another's): not thawed"},
		{"the cgroup of another boot", false, otherBoot, true, true, "paused before the host's last boot"},
		{"journaled without its cgroups (an earlier version)", false, "", false, true, "process gone, not thawed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var oldID uint64
			if c.recreated {
				oldID = cgroupOnce(t)
			}
			_, cg := frozenContainer(t)             // the container's other process, frozen
			gpuProc := exec.Command("sleep", "300") // the tenant's GPU process, the one journaled
			if err := gpuProc.Start(); err != nil {
				t.Fatal(err)
			}
			pid := gpuProc.Process.Pid
			t.Cleanup(func() { _ = gpuProc.Process.Kill(); _ = gpuProc.Wait() })
			if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := procs.StartTime(uint32(pid))
			if err != nil {
				t.Fatal(err)
			}
			b := boot
			if c.boot != "" {
				b = c.boot
			}
			extra := fmt.Sprintf(`,"boot":%q,"starts":[%s]`, b, s)
			if c.cgroups {
				fi, err := os.Stat(cg)
				if err != nil {
					t.Fatal(err)
				}
				id := fi.Sys().(*syscall.Stat_t).Ino
				if c.recreated {
					if id == oldID {
						t.Fatalf("the cgroup made again has the ID %d of the one before", id)
					}
					id = oldID
				}
				rel, err := filepath.Rel(hostV2(t), cg)
				if err != nil {
					t.Fatal(err)
				}
				extra += fmt.Sprintf(`,"cgroups":[{"path":%q,"id":%d}]`, "/"+filepath.ToSlash(rel), id)
			}
			journal := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(journal, []byte(pauseJournal(pid, extra)), 0o600); err != nil {
				t.Fatal(err)
			}
			// the GPU process dies while frozen, and is reaped
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = gpuProc.Wait()
			if !cgroupFrozen(t, cg) {
				t.Fatal("the container is not frozen")
			}
			startOffOnHost(t, journal, cg, c.frozen, c.log, 0)
			ev, err := os.ReadFile(filepath.Join(cg, "cgroup.events"))
			if err != nil || strings.Contains(string(ev), "frozen 1") != c.frozen {
				t.Errorf("the container's other process is frozen after the start: %v, want %v (cgroup.events %q, %v)", !c.frozen, c.frozen, ev, err)
			}
		})
	}
}

// cgroupOnce makes the cgroup frozenContainer makes for this test, and
// removes it again: the cgroup made next under its path is another,
// whose ID differs. It returns the ID it had.
func cgroupOnce(t *testing.T) uint64 {
	t.Helper()
	top := filepath.Join(hostV2(t), fmt.Sprintf("vgpu-thaw-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())))
	cg := filepath.Join(top, "docker", strings.Repeat("ab", 32))
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cg); err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
