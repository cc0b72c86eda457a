package pause

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// startSupervised runs script under sh as the supervised exporter
// (supervise), its watchdog pipe on fd 3 and its stdout read by lines;
// the exit status comes on the channel returned.
func startSupervised(t *testing.T, script string, sigs <-chan os.Signal, args ...string) (<-chan int, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	r, w, err := os.Pipe()
	must(t, err)
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	status := make(chan int, 1)
	go func() { status <- supervise(cmd, r, w, sigs, gpu.RealClock{}, syscall.Kill, &stderr) }()
	return status, bufio.NewScanner(out), &stderr
}

// The supervisor passes SIGTERM, SIGINT and SIGHUP to the exporter, and
// exits with the status the exporter's exit on each gives.
func TestSuperviseForwardsSignals(t *testing.T) {
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
	if got := supervise(exec.Command(missing), r, w, nil, gpu.RealClock{}, syscall.Kill, &stderr); got != 1 {
		t.Errorf("exit status %d, want 1", got)
	}
	if !strings.Contains(stderr.String(), "cannot start the exporter "+missing) {
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
