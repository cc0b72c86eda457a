package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// hostV2 is this host's cgroup v2 hierarchy: /sys/fs/cgroup on a v2
// host, its unified/ on a hybrid one.
func hostV2(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil {
			return d
		}
	}
	t.Skip("no cgroup v2 hierarchy")
	return ""
}

// frozenContainer starts `sleep 300` in a container's cgroup v2 of its
// own and freezes it, as `docker pause` does; it returns the PID and the
// cgroup directory, all undone at the test's end.
func frozenContainer(t *testing.T) (int, string) {
	t.Helper()
	top := filepath.Join(hostV2(t), fmt.Sprintf("vgpu-thaw-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())))
	cg := filepath.Join(top, "docker", strings.Repeat("ab", 32))
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(cg, "cgroup.freeze"), []byte("0"), 0o644)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for range 50 { // the cgroup empties once the process is reaped
			if os.Remove(cg) == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = os.Remove(filepath.Dir(cg))
		_ = os.Remove(top)
	})
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.freeze"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(cg, "cgroup.events")); strings.Contains(string(b), "frozen 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container never froze")
		}
	}
	return cmd.Process.Pid, cg
}

// cgroupFrozen says whether the cgroup v2 cg is set frozen.
func cgroupFrozen(t *testing.T, cg string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg, "cgroup.freeze"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)) == "1"
}

// pauseJournal is a journal's pause original of tenant train on PID pid,
// with extra fields (the processes' identity) spliced in.
func pauseJournal(pid int, extra string) string {
	return fmt.Sprintf(`{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"pause_duty","pid":%d},"tenant":"train","from":{"kind":"duty","num":0},"pids":[%d]%s}`+"\n", pid, pid, extra)
}

// A start with the tuner off on a journal on a read-only file system
// thaws the tenant it holds paused (a tenant left frozen is the worse
// harm) and warns that its original stays open, for the next start to
// thaw again; while an exporter's tuner holds the journal (through
// another, writable mount of the same file: it runs, and its pause is
// live), it thaws nothing.
func TestThawWithTunerOffReadOnlyJournal(t *testing.T) {
	for _, c := range []struct {
		name   string
		held   bool
		frozen bool
		log    string
	}{
		{"nobody holds it", false, false, "the next start thaws them again"},
		{"a running tuner holds it", true, true, "cannot be opened and locked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, cg := frozenContainer(t)
			rw := t.TempDir()
			if err := os.WriteFile(filepath.Join(rw, "journal"), []byte(pauseJournal(pid, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			if c.held {
				j, err := tuner.OpenJournal(filepath.Join(rw, "journal"))
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
			}
			journal := filepath.Join(testutil.BindReadOnly(t, rw), "journal")
			startOffOnHost(t, journal, cg, c.frozen, c.log, 1)
		})
	}
}

// A start with the tuner off and no freezer (--pause.cgroup-root empty, as
// the Helm chart passes outside enforce) says once, naming the flag, that
// the paused tenants are not thawed, and never that they are.
func TestThawWithTunerOffNoFreezer(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	if err := os.WriteFile(journal, []byte(pauseJournal(4711, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cfg := testConfig(t, "--backend=nvml", "--tuner.journal="+journal, "--pause.cgroup-root=", "--proc.root="+dir)
	thawWithTunerOff(cfg, nil, gpu.RealClock{}, log.NewLogfmtLogger(&logs))
	out := logs.String()
	if n := strings.Count(out, "level=warn") + strings.Count(out, "level=error"); n != 1 || !strings.Contains(out, "--pause.cgroup-root") {
		t.Errorf("%d warnings and errors, want one naming --pause.cgroup-root:\n%s", n, out)
	}
	if strings.Contains(out, "thawing") || strings.Contains(out, "thawed now") || strings.Contains(out, "restored an original") {
		t.Errorf("the log claims a thaw:\n%s", out)
	}
	if origs, err := tuner.ReadJournalOriginals(journal); err != nil || len(origs) != 1 {
		t.Errorf("%d open originals (%v), want the pause's", len(origs), err)
	}
}

// A start thaws a journaled pause only where the process that holds its
// PID now is the one paused: journaled with this boot's ID and its start
// time. A PID whose process started at another time (the PID taken again)
// or on another boot names a process the tuner never paused, here in a
// container someone else froze (`docker pause`): that cgroup is not
// touched, and the pause's original is closed, its process gone. A pause
// journaled without (by an earlier version) is thawed by PID, as before.
func TestThawWithTunerOffPassesOverAnotherProcess(t *testing.T) {
	procs, boot := hostBoot(t)
	for _, c := range []struct {
		name   string
		id     func(start uint64) string
		frozen bool
		log    string
	}{
		{"another process of this boot", func(s uint64) string { return fmt.Sprintf(`,"boot":%q,"starts":[%d]`, boot, s+1) }, true, "process gone, not thawed"},
		{"a process of another boot", func(s uint64) string { return fmt.Sprintf(`,"boot":%q,"starts":[%d]`, otherBoot, s) }, true, "paused before the host's last boot"},
		{"the process paused", func(s uint64) string { return fmt.Sprintf(`,"boot":%q,"starts":[%d]`, boot, s) }, false, "tuner restored an original setting"},
		{"journaled without (an earlier version)", func(uint64) string { return "" }, false, "tuner restored an original setting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, cg := frozenContainer(t)
			s, err := procs.StartTime(uint32(pid))
			if err != nil {
				t.Fatal(err)
			}
			start, _ := strconv.ParseUint(s, 10, 64)
			journal := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(journal, []byte(pauseJournal(pid, c.id(start))), 0o600); err != nil {
				t.Fatal(err)
			}
			startOffOnHost(t, journal, cg, c.frozen, c.log, 0)
		})
	}
}

// otherBoot is the boot ID of another boot of this host.
const otherBoot = "7d2e9c41-8a5b-4f3e-a1c6-2b9d0e8f7a11"

// hostBoot is this host's procfs reader and its boot ID; it skips the
// test where the boot ID cannot be read.
func hostBoot(t *testing.T) (kube.ProcReader, string) {
	t.Helper()
	procs := kube.NewProcReader("/proc")
	boot, err := procs.BootID()
	if err != nil {
		t.Skip("no boot ID: ", err)
	}
	return procs, boot
}

// startOffOnHost starts with the tuner off on journal, with this host's
// freezer and /proc, and checks that the cgroup cg is frozen or not after
// it, that the log says want, and that open originals stay open.
func startOffOnHost(t *testing.T, journal, cg string, frozen bool, want string, open int) {
	t.Helper()
	var logs strings.Builder
	cfg := testConfig(t, "--backend=nvml", "--tuner.journal="+journal, "--pause.cgroup-root=/sys/fs/cgroup", "--proc.root=/proc")
	thawWithTunerOff(cfg, nil, gpu.RealClock{}, log.NewLogfmtLogger(&logs))
	if got := cgroupFrozen(t, cg); got != frozen {
		t.Errorf("%s frozen after the start: %v, want %v; log:\n%s", cg, got, frozen, logs.String())
	}
	if !strings.Contains(logs.String(), want) {
		t.Errorf("no %q in the log:\n%s", want, logs.String())
	}
	if origs, err := tuner.ReadJournalOriginals(journal); err != nil || len(origs) != open {
		t.Errorf("%d open originals (%v), want %d", len(origs), err, open)
	}
}
