package command

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func TestRun(t *testing.T) {
	f := commandtest.New(t)
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify") // the exporter's, under systemd
	t.Setenv("VGPU_KEPT", "kept")
	tests := []struct {
		name, body string
		spec       Spec
		stdout     string
		err        string // substring of the error; "" for success
		timedOut   bool
		exit       int
	}{
		{name: "ok", body: `echo "out $1"; cat "$STDIN"`, spec: Spec{Args: []string{"a b"}, Stdin: []byte("in\n")}, stdout: "out a b\nin\n"},
		{name: "env", body: `echo "$VGPU_X"`, spec: Spec{Env: []string{"VGPU_X=y"}}, stdout: "y\n"},
		{name: "systemd's notify socket not inherited", body: `echo "${NOTIFY_SOCKET-unset} $VGPU_KEPT"`, stdout: "unset kept\n"},
		{name: "exit status and stderr", body: `echo partial; echo "it broke" >&2; exit 4`, stdout: "partial\n", err: `exit status 4: it broke`, exit: 4},
		{name: "stdout when stderr is empty", body: `echo "Insufficient Permissions"; exit 4`, stdout: "Insufficient Permissions\n", err: "exit status 4: Insufficient Permissions", exit: 4},
		{name: "hang killed with its children", body: `sleep 30; echo late`, spec: Spec{Timeout: 200 * time.Millisecond, TimeoutName: "--prog.timeout"}, err: "killed after its timeout of 200ms (--prog.timeout)", timedOut: true, exit: -1},
		{name: "hang killed, its timeout unnamed", body: `sleep 30`, spec: Spec{Timeout: 200 * time.Millisecond}, err: "killed after its timeout of 200ms", timedOut: true, exit: -1},
		{name: "SIGTERM ignored, killed all the same", body: `trap '' TERM; sleep 30 & wait; echo late`, spec: Spec{Timeout: 200 * time.Millisecond}, err: "killed after its timeout of 200ms", timedOut: true, exit: -1},
		{name: "64 MB printed, 1 MiB kept", body: `head -c 67108864 /dev/zero | tr '\0' x; exit 3`, stdout: strings.Repeat("x", DefaultMaxOutput), err: "exit status 3: " + strings.Repeat("x", 512) + "... (", exit: 3},
		{name: "output capped", body: `i=0; while [ $i -lt 100 ]; do echo 0123456789; i=$((i+1)); done`, spec: Spec{MaxOutput: 15}, stdout: "0123456789\n0123"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.Path = f.Script(t, "prog", tc.body)
			start := time.Now()
			res, err := Run(context.Background(), s)
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v: the timeout did not kill the process group", time.Since(start))
			}
			if string(res.Stdout) != tc.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tc.stdout)
			}
			if tc.err == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "prog") {
				t.Errorf("error %q lacks %q or the program", err, tc.err)
			}
			if e.TimedOut != tc.timedOut || e.ExitCode != tc.exit {
				t.Errorf("timed out %v exit %d, want %v %d", e.TimedOut, e.ExitCode, tc.timedOut, tc.exit)
			}
		})
	}
}

// A run its caller's context ends is not said to be killed by its own
// timeout, nor named by that timeout's setting.
func TestRunCallerDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f := commandtest.New(t)
	_, err := Run(ctx, Spec{Path: f.Script(t, "prog", "sleep 30"), Timeout: time.Minute, TimeoutName: "--prog.timeout"})
	var e *Error
	if !errors.As(err, &e) || !e.TimedOut || !strings.Contains(err.Error(), "killed when its caller gave up: context deadline exceeded") ||
		strings.Contains(err.Error(), "--prog.timeout") {
		t.Fatalf("error %v, want the caller's deadline, not the timeout", err)
	}
}

func TestRunMissingProgram(t *testing.T) {
	_, err := Run(context.Background(), Spec{Path: "/nonexistent/prog"})
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != -1 || e.TimedOut || !strings.Contains(err.Error(), "/nonexistent/prog") {
		t.Fatalf("error %v, want a start failure naming the program", err)
	}
}

func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := commandtest.New(t)
	_, err := Run(ctx, Spec{Path: f.Script(t, "prog", "exit 0")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestDescribe(t *testing.T) {
	got := Describe("nvidia-smi", []string{"compute-policy", "-i", "GPU-1", "--set-timeslice=2", "", "a b", "x;y"})
	want := `nvidia-smi compute-policy -i GPU-1 --set-timeslice=2 "" "a b" "x;y"`
	if got != want {
		t.Errorf("Describe = %s, want %s", got, want)
	}
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"  one\n\n two \n", 100, "one; two"},
		{"a\x00b\xff", 100, `a\x00b\xff`},
		{"0123456789", 4, "0123... (6 more bytes)"},
		{`say "no"`, 100, `say "no"`},
		{"ab\n\n" + strings.Repeat("\u00e9", 10) + "\n", 6, "ab; \u00e9... (18 more bytes)"},
	} {
		if got := Excerpt([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("Excerpt(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// An excerpt costs about what it shows, not what the program printed: a
// megabyte of output was split and joined whole for 512 bytes.
func TestExcerptOfLongOutput(t *testing.T) {
	out := []byte(strings.Repeat("\u00e9 x\n", 1<<20/5))
	want := clip.Text(strings.Repeat("\u00e9 x; ", 1<<20/5-1)+"\u00e9 x", 512)
	var got string
	n := testutil.Allocated(func() { got = Excerpt(out, 512) })
	if got != want {
		t.Errorf("Excerpt of %d bytes = %q, want %q", len(out), got, want)
	}
	if n > 64<<10 {
		t.Errorf("Excerpt of %d bytes to 512 allocated %d bytes", len(out), n)
	}
}

// A program that is a directory or a file without execute permission is
// an error saying which (before: "permission denied" alone).
func TestRunNotRunnable(t *testing.T) {
	f := commandtest.New(t)
	noexec := f.Script(t, "noexec", "echo hi")
	if err := os.Chmod(noexec, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{t.TempDir(), "permission denied: it is a directory"},
		{noexec, "permission denied: it is not executable (mode 0644)"},
	} {
		_, err := Run(context.Background(), Spec{Path: tc.path})
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q naming %s", err, tc.want, tc.path)
		}
	}
}
