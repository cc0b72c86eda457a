//go:build e2e

package pause_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The end-to-end tests (make e2e-pause) pause real process trees through
// this machine's cgroup v2 freezer, its v1 freezer and signals. They need
// root and the freezers; without them they skip, except under CI=true,
// where they fail.

const cgroupRoot = "/sys/fs/cgroup"

// kinds are the ways a tenant is paused, each with where its cgroup goes.
var kinds = []struct {
	name string
	dir  func() string // the cgroup hierarchy the tree is moved into; "" for signals
}{
	{"cgroup v2", v2Root},
	{"cgroup v1", func() string { return filepath.Join(cgroupRoot, "freezer") }},
	{"signals", func() string { return "" }},
}

// v2Root is the cgroup v2 hierarchy: the root on a v2 host, unified/ on a
// hybrid one.
func v2Root() string {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return cgroupRoot
	}
	return filepath.Join(cgroupRoot, "unified")
}

func needRoot(t *testing.T, hierarchy string) {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root"
	case hierarchy != "" && !exists(filepath.Join(hierarchy, "cgroup.procs")):
		why = "no " + hierarchy
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("end-to-end pause test cannot run under CI: %s", why)
	}
	t.Skip(why)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// tree is a real process tree: a shell and a child shell, each appending a
// line to its own file every 10 ms, in a process group of their own and,
// for the cgroup kinds, in a cgroup named as a systemd unit.
type tree struct {
	cmd    *exec.Cmd
	pids   []uint32
	files  []string
	cgroup string
	made   []string // the cgroups created above cgroup, outermost first
}

func startTree(t *testing.T, hierarchy string) *tree {
	t.Helper()
	return startTreeIn(t, hierarchy, "vgpu-pause-e2e-%d.service")
}

// startTreeIn starts the tree in the cgroup rel (a path under hierarchy,
// %d the tree's PID), creating what is missing of it.
func startTreeIn(t *testing.T, hierarchy, rel string) *tree {
	t.Helper()
	dir := t.TempDir()
	tr := &tree{files: []string{filepath.Join(dir, "parent"), filepath.Join(dir, "child")}}
	goFile := filepath.Join(dir, "go")
	script := fmt.Sprintf(`while [ ! -e %[1]s ]; do sleep 0.01; done
(while :; do echo c >> %[3]s; sleep 0.01; done) &
echo $! > %[1]s.child
while :; do echo p >> %[2]s; sleep 0.01; done`, goFile, tr.files[0], tr.files[1])
	tr.cmd = exec.Command("sh", "-c", script)
	tr.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.stop)
	if hierarchy != "" {
		tr.cgroup = filepath.Join(hierarchy, fmt.Sprintf(rel, tr.cmd.Process.Pid))
		var missing []string
		for d := tr.cgroup; d != hierarchy && !exists(d); d = filepath.Dir(d) {
			missing = append([]string{d}, missing...)
		}
		for _, d := range missing {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		tr.made = missing[:max(0, len(missing)-1)]
		if err := os.WriteFile(filepath.Join(tr.cgroup, "cgroup.procs"), []byte(strconv.Itoa(tr.cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 || !tr.running() {
		if time.Now().After(deadline) {
			t.Fatal("the process tree never started")
		}
		time.Sleep(20 * time.Millisecond)
		b, _ := os.ReadFile(goFile + ".child")
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	tr.pids = []uint32{uint32(tr.cmd.Process.Pid), uint32(child)}
	return tr
}

// sizes are the lengths of the tree's files.
func (tr *tree) sizes() [2]int64 {
	var s [2]int64
	for i, f := range tr.files {
		if fi, err := os.Stat(f); err == nil {
			s[i] = fi.Size()
		}
	}
	return s
}

// running reports whether both processes write within 300 ms.
func (tr *tree) running() bool {
	a := tr.sizes()
	time.Sleep(300 * time.Millisecond)
	b := tr.sizes()
	return b[0] > a[0] && b[1] > a[1]
}

// still reports whether neither process writes for 300 ms.
func (tr *tree) still() bool {
	a := tr.sizes()
	time.Sleep(300 * time.Millisecond)
	return tr.sizes() == a
}

// stop thaws, kills and removes the tree and its cgroup.
func (tr *tree) stop() {
	pgid := tr.cmd.Process.Pid
	if tr.cgroup != "" {
		_ = os.WriteFile(filepath.Join(tr.cgroup, "cgroup.freeze"), []byte("0"), 0)
		_ = os.WriteFile(filepath.Join(tr.cgroup, "freezer.state"), []byte("THAWED"), 0)
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = tr.cmd.Wait()
	if tr.cgroup != "" {
		for i := 0; i < 100 && os.Remove(tr.cgroup) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		for i := len(tr.made) - 1; i >= 0; i-- {
			_ = os.WriteFile(filepath.Join(tr.made[i], "cgroup.freeze"), []byte("0"), 0)
			_ = os.Remove(tr.made[i])
		}
	}
}

// A libvirt VM's QEMU runs below its machine scope
// (machine.slice/machine-qemu\x2dN\x2dNAME.scope/libvirt/emulator): pausing
// it freezes the whole scope, every thread of the VM, and thawing runs it
// again.
func TestEndToEndVMScope(t *testing.T) {
	v2 := v2Root()
	needRoot(t, v2)
	// (under a cgroup of the test's own, not the host's machine.slice)
	tr := startTreeIn(t, v2, `vgpu-pause-e2e-%d/machine.slice/machine-qemu\x2d1\x2dvgpusim\x2de2e.scope/libvirt/emulator`)
	scope := filepath.Dir(filepath.Dir(tr.cgroup))
	p := detect(t, 4*time.Second, 3600*time.Millisecond)
	ctx := context.Background()
	if err := p.SetPauseDuty(ctx, "GPU-e2e", "vm-train", tr.pids[:1], 0.9); err != nil {
		t.Fatal(err)
	}
	if !tr.still() {
		t.Fatal("the VM's process still runs after the pause")
	}
	if b, err := os.ReadFile(filepath.Join(scope, "cgroup.freeze")); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("the scope %s: cgroup.freeze %q (%v), want 1: the VM frozen as a whole", scope, b, err)
	}
	if err := p.SetPauseDuty(ctx, "GPU-e2e", "vm-train", tr.pids[:1], 0); err != nil {
		t.Fatal(err)
	}
	if !tr.running() {
		t.Fatal("the VM's process does not run after the thaw")
	}
}

// A tenant whose process restarts elsewhere while it is paused (a new
// cgroup, a new process group) is paused by the new one from the next
// call on, and the one it left runs at once: no group stays frozen.
func TestEndToEndPauseFollows(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			needRoot(t, k.dir())
			old, cur := startTree(t, k.dir()), startTree(t, k.dir())
			p := detect(t, 2*time.Second, 1800*time.Millisecond)
			ctx := context.Background()
			if err := p.SetPauseDuty(ctx, "GPU-e2e", "trainer", old.pids, 0.9); err != nil {
				t.Fatal(err)
			}
			if !old.still() {
				t.Fatal("the tree still runs after the pause")
			}
			if err := p.SetPauseDuty(ctx, "GPU-e2e", "trainer", cur.pids, 0.9); err != nil {
				t.Fatal(err)
			}
			if !cur.still() {
				t.Fatal("the tenant's new tree runs in the pause under way")
			}
			if !old.running() {
				t.Fatal("the tree the tenant left stays paused")
			}
			paused := false
			for deadline := time.Now().Add(5 * time.Second); !paused && time.Now().Before(deadline); {
				paused = cur.still()
			}
			if !paused {
				t.Fatal("the tenant's new tree is not paused in the next period")
			}
			if !old.running() {
				t.Fatal("the tree the tenant left is paused again")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if !cur.running() {
				t.Fatal("the new tree does not run after Close")
			}
		})
	}
}

func detect(t *testing.T, period, maxPause time.Duration) *pause.Pauser {
	t.Helper()
	p, err := pause.Detect(pause.Options{Clock: gpu.RealClock{}, Period: period, MaxPause: maxPause}, cgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A real process tree paused and resumed as a whole through each
// mechanism; a pulse lets it run part of each period.
func TestEndToEndPause(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			needRoot(t, k.dir())
			tr := startTree(t, k.dir())
			p := detect(t, 4*time.Second, 3600*time.Millisecond)
			ctx := context.Background()
			if err := p.SetPauseDuty(ctx, "GPU-e2e", "trainer", tr.pids, 0.9); err != nil {
				t.Fatal(err)
			}
			if !tr.still() {
				t.Fatal("the tree still runs after the pause")
			}
			if err := p.SetPauseDuty(ctx, "GPU-e2e", "trainer", tr.pids, 0); err != nil {
				t.Fatal(err)
			}
			if !tr.running() {
				t.Fatal("the tree does not run after the thaw")
			}
			// A pulse: paused 80% of each 200 ms period, for 1.2 s.
			q := detect(t, 200*time.Millisecond, 0)
			before := tr.sizes()
			if err := q.SetPauseDuty(ctx, "GPU-e2e", "trainer", tr.pids, 0.8); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			pulsed := tr.sizes()
			time.Sleep(1200 * time.Millisecond)
			free := tr.sizes()
			for i := range 2 {
				on, off := pulsed[i]-before[i], free[i]-pulsed[i]
				if on == 0 || on*10 > off*7 {
					t.Errorf("process %d wrote %d bytes in 1.2 s paused 80%% of the time, %d unpaused: want some, and well under", i, on, off)
				}
			}
		})
	}
}

// crashHelper is the pulse loop's owner in a child process: a tuner in
// enforce mode with a journal pauses the tree, says so, and waits to be
// killed with SIGKILL while the tree is paused.
func crashHelper() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	parse := func(list string) []uint32 {
		var pids []uint32
		for _, s := range strings.Split(list, ",") {
			n, err := strconv.Atoi(s)
			if err != nil {
				fail(err)
			}
			pids = append(pids, uint32(n))
		}
		return pids
	}
	pids := parse(os.Getenv("PAUSE_E2E_PIDS"))
	o := pause.Options{Clock: gpu.RealClock{}, Period: time.Minute, MaxPause: 50 * time.Second}
	if os.Getenv("PAUSE_E2E_MID_PULSE") == "1" {
		// A pulse of midPulsePeriod, paused 90% of it, with its watchdog:
		// this test binary run as TestEndToEndWatchdogProcess.
		o.Period, o.MaxPause = midPulsePeriod, 0
		o.Watchdog = []string{os.Args[0], "-test.run=^TestEndToEndWatchdogProcess$"}
		if err := os.Setenv("PAUSE_E2E_WATCHDOG", "1"); err != nil {
			fail(err)
		}
	}
	p, err := pause.Detect(o, cgroupRoot)
	if err != nil {
		fail(err)
	}
	j, err := tuner.OpenJournal(os.Getenv("PAUSE_E2E_JOURNAL"))
	if err != nil {
		fail(err)
	}
	a := tuner.Action{Target: tuner.Target{GPU: "GPU-e2e", Knob: gpu.KnobPauseDuty, PID: pids[0]}, Tenant: "trainer",
		Class: gpu.ClassBatch, PIDs: pids, Current: tuner.Duty(0), Want: tuner.Duty(0.9), Reason: "e2e"}
	tu, err := tuner.New(tuner.Options{Policy: &first{a: a}, Guards: []tuner.Guard{tuner.Bounds{}}, Enabled: []gpu.Knob{gpu.KnobPauseDuty}, Actuators: tuner.ActuatorsOf(p),
		Journal: j, Clock: gpu.RealClock{}, Mode: tuner.ModeEnforce})
	if err != nil {
		fail(err)
	}
	ds, err := tu.RunOnce(context.Background(), snap(pids...))
	if err != nil || len(ds) != 1 || !ds[0].Applied {
		fail(fmt.Errorf("pause not applied: %v %+v", err, ds))
	}
	if follow := os.Getenv("PAUSE_E2E_FOLLOW"); follow != "" {
		// the tenant's processes are others now: the pause follows them
		ds, err := tu.RunOnce(context.Background(), snap(parse(follow)...))
		if err != nil || len(ds) != 1 || !ds[0].Applied {
			fail(fmt.Errorf("pause did not follow: %v %+v", err, ds))
		}
	}
	if err := os.WriteFile(os.Getenv("PAUSE_E2E_READY"), []byte("ok"), 0o600); err != nil {
		fail(err)
	}
	select {}
}

// once is a Decider that pauses the tenant.
type once []tuner.Action

func (once) Name() string                         { return "once" }
func (o once) Decide(*tuner.State) []tuner.Action { return o }

// first is a Decider that pauses the tenant at its first round only.
type first struct {
	a    tuner.Action
	done bool
}

func (*first) Name() string { return "first" }
func (f *first) Decide(*tuner.State) []tuner.Action {
	if f.done {
		return nil
	}
	f.done = true
	return []tuner.Action{f.a}
}

// snap is a snapshot of the trainer on GPU-e2e with the processes pids.
func snap(pids ...uint32) *tenant.Snapshot {
	now := time.Now()
	s := &tenant.Snapshot{Time: now, Readings: &gpu.Readings{Time: now, Backend: "e2e", Devices: []gpu.Device{{UUID: "GPU-e2e", Up: true}}},
		Tenants: []tenant.Info{{Name: "trainer", Class: gpu.ClassBatch}}}
	if len(pids) > 0 {
		s.Usage = []tenant.Usage{{Tenant: "trainer", Class: gpu.ClassBatch, UUID: "GPU-e2e", PIDs: pids}}
	}
	return s
}

// The pulse loop's owner killed with kill -9 while a tenant is paused
// leaves it paused; the next start thaws it from the journal, in any mode,
// the tuner off too.
func TestEndToEndCrashThaw(t *testing.T) {
	if os.Getenv("PAUSE_E2E_HELPER") == "1" {
		crashHelper()
		return
	}
	for _, k := range kinds {
		for _, mode := range []tuner.Mode{tuner.ModeRecommend, tuner.ModeOff} {
			t.Run(k.name+", "+string(mode), func(t *testing.T) {
				needRoot(t, k.dir())
				tr := startTree(t, k.dir())
				dir := t.TempDir()
				journal, ready := filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "ready")
				cmd := startHelper(t, tr, journal, ready)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				if !tr.still() {
					t.Fatal("the tree runs after the helper's kill -9: nothing to thaw")
				}
				open := nextStart(t, journal, mode)
				if !tr.running() {
					t.Fatal("the tree is still paused after the restart")
				}
				if open != 0 {
					t.Errorf("%d open originals after the thaw", open)
				}
			})
		}
	}
}

// A tenant's process killed while its cgroup v2 is frozen (SIGKILL goes
// through), with the pulse loop's owner killed too, leaves the cgroup's
// other process frozen; the next start thaws that cgroup, journaled with
// the pause, though no PID journaled names it any more.
func TestEndToEndCrashThawKilledProcess(t *testing.T) {
	for _, mode := range []tuner.Mode{tuner.ModeRecommend, tuner.ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			needRoot(t, v2Root())
			tr := startTree(t, v2Root())
			dir := t.TempDir()
			journal, ready := filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "ready")
			parent := tr.pids[0] // the tenant's process, the only one journaled
			cmd := startHelper(t, tr, journal, ready, "PAUSE_E2E_PIDS="+pidList(tr.pids[:1]))
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if err := syscall.Kill(int(parent), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_, _ = tr.cmd.Process.Wait()
			child := func() int64 {
				fi, _ := os.Stat(tr.files[1])
				if fi == nil {
					return 0
				}
				return fi.Size()
			}
			before := child()
			time.Sleep(300 * time.Millisecond)
			if child() != before {
				t.Fatal("the cgroup's other process runs after the kill -9s: nothing to thaw")
			}
			open := nextStart(t, journal, mode)
			before = child()
			time.Sleep(300 * time.Millisecond)
			if child() == before {
				t.Error("the cgroup's other process is still frozen after the restart")
			}
			if open != 0 {
				t.Errorf("%d open originals after the thaw", open)
			}
		})
	}
}

// A tenant paused by the tuner whose processes change (a client
// restarted in a new unit or process group) is paused by the new ones;
// the pulse's owner killed with kill -9 then leaves the new ones paused,
// and the next start thaws them from the journal, which names them.
func TestEndToEndCrashThawFollowed(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			needRoot(t, k.dir())
			old, cur := startTree(t, k.dir()), startTree(t, k.dir())
			dir := t.TempDir()
			journal, ready := filepath.Join(dir, "journal"), filepath.Join(dir, "ready")
			cmd := startHelper(t, old, journal, ready, "PAUSE_E2E_FOLLOW="+pidList(cur.pids))
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if !old.running() {
				t.Fatal("the tree the tenant left is paused")
			}
			if !cur.still() {
				t.Fatal("the tenant's new tree runs after the helper's kill -9: the pause did not follow it")
			}
			nextStart(t, journal, tuner.ModeRecommend)
			if !cur.running() {
				t.Fatal("the new tree is still paused after the restart")
			}
		})
	}
}

// nextStart is the next start after a crash in mode: the journal holds
// the pause's original. In recommend (the thaw comes first anyway) one
// round of a tuner on the journal; with the tuner off, the start that
// builds no tuner (tuner.StartOff). It returns the originals left open.
func nextStart(t *testing.T, journal string, mode tuner.Mode) int {
	t.Helper()
	if origs, err := tuner.ReadJournalOriginals(journal); err != nil || len(origs) != 1 {
		t.Fatalf("%d open originals in the journal (%v), want the pause's", len(origs), err)
	}
	if mode == tuner.ModeOff {
		ctx, cancel := context.WithTimeout(context.Background(), tuner.DefaultRestoreTimeout)
		defer cancel()
		if _, err := tuner.StartOff(ctx, journal, gpu.RealClock{}, func() (tuner.Actuators, error) { return tuner.ActuatorsOf(detect(t, 0, 0)), nil }, nil); err != nil {
			t.Fatal(err)
		}
		origs, err := tuner.ReadJournalOriginals(journal)
		if err != nil {
			t.Fatal(err)
		}
		return len(origs)
	}
	j, err := tuner.OpenJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	tu, err := tuner.New(tuner.Options{Policy: once(nil), Actuators: tuner.ActuatorsOf(detect(t, 0, 0)), Journal: j,
		Clock: gpu.RealClock{}, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), snap()); err != nil {
		t.Fatal(err)
	}
	return len(j.Originals())
}

// pidList is pids as "1,2".
func pidList(pids []uint32) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// startHelper runs crashHelper on tr, with env added, and waits until it
// has paused the tree.
func startHelper(t *testing.T, tr *tree, journal, ready string, env ...string) *exec.Cmd {
	t.Helper()
	return startWrapped(t, tr, journal, ready, nil, env...)
}

// startWrapped is startHelper with the helper's command run by wrap (a
// program and its arguments before the helper's own) when wrap is not nil.
func startWrapped(t *testing.T, tr *tree, journal, ready string, wrap []string, env ...string) *exec.Cmd {
	t.Helper()
	argv := append(slices.Clone(wrap), os.Args[0], "-test.run=^TestEndToEndCrashThaw$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PAUSE_E2E_HELPER=1", "PAUSE_E2E_JOURNAL="+journal, "PAUSE_E2E_READY="+ready, "PAUSE_E2E_PIDS="+pidList(tr.pids))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for !exists(ready) {
		if time.Now().After(deadline) {
			t.Fatal("the helper never paused the tree")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}

// midPulsePeriod is the pulse period of the mid-pulse crash tests.
const midPulsePeriod = 2 * time.Second

// TestEndToEndWatchdogProcess is the pause watchdog when the crash
// helper's Pauser starts it (the exporter runs itself with
// pause.WatchdogArg instead).
func TestEndToEndWatchdogProcess(t *testing.T) {
	if os.Getenv("PAUSE_E2E_WATCHDOG") != "1" {
		t.Skip("the watchdog process of the mid-pulse crash tests")
	}
	os.Exit(pause.RunWatchdog(os.Stdin, os.Stderr))
}

// The pulse's owner killed with kill -9, or hung (SIGSTOP), while the
// tenant is paused, with nothing restarted: its watchdog thaws the tenant
// within one period.
func TestEndToEndCrashMidPulse(t *testing.T) {
	for _, k := range kinds {
		for _, how := range []struct {
			name string
			sig  syscall.Signal
		}{{"kill -9", syscall.SIGKILL}, {"hung", syscall.SIGSTOP}} {
			t.Run(k.name+"/"+how.name, func(t *testing.T) {
				needRoot(t, k.dir())
				tr := startTree(t, k.dir())
				dir := t.TempDir()
				cmd := startHelper(t, tr, filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "ready"), "PAUSE_E2E_MID_PULSE=1")
				if !tr.still() {
					t.Fatal("the tree runs: not paused")
				}
				before := tr.sizes()
				sent := time.Now()
				if err := cmd.Process.Signal(how.sig); err != nil {
					t.Fatal(err)
				}
				for {
					now := tr.sizes()
					if now[0] > before[0] && now[1] > before[1] {
						break
					}
					if time.Since(sent) > 3*midPulsePeriod {
						t.Fatalf("the tree still paused %v after the %s", time.Since(sent), how.name)
					}
					time.Sleep(5 * time.Millisecond)
				}
				took := time.Since(sent)
				t.Logf("%s mid-pulse: the tree runs again %v after (period %v)", how.name, took.Round(time.Millisecond), midPulsePeriod)
				if took > midPulsePeriod {
					t.Errorf("the tree ran again %v after the %s, more than one period (%v)", took, how.name, midPulsePeriod)
				}
			})
		}
	}
}

// The pulse's owner in a cgroup namespace of its own, as in a container
// with a private one: it reads the tree's cgroup v2 path relative to its
// own ("/../vgpu-pause-e2e-N.service"), finds it under the hierarchy,
// pauses the tree through the cgroup (not by signals), and its watchdog
// thaws the tree after its kill -9.
func TestEndToEndCgroupNamespace(t *testing.T) {
	root := v2Root()
	needRoot(t, root)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		needRoot(t, "/no unshare(1)")
	}
	tr := startTree(t, root)
	own := filepath.Join(root, fmt.Sprintf("vgpu-pause-e2e-owner-%d", os.Getpid()))
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 100 && os.Remove(own) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	dir := t.TempDir()
	// sh moves itself into its own cgroup, then becomes unshare, which
	// roots a new cgroup namespace there and runs the helper.
	wrap := []string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, own, unshare, "--cgroup"}
	cmd := startWrapped(t, tr, filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "ready"), wrap, "PAUSE_E2E_MID_PULSE=1")
	if b, _ := os.ReadFile(filepath.Join(tr.cgroup, "cgroup.freeze")); strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("the tree's cgroup.freeze is %q: not paused through its cgroup", b)
	}
	if !tr.still() {
		t.Fatal("the tree runs: not paused")
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !tr.running() {
		if time.Since(sent) > 3*midPulsePeriod {
			t.Fatalf("the tree still paused %v after the kill -9", time.Since(sent))
		}
	}
	t.Logf("paused through %s from a cgroup namespace; running again within %v of the kill -9", tr.cgroup, time.Since(sent).Round(time.Millisecond))
}
