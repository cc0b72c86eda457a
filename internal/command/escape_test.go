package command

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// A program that leaves descendants behind (in its process group, or
// escaped from it with setsid) has its own exit status counted, even when
// they hold its output open; it may leave them running when it exits, and
// a timeout kills them all.
// leftoverTimeout is long enough for a loaded machine's shell to record
// its descendant's PID before the timeout kills it (at 300 ms the record
// was sometimes not written: "no descendant PID recorded").
const leftoverTimeout = 2 * time.Second

func TestRunLeftovers(t *testing.T) {
	f := commandtest.New(t)
	for _, tc := range []struct {
		name, body string
		timeout    time.Duration
		stdout     string
		timedOut   bool // and the descendant is killed; else it is left running
	}{
		{"child holds stdout, exit 0", `sleep 30 & echo $! > "$D/pids"; echo 4242`, 0, "4242\n", false},
		{"setsid child holds stdout, exit 0", `setsid sleep 30 & echo $! > "$D/pids"; echo 4242`, 0, "4242\n", false},
		{"setsid child with closed output, exit 0", `setsid sleep 30 >/dev/null 2>&1 & echo $! > "$D/pids"; echo ok`, 0, "ok\n", false},
		{"setsid child, timeout", `setsid sleep 30 & echo $! > "$D/pids"; sleep 30`, leftoverTimeout, "", true},
		{"double fork, timeout", `( D="$D" setsid sh -c 'sleep 30 & echo $! > "$D/pids"; wait' & ); sleep 30`, leftoverTimeout, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(f.Dir, "pids"))
			start := time.Now()
			res, err := Run(context.Background(), Spec{Path: f.Script(t, "hook", tc.body), Timeout: tc.timeout})
			if took := time.Since(start); took > leftoverTimeout+20*time.Second {
				t.Errorf("took %v", took)
			}
			if tc.timedOut {
				if e, ok := err.(*Error); !ok || !e.TimedOut {
					t.Errorf("error %v, want a timeout", err)
				}
			} else if err != nil {
				t.Errorf("error %v: the program exited 0", err)
			}
			if string(res.Stdout) != tc.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tc.stdout)
			}
			var data []byte
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if data, _ = os.ReadFile(filepath.Join(f.Dir, "pids")); len(data) > 0 {
					break
				}
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("no descendant PID recorded: %q", data)
			}
			if !tc.timedOut {
				if !commandtest.Alive(pid) {
					t.Errorf("descendant %d of a program that exited 0 was killed", pid)
				}
				_ = killPID(pid)
				return
			}
			for deadline := time.Now().Add(2 * time.Second); commandtest.Alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if commandtest.Alive(pid) {
				t.Errorf("descendant %d still running after the timeout", pid)
				_ = killPID(pid)
			}
		})
	}
}

func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// A program that exits by itself shortly before its timeout, leaving a
// descendant that holds its stdout past the timeout (within the output
// grace), is judged by its own exit status: it was not killed, nor was
// what it left (before, the timeout passing during the grace made it
// "killed after its timeout", a restart hook that had started its
// successor a failure). The grace is widened to the timeout and the
// program exits half way, so that the timeout passes during the grace with
// 1 s to spare either side on a loaded host.
func TestExitJustBeforeTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		exit int
	}{{"exit 0", 0}, {"exit 3", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := commandtest.New(t)
			// the program exits 1 s before the timeout, by the clock; the
			// grace ends 1 s after the timeout
			exitAt := time.Now().Add(timeout / 2).UnixNano()
			body := `sleep 30 & echo $! > "$D/pids"
while [ "$(date +%s%N)" -lt ` + strconv.FormatInt(exitAt, 10) + ` ]; do sleep 0.01; done
echo ok; exit ` + strconv.Itoa(tc.exit)
			res, err := Run(context.Background(), Spec{Path: f.Script(t, "hook", body), Timeout: timeout, outputGrace: timeout})
			data, _ := os.ReadFile(filepath.Join(f.Dir, "pids"))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
			if perr != nil {
				t.Fatalf("no descendant PID recorded: %q", data)
			}
			defer killPID(pid)
			if string(res.Stdout) != "ok\n" {
				t.Errorf("stdout %q, want ok", res.Stdout)
			}
			e, _ := err.(*Error)
			switch {
			case tc.exit == 0 && err != nil:
				t.Errorf("error %v: the program exited 0 before its timeout", err)
			case tc.exit != 0 && (e == nil || e.TimedOut || e.ExitCode != tc.exit):
				t.Errorf("error %v, want exit status %d, not a timeout", err, tc.exit)
			}
			if !commandtest.Alive(pid) {
				t.Errorf("descendant %d of a program that exited before its timeout was killed", pid)
			}
		})
	}
}
