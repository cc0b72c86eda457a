package pause

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"golang.org/x/sys/unix"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
)

// The supervisor keeps the watchdog alive where the exporter is its
// container's main process. A watchdog that is the exporter's child dies
// with it there: when the first process of a PID namespace exits (a
// container of its own, the chart's default), the kernel kills every other
// process of the namespace, and a container runtime kills the rest of a
// container whose main process exited (hostPID). The supervisor turns the
// roles round: the first process stays small and runs the watchdog loop
// (watch) itself, and the exporter runs as its child (the same binary,
// the same arguments), writing its lines to a pipe it inherits as fd
// SupervisedFD, named in its environment (SuperviseEnv). When the pipe
// ends (the exporter exited, however), the supervisor thaws what is still
// frozen, waits for it and exits with its exit status. It forwards the
// termination signals to the exporter, and reaps the orphans that reach
// it (the first process of a namespace, or a subreaper).

// SuperviseEnv, in an exporter's environment, says that its supervisor
// started it and gave it the watchdog pipe's write end as fd SupervisedFD.
const SuperviseEnv = "VGPU_EXPORTER_PAUSE_SUPERVISED"

// SupervisedFD is the fd of the watchdog pipe in a supervised exporter
// (the first of exec.Cmd's ExtraFiles).
const SupervisedFD = 3

// inherited is the supervisor's pipe this process took (TakeSupervised).
var inherited = sync.OnceValues(func() (io.Writer, error) {
	v, ok := os.LookupEnv(SuperviseEnv)
	if !ok {
		return nil, nil
	}
	// (not passed on: a program this process starts is no supervised
	// exporter)
	os.Unsetenv(SuperviseEnv)
	if v != strconv.Itoa(SupervisedFD) {
		return nil, fmt.Errorf("%s=%q: the supervisor gives fd %d", SuperviseEnv, v, SupervisedFD)
	}
	var st unix.Stat_t
	if err := unix.Fstat(SupervisedFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, fmt.Errorf("%s: fd %d is not the supervisor's pipe (%v)", SuperviseEnv, SupervisedFD, err)
	}
	// A program this process starts (a hook, a control program) must not
	// inherit it: the supervisor would wait for its end, the pipe's, to
	// thaw what is frozen.
	syscall.CloseOnExec(SupervisedFD)
	return os.NewFile(SupervisedFD, "pause-supervisor"), nil
})

// TakeSupervised returns the write end of the watchdog pipe this process
// was started with by its supervisor (Supervise), nil where it was not;
// an error where SuperviseEnv names no such pipe. The first call takes
// it (call it before the process starts any program); every call returns
// the same.
func TakeSupervised() (io.Writer, error) { return inherited() }

// Supervised says whether this process was started by a supervisor.
func Supervised() bool {
	w, _ := inherited()
	return w != nil
}

// supervisorPipe is the watchdog of a supervised exporter: the first
// start is the supervisor's pipe w, which outlives every Pauser of the
// process and is never closed (its end is the process's); a start after
// it was found gone (the supervisor gone) is next's, where there is one.
func supervisorPipe(w io.Writer, next func() (io.WriteCloser, func() error, error)) func() (io.WriteCloser, func() error, error) {
	used := false
	return func() (io.WriteCloser, func() error, error) {
		if !used {
			used = true
			return nopCloser{w}, func() error { return nil }, nil
		}
		if next == nil {
			return nil, nil, errors.New("pause watchdog: the supervisor's pipe is gone")
		}
		return next()
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Supervise runs exe with args as the supervised exporter and the
// watchdog on its pipe until it exits; it returns the exporter's exit
// status (128+n for a death by signal n), or 1 where the exporter cannot
// be started. It logs to logger (the exporter's, built from its flags):
// errors, the orphans it reaps (debug) and one line at the exporter's end.
func Supervise(exe string, args []string, logger log.Logger) int {
	logger = log.With(logger, "component", "pause-supervisor")
	if os.Getpid() != 1 {
		// the exporter's orphans come here, not to the host's init
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			level.Error(logger).Log("msg", "cannot become the subreaper of the exporter's orphans", "err", err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		level.Error(logger).Log("msg", "cannot make the watchdog pipe", "err", err)
		return 1
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), SuperviseEnv+"="+strconv.Itoa(SupervisedFD))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w} // (fd 3: SupervisedFD)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if reap.Supported {
		defer reap.Background(func(r reap.Reaped) {
			level.Debug(logger).Log("msg", "reaped an orphaned process", "pid", r.PID, "status", r.Status)
		})()
	}
	return supervise(cmd, r, w, sigs, gpu.RealClock{}, syscall.Kill, logger)
}

// forwarded are the signals the supervisor passes to the exporter: the
// termination signals, and SIGQUIT, which a Go program answers with its
// goroutines' stacks (an operator's way into a hung exporter: `kill -QUIT
// 1` in its container); caught by the supervisor's own runtime, it would
// end the supervisor instead, and with it (as PID 1) the exporter, which
// would neither say its stacks nor restore anything, and nothing be
// thawed.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// pipeGrace is how long the supervisor waits, once the exporter exited,
// for the end of the watchdog pipe: a process that still holds its write
// end (a program the exporter was starting, whose exec hangs before the
// pipe's close on exec takes) would otherwise hold the supervisor, and
// the tenants frozen, as long as it lives. When it is over the supervisor
// thaws what is still frozen and exits.
const pipeGrace = time.Second

// supervise starts cmd, whose watchdog pipe is r (read here) and w (its
// write end, cmd's), passes it the signals of sigs and runs the watchdog
// on r until the pipe ends, or until pipeGrace after cmd exited; then it
// returns cmd's exit status.
func supervise(cmd *exec.Cmd, r io.ReadCloser, w io.Closer, sigs <-chan os.Signal, clock gpu.Clock, kill func(int, syscall.Signal) error, logger log.Logger) int {
	waited, err := reap.Start(cmd)
	w.Close() // (the exporter's alone now: its exit ends the pipe)
	if err != nil {
		r.Close()
		level.Error(logger).Log("msg", "cannot start the exporter", "path", cmd.Path, "err", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		waited()
		exited <- err
	}()
	type result struct {
		thawed []string
		err    error
	}
	watched := make(chan result, 1)
	go func() {
		defer r.Close()
		thawed, err := watch(r, clock, kill)
		watched <- result{thawed, err}
	}()
	status := -1
	var grace <-chan time.Time
	var end result
	held := false // (the pipe outlived the exporter by pipeGrace)
	for status < 0 || watched != nil {
		select {
		case s := <-sigs:
			if status < 0 {
				_ = cmd.Process.Signal(s) // (one that exited already: its status comes)
			}
		case end = <-watched:
			watched = nil
		case err := <-exited:
			status = exitStatus(cmd, err)
			exited = nil
			grace = clock.After(pipeGrace)
		case <-grace:
			// Its close ends the watch as the pipe's end would (a read
			// under way returns): what is frozen is thawed.
			held = true
			r.Close()
			grace = nil
		}
	}
	kv := []any{"msg", "the exporter exited", "status", status, "thawed", strings.Join(end.thawed, ",")}
	if held {
		kv = append(kv, "pipe_held", fmt.Sprintf("another process held the watchdog pipe %v after the exporter's exit; not waited for", pipeGrace))
	}
	if end.err != nil {
		level.Error(logger).Log(append(kv, "thaws_took", false, "err", end.err)...)
	} else {
		level.Info(logger).Log(append(kv, "thaws_took", true)...)
	}
	return status
}

// exitStatus is the exit status of cmd, which Wait returned err: a death
// by signal n is 128+n, as a shell gives it.
func exitStatus(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1 // (not waited for: err says why)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
