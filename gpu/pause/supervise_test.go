package pause

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// startSupervised runs script under sh as the supervised exporter
// (supervise), its watchdog pipe on fd 3 and its stdout read by lines;
// the exit status comes on the channel returned. Its stdout is a pipe of
// the test's, open until the test's end: one of cmd's (StdoutPipe) would
// be closed by supervise's Wait as the exporter exits, what it wrote
// there and the test did not read yet lost.
func startSupervised(t *testing.T, script string, sigs <-chan os.Signal, args ...string) (<-chan int, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	r, w, err := os.Pipe()
	must(t, err)
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	out, stdout, err := os.Pipe()
	must(t, err)
	t.Cleanup(func() { out.Close(); stdout.Close() })
	cmd.Stdout = stdout
	var stderr strings.Builder
	status := make(chan int, 1)
	go func() {
		status <- supervise(cmd, r, w, sigs, gpu.RealClock{}, syscall.Kill, log.NewLogfmtLogger(&stderr))
	}()
	return status, bufio.NewScanner(out), &stderr
}

// supervisorScriptEnv makes the test binary a supervisor (Supervise, as
// main runs it, logging logfmt to stderr) of /bin/sh running the script
// in the variable, its $1 the variable supervisorDirEnv.
const supervisorScriptEnv, supervisorDirEnv = "VGPU_TEST_SUPERVISOR_SCRIPT", "VGPU_TEST_SUPERVISOR_DIR"

func init() {
	if s, ok := os.LookupEnv(supervisorScriptEnv); ok {
		os.Exit(Supervise("/bin/sh", []string{"-c", s, "sh", os.Getenv(supervisorDirEnv)}, log.NewLogfmtLogger(os.Stderr)))
	}
}

// startSupervisor runs the test binary as a supervisor (Supervise) of
// script, its $1 dir, in a process group of its own, killed at the test's
// end (with what an old supervisor left running); the supervisor's stderr
// is the file returned.
func startSupervisor(t *testing.T, script, dir string) (*exec.Cmd, *bufio.Scanner, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), supervisorScriptEnv+"="+script, supervisorDirEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(stderr)
	must(t, err)
	defer f.Close()
	cmd.Stderr = f // (a file: a pipe would hold Wait while a leftover holds it)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd, bufio.NewScanner(out), stderr
}

// SIGQUIT to the supervisor (`kill -QUIT 1` in the container: how a Go
// program is asked for its goroutines' stacks) reaches the exporter; the
// supervisor exits with the exporter's status once it thawed what the
// exporter left frozen. Before, the supervisor's runtime took it: it
// exited 2 with its own stacks, the exporter never got it, and nothing
// was thawed.
func TestSupervisorForwardsSIGQUIT(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("frozen 1\n"), 0o644))
	cmd, out, stderr := startSupervisor(t, `trap 'echo exporter got QUIT >&2; exit 13' QUIT
echo "freeze v2 $1 1h" >&3 && echo 1 > "$1/cgroup.freeze" && echo ready
while :; do sleep 0.01; done`, dir)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("the exporter did not start: %q %v", out.Text(), out.Err())
	}
	must(t, cmd.Process.Signal(syscall.SIGQUIT))
	_ = cmd.Wait()
	logged := read(t, stderr)
	if got := cmd.ProcessState.ExitCode(); got != 13 {
		t.Errorf("the supervisor exited %d, want the exporter's 13\n%s", got, logged)
	}
	if !strings.Contains(logged, "exporter got QUIT") {
		t.Errorf("the exporter did not get SIGQUIT:\n%s", logged)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze %s after SIGQUIT, want 0 (thawed)", got)
	}
	if want := `component=pause-supervisor msg="the exporter exited" status=13 thawed=` + dir; !strings.Contains(logged, want) {
		t.Errorf("the supervisor's log does not say %q:\n%s", want, logged)
	}
}

// The supervisor reaps the orphans that reach it and logs each at debug,
// as the exporter does as PID 1.
func TestSupervisorLogsReapedOrphans(t *testing.T) {
	dir := t.TempDir()
	// the exporter leaves an orphan (its parent, a subshell, exited),
	// lets it exit 3, and exits itself once it is gone (reaped)
	cmd, _, stderr := startSupervisor(t, `mkfifo "$1/go"
(sh -c 'read x < "$0"; exit 3' "$1/go" & echo $! > "$1/orphan")
p=$(cat "$1/orphan"); echo > "$1/go"
while kill -0 "$p" 2>/dev/null; do sleep 0.01; done`, dir)
	_ = cmd.Wait()
	orphan := read(t, filepath.Join(dir, "orphan"))
	logged := read(t, stderr)
	if want := `level=debug component=pause-supervisor msg="reaped an orphaned process" pid=` + orphan + " status="; !strings.Contains(logged, want) {
		t.Errorf("the supervisor's log does not say %q:\n%s", want, logged)
	}
}

// The supervisor logs in the exporter's format (its logger): at the
// exporter's end one line with its status, the groups left to thaw and
// whether the thaws took, at error level where one did not (a tenant left
// frozen). Before, it wrote bare lines, and none at the exporter's end.
func TestSupervisorLogsTheExportersEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		thawFails bool
		level     string
		took      bool
	}{
		{"thawed", false, "info", true},
		{"a thaw failed", true, "error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.thawFails {
				must(t, os.Mkdir(filepath.Join(dir, "cgroup.freeze"), 0o755)) // (not written)
			} else {
				must(t, os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("1"), 0o644))
			}
			r, w, err := os.Pipe()
			must(t, err)
			cmd := exec.Command("/bin/sh", "-c", `echo "freeze v2 $1 1h" >&3; exit 3`, "sh", dir)
			cmd.ExtraFiles = []*os.File{w}
			var logged strings.Builder
			if got := supervise(cmd, r, w, nil, gpu.RealClock{}, syscall.Kill, log.NewJSONLogger(&logged)); got != 3 {
				t.Errorf("exit status %d, want 3", got)
			}
			var line map[string]any
			if err := json.Unmarshal([]byte(logged.String()), &line); err != nil {
				t.Fatalf("the supervisor's log is not one JSON line: %v\n%s", err, logged.String())
			}
			for k, want := range map[string]any{"level": tc.level, "msg": "the exporter exited", "status": 3.0, "thawed": dir, "thaws_took": tc.took} {
				if line[k] != want {
					t.Errorf("%s=%v, want %v (%s)", k, line[k], want, logged.String())
				}
			}
			if _, ok := line["err"]; ok != tc.thawFails {
				t.Errorf("err in the line %v, want %v (%s)", ok, tc.thawFails, logged.String())
			}
		})
	}
}

// Once the exporter exited, the supervisor waits at most pipeGrace for
// its watchdog pipe to end: a process the exporter left holding it (a
// program whose exec hangs) does not hold the supervisor, nor the
// tenants frozen. Before, the supervisor waited for it as long as it
// lived.
func TestSupervisorExitsThoughThePipeIsHeld(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("frozen 1\n"), 0o644))
	status, out, logged := startSupervised(t, `sleep 1000 & echo $!
echo "freeze v2 $1 1h" >&3 && echo 1 > "$1/cgroup.freeze" && exit 5`, nil, dir)
	got := <-status
	// (read once the exporter exited: its stdout outlives it)
	if !out.Scan() {
		t.Fatalf("no PID of the process holding the pipe: %v", out.Err())
	}
	holder, err := strconv.Atoi(out.Text())
	must(t, err)
	t.Cleanup(func() { _ = syscall.Kill(holder, syscall.SIGKILL) })
	if got != 5 {
		t.Errorf("exit status %d, want the exporter's 5 (log %q)", got, logged)
	}
	if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze %s after the exporter's end, want 0 (thawed)", got)
	}
	if err := syscall.Kill(holder, 0); err != nil {
		t.Errorf("the process holding the pipe is gone (%v): the test tests nothing", err)
	}
	if !strings.Contains(logged.String(), "pipe_held=") {
		t.Errorf("the supervisor's log does not say the pipe was held: %q", logged)
	}
}

// The supervisor passes SIGTERM, SIGINT and SIGHUP to the exporter, and
// exits with the status the exporter's exit on each gives.
func TestSuperviseForwardsSignals(t *testing.T) {
	// A signal ignored where the test runs (SIGHUP under nohup) stays
	// ignored in the exporter it starts, whose shell then cannot trap
	// it: handled here, it is reset to the default at the exec.
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if signal.Ignored(sig) {
			c := make(chan os.Signal, 1)
			signal.Notify(c, sig)
			defer signal.Stop(c)
		}
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{
		{syscall.SIGTERM, 10}, {syscall.SIGINT, 11}, {syscall.SIGHUP, 12},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			sigs := make(chan os.Signal, 1)
			status, out, stderr := startSupervised(t, `exec 3>&-; trap 'exit 10' TERM; trap 'exit 11' INT; trap 'exit 12' HUP
echo ready; while :; do sleep 0.01; done`, sigs)
			if !out.Scan() || out.Text() != "ready" {
				t.Fatalf("the exporter did not start: %q %v", out.Text(), out.Err())
			}
			sigs <- tc.sig
			if got := <-status; got != tc.want {
				t.Errorf("exit status %d, want %d (stderr %q)", got, tc.want, stderr)
			}
		})
	}
}

// The supervisor exits with the exporter's exit status, 128+n where
// signal n ended it; what the exporter froze through the pipe and left
// frozen, however it ended, is thawed first.
func TestSuperviseExitStatusAndThaw(t *testing.T) {
	for _, tc := range []struct {
		name, end string
		want      int
	}{
		{"exit 0", "exit 0", 0},
		{"exit 3", "exit 3", 3},
		{"kill -9", "kill -9 $$", 137},
		{"SIGTERM not caught", "kill -TERM $$", 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("frozen 1\n"), 0o644))
			status, _, stderr := startSupervised(t, `echo "freeze v2 $1 1h" >&3 && echo 1 > "$1/cgroup.freeze" && `+tc.end, nil, dir)
			if got := <-status; got != tc.want {
				t.Errorf("exit status %d, want %d (stderr %q)", got, tc.want, stderr)
			}
			if got := read(t, filepath.Join(dir, "cgroup.freeze")); got != "0" {
				t.Errorf("cgroup.freeze %s after the exporter's end, want 0 (thawed)", got)
			}
		})
	}
}

// A supervisor that cannot start the exporter exits 1 naming why.
func TestSuperviseCannotStart(t *testing.T) {
	r, w, err := os.Pipe()
	must(t, err)
	missing := filepath.Join(t.TempDir(), "vgpu_exporter")
	var stderr strings.Builder
	if got := supervise(exec.Command(missing), r, w, nil, gpu.RealClock{}, syscall.Kill, log.NewLogfmtLogger(&stderr)); got != 1 {
		t.Errorf("exit status %d, want 1", got)
	}
	if !strings.Contains(stderr.String(), `level=error msg="cannot start the exporter" path=`+missing) {
		t.Errorf("stderr %q does not say the exporter could not start", stderr.String())
	}
}

// A supervised exporter's pauser tells the supervisor's pipe of its
// leases and starts no watchdog of its own; its close leaves the pipe
// open (its end is the process's exit, and another pauser of the process
// writes to it too).
func TestPauseSupervisorPipe(t *testing.T) {
	h := newHost(t)
	h.process(100, "/system.slice/batch.service", "", 100)
	dir := h.cgroupV2Dir("/system.slice/batch.service")
	r, w, err := os.Pipe()
	must(t, err)
	defer r.Close()
	defer w.Close()
	lines := bufio.NewScanner(r)
	started := 0
	p := h.pauser(t, gpu.RealClock{}, Options{Period: time.Hour, Supervisor: w, startWatchdog: func() (io.WriteCloser, func() error, error) {
		started++
		return nil, nil, errors.New("no watchdog here")
	}})
	ctx := context.Background()
	must(t, p.SetPauseDuty(ctx, "GPU-0", "batch", []uint32{100}, 0.5))
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "freeze v2 "+dir+" ") {
		t.Fatalf("first line on the supervisor's pipe %q, want the freeze of %s", lines.Text(), dir)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-0", "batch", []uint32{100}, 0))
	if !lines.Scan() || lines.Text() != "thawed v2 "+dir {
		t.Fatalf("next line %q, want the thaw of %s", lines.Text(), dir)
	}
	must(t, p.Close())
	if started != 0 {
		t.Errorf("%d watchdogs started, want none: the supervisor is the watchdog", started)
	}
	if _, err := w.Write([]byte("after\n")); err != nil {
		t.Fatalf("the supervisor's pipe closed by the pauser's close: %v", err)
	}
	if !lines.Scan() || lines.Text() != "after" {
		t.Errorf("line %q after the close, want none of the pauser's", lines.Text())
	}
}
