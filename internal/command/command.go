// Package command runs the outside programs the actuators drive (the MPS
// control daemon's client, nvidia-smi, hook commands): always by path and
// argument vector, never through a shell, with a timeout that kills the
// program's whole process group, bounded output, and an error that says
// which command failed, its exit status and what it printed on stderr.
//
// A program may leave something running when it exits (a hook starting a
// successor): that is its own, and its exit status alone counts, even when
// what it left holds its output open. A run killed by its timeout or its
// context takes everything it started with it: its process group and, on
// Linux, every process that left the group (setsid, a double fork) but
// still carries the run's mark (VGPU_COMMAND_RUN) in its environment.
//
// It imports only the leaves internal/clip and internal/reap (which registers
// each program it waits for, so that the exporter as PID 1 reaps only
// orphans), so that every layer may use it.
package command

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
)

// OutputGrace is how long Run waits, once the program has exited (or been
// killed), for its stdout and stderr to close: what it left running may
// hold them open. Then the output read so far is the result, and the pipes
// are closed (a leftover writing to them later gets EPIPE).
const OutputGrace = 250 * time.Millisecond

// DefaultMaxOutput bounds what is kept of a command's stdout and of its
// stderr when Spec.MaxOutput is 0.
const DefaultMaxOutput = 1 << 20

// Spec is one run of a program.
type Spec struct {
	Path    string        // the program: a file path, or a name looked up on PATH
	Args    []string      // arguments after the program name
	Env     []string      // KEY=VALUE pairs added to the exporter's environment (Environ)
	Stdin   []byte        // written to the program's stdin (none: empty stdin)
	Timeout time.Duration // 0: only the context bounds the run
	// TimeoutName is what sets Timeout (a command-line flag such as
	// --nvidia-smi.timeout), named in the error of a run it kills; "" names
	// none.
	TimeoutName string
	// MaxOutput bounds the bytes kept of stdout and of stderr each; the rest
	// is read and dropped. 0 means DefaultMaxOutput.
	MaxOutput int
	// outputGrace replaces OutputGrace where not 0 (tests that time an
	// exit within the grace widen it, to hold on a loaded host).
	outputGrace time.Duration
}

// Result is what a finished run printed.
type Result struct {
	Stdout []byte
	Stderr []byte
}

// Error is a run that did not exit with status 0.
type Error struct {
	Command  string // the program and its arguments, quoted where needed
	ExitCode int    // -1 when the program did not exit by itself
	TimedOut bool   // killed by the timeout (or the context's end)
	// Timeout and TimeoutName are the Spec's, where the run was killed by
	// its own timeout (not by its context's end): the error names them.
	Timeout     time.Duration
	TimeoutName string
	Stderr      string // trimmed and shortened stderr (stdout when stderr is empty)
	Err         error  // the underlying error
}

// TimeoutText names a timeout of d and what sets it (a flag; "" for
// none): "its timeout of 5s (--mps.timeout)".
func TimeoutText(d time.Duration, name string) string {
	if name == "" {
		return fmt.Sprintf("its timeout of %s", d)
	}
	return fmt.Sprintf("its timeout of %s (%s)", d, name)
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", e.Command)
	switch {
	case e.TimedOut && e.Timeout > 0:
		b.WriteString("killed after " + TimeoutText(e.Timeout, e.TimeoutName))
	case e.TimedOut:
		fmt.Fprintf(&b, "killed when its caller gave up: %v", e.Err)
	case e.ExitCode >= 0:
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	default:
		b.WriteString(e.Err.Error())
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, ": %s", e.Stderr)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Run runs the program s names and waits for it. A non-zero exit, a
// program that cannot be started and a run past the timeout return an
// *Error (with the output read so far in the Result).
func Run(ctx context.Context, s Spec) (Result, error) {
	parent := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	limit := s.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	cmd := exec.CommandContext(ctx, s.Path, s.Args...)
	cmd.Env = append(append(Environ(), s.Env...), newMark())
	cmd.Stdin = bytes.NewReader(s.Stdin)
	stdout, stderr := &capped{max: limit}, &capped{max: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The program runs in a process group of its own, so that the timeout
	// kills what it started too, with what left the group (killMarked).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	mark := cmd.Env[len(cmd.Env)-1]
	// killed says whether the run was killed (its timeout or its context
	// ended while the program ran): one that exited by itself is judged by
	// its exit status even where the timeout passes while what it left
	// holds its output open.
	var killed atomic.Bool
	cmd.Cancel = func() error {
		killed.Store(true)
		since := runStart(cmd.Process)
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		killMarked(mark, since)
		return err
	}
	cmd.WaitDelay = cmp.Or(s.outputGrace, OutputGrace)
	err := reap.Run(cmd)
	// What the program left running may hold its output open: once the
	// grace is over, the program's own exit status counts.
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() && !killed.Load() {
		err = nil
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err == nil {
		return res, nil
	}
	e := &Error{Command: Describe(s.Path, s.Args), ExitCode: -1, Err: err}
	if cmd.Process == nil && errors.Is(err, syscall.EACCES) {
		e.Err = fmt.Errorf("%w%s", err, notRunnable(cmd.Path))
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		e.ExitCode = exitErr.ExitCode()
	}
	// killed, or never started as the context had ended
	if ctx.Err() != nil && (killed.Load() || cmd.ProcessState == nil) {
		e.TimedOut, e.ExitCode = true, -1
		e.Err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		if parent.Err() == nil {
			e.Timeout, e.TimeoutName = s.Timeout, s.TimeoutName
		}
	}
	msg := res.Stderr
	if len(bytes.TrimSpace(msg)) == 0 {
		msg = res.Stdout
	}
	e.Stderr = Excerpt(msg, 512)
	return res, e
}

// notRunnable says why a program that could not be started for want of
// permission cannot be: a directory, or a file without execute
// permission ("" where neither, such as a directory on its path that
// cannot be searched).
func notRunnable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return ""
	case fi.IsDir():
		return ": it is a directory"
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf(": it is not executable (mode %04o)", fi.Mode().Perm())
	}
	return ""
}

// Describe renders a command line for messages: each argument quoted when
// it is empty or holds anything but plain characters.
func Describe(path string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	for _, a := range append([]string{path}, args...) {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' ||
				r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// Excerpt returns out trimmed, with its lines joined by "; ", invalid or
// control characters escaped, and cut after n bytes saying how much was
// left out (clip.Text): fit for one log line or error message. Only what
// it shows of the joined lines is built (clip.Head); the rest is counted.
func Excerpt(out []byte, n int) string {
	keep := max(n, 0) + utf8.UTFMax
	var head []byte
	total := 0 // the length of all the lines joined
	for l := range bytes.SplitSeq(out, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) == 0 {
			continue
		}
		sep := "; "
		if total == 0 {
			sep = ""
		}
		total += len(sep) + len(l)
		if len(head) < keep {
			head = append(append(head, sep...), l[:min(len(l), keep)]...)
		}
	}
	return clip.Head(head, total, n)
}

// OutputKV is what a run that succeeded printed, as log key-values: its
// stdout's excerpt of n bytes ("output") and, where it printed any, its
// stderr's ("stderr": exit 0 is success; what a program says there, a
// warning or a failure it did not exit for, is the operator's to read).
func OutputKV(res Result, n int) []any {
	kv := []any{"output", Excerpt(res.Stdout, n)}
	if said := Excerpt(res.Stderr, n); said != "" {
		kv = append(kv, "stderr", said)
	}
	return kv
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte { return c.buf.Bytes() }

// Environ is the exporter's environment less NOTIFY_SOCKET, systemd's
// channel to the exporter alone (a hook that ran systemd-notify would
// speak for it): what a program it runs inherits (Run, and the pause's
// watchdog).
func Environ() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "NOTIFY_SOCKET=") })
}
