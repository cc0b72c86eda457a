package pause

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// The watchdog bounds a pause when the pulse's owner dies or hangs. It is
// a child process (the exporter run again with WatchdogArg) that reads, on
// a pipe from its parent, one line before every freeze and one after every
// thaw:
//
//	freeze <kind> <path> <lease>   the group is about to be frozen; thaw it
//	                               when no new line about it comes within
//	                               lease (a Go duration)
//	thawed <kind> <path>           the parent thawed it
//
// kind is v2 or v1 (path a cgroup directory) or pgid (path a process
// group). When the pipe ends (the parent exited, however: kill -9 closes
// its end too) the watchdog thaws every group still frozen and exits; a
// lease that runs out (the parent hangs) thaws its group. So a crash
// mid-pulse leaves the tenant paused for milliseconds, a hung parent for
// at most the lease, which is shorter than one period. Where the exporter
// is its container's main process, a child dies with it: there the
// watchdog is that process, the supervisor, and the exporter its child
// (supervise.go). Only a kill of the watchdog itself together with its
// parent (a container's or a unit's whole cgroup killed) leaves the tenant
// to the journal's thaw at the next start. One that dies alone is started again at the next lease, at most
// once a period (watchdog.every).

// WatchdogArg is the hidden argument that runs the exporter as the
// watchdog (RunWatchdog).
const WatchdogArg = "pause-watchdog"

// RunWatchdog is the watchdog process's main: it reads the parent's lines
// from r until the pipe ends, logs to w, and returns the exit status. The
// termination signals a process group or a unit's stop delivers are
// ignored: the parent thaws at its exit, and the end of the pipe tells the
// watchdog when to go.
func RunWatchdog(r io.Reader, w io.Writer) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	_, err := watch(r, gpu.RealClock{}, syscall.Kill)
	if err != nil {
		fmt.Fprintf(w, "pause watchdog: %v\n", err)
		return 1
	}
	return 0
}

// watched is a group the watchdog may have to thaw, and when.
type watched struct {
	g     group
	until time.Time
}

// watch runs the watchdog on clock until r ends; it returns the groups
// still frozen at r's end, which it thawed then (their keys, sorted), and
// the errors of the thaws it made and of the lines it could not read.
func watch(r io.Reader, clock gpu.Clock, kill func(int, syscall.Signal) error) ([]string, error) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	frozen := map[string]watched{}
	var errs []error
	thaw := func(key string) {
		if err := frozen[key].g.Thaw(); err != nil && !kube.ProcessGone(err) {
			errs = append(errs, fmt.Errorf("thaw %s: %w", key, err))
		}
		delete(frozen, key)
	}
	for {
		var expiry <-chan time.Time
		if len(frozen) > 0 {
			first := time.Time{}
			for _, w := range frozen {
				if first.IsZero() || w.until.Before(first) {
					first = w.until
				}
			}
			expiry = clock.After(first.Sub(clock.Now()))
		}
		select {
		case line, ok := <-lines:
			if !ok {
				left := slices.Sorted(maps.Keys(frozen))
				for _, key := range left {
					thaw(key)
				}
				return left, errors.Join(errs...)
			}
			op, g, lease, err := parseLine(line, kill)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if op == "thawed" {
				delete(frozen, g.Key())
				continue
			}
			frozen[g.Key()] = watched{g: g, until: clock.Now().Add(lease)}
		case now := <-expiry:
			for key, w := range frozen {
				if !w.until.After(now) {
					thaw(key)
				}
			}
		}
	}
}

// parseLine reads one line of the parent (a cgroup's path may hold
// spaces; a lease is the last word of its line).
func parseLine(line string, kill func(int, syscall.Signal) error) (op string, g group, lease time.Duration, err error) {
	bad := fmt.Errorf("bad line %q", line)
	f := strings.SplitN(line, " ", 3)
	if len(f) != 3 {
		return "", nil, 0, bad
	}
	op, kind, path := f[0], f[1], f[2]
	switch op {
	case "freeze":
		i := strings.LastIndexByte(path, ' ')
		if i < 0 {
			return "", nil, 0, bad
		}
		if lease, err = time.ParseDuration(path[i+1:]); err != nil || lease <= 0 {
			return "", nil, 0, bad
		}
		path = path[:i]
	case "thawed":
	default:
		return "", nil, 0, bad
	}
	switch kind {
	case "v2", "v1":
		if !filepath.IsAbs(path) {
			return "", nil, 0, bad
		}
		g = cgroupV1{dir: path}
		if kind == "v2" {
			g = cgroupV2{dir: path}
		}
	case "pgid":
		n, perr := strconv.Atoi(path)
		if perr != nil || n <= 1 {
			return "", nil, 0, bad
		}
		g = procGroup{pgid: n, kill: kill}
	default:
		return "", nil, 0, bad
	}
	return op, g, lease, nil
}

// watchdog is the parent's end: the pipe to the child, started on first
// use. A nil *watchdog (no watchdog configured) says nothing.
type watchdog struct {
	start func() (io.WriteCloser, func() error, error)
	clock gpu.Clock
	// every is the pulse period: a watchdog is started again at most once
	// in it (one that keeps dying, out of memory say, would otherwise be
	// started at every line, each start taken from the period)
	every  time.Duration
	logger log.Logger

	mu   sync.Mutex
	w    io.WriteCloser
	wait func() error
	// started is when the last start was tried (zero: never); gone why
	// the last one was found gone
	started time.Time
	gone    error
	// the lines a watchdog gone and one started again log, each at most
	// once every watchdogLogEvery
	goneLog, againLog limited
	// leases are the groups the watchdog was told are frozen and not told
	// thawed since, by their spec, with the end of their lease: a watchdog
	// started again (the last one gone: killed, crashed) is told them
	// first, so that what was frozen under the last one stays bounded,
	// also a group whose thaw failed (a lease over: thawed at once).
	leases map[string]time.Time
}

// watchdogCommand starts argv as the watchdog with a pipe on its stdin.
func watchdogCommand(argv []string) func() (io.WriteCloser, func() error, error) {
	return func() (io.WriteCloser, func() error, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = command.Environ() // (not systemd's NOTIFY_SOCKET: the exporter's alone)
		cmd.Stderr = os.Stderr
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		waited, err := reap.Start(cmd)
		if err != nil {
			return nil, nil, fmt.Errorf("pause watchdog %s: %w", argv[0], err)
		}
		// waited for as soon as it exits (which closes w): a watchdog
		// gone but not waited for would hold the exporter's reaper back
		// (internal/reap) until the next line found it gone
		done := make(chan error, 1)
		go func() {
			err := cmd.Wait()
			waited()
			done <- err
		}()
		return w, func() error { return <-done }, nil
	}
}

// sayLocked sends one line, under d.mu; with start, a watchdog is
// started if none is running or the running one is gone (a thaw needs
// none: nothing is frozen that it watches), and told first of the leases
// it should hold, less those of pending (told by the lines to come).
func (d *watchdog) sayLocked(start bool, pending []group, format string, args ...any) error {
	if d.w != nil {
		err := d.write(format, args...)
		if err == nil || !start {
			return err
		}
	}
	if !start {
		return nil
	}
	now := d.clock.Now()
	again := !d.started.IsZero()
	if again && now.Sub(d.started) < d.every {
		return fmt.Errorf("%w (%v), and the last was started %v ago: %v must pass between two starts", errWatchdogWait, d.gone, now.Sub(d.started), d.every)
	}
	d.started = now
	w, wait, err := d.start()
	if err != nil {
		d.gone = err
		return err
	}
	d.w, d.wait = w, wait
	if again {
		d.againLog.log(d.logger, now, "pause: the watchdog was gone; started again (at most once a period), told the leases the last one held", "err", d.gone)
	}
	now = d.clock.Now()
	for _, spec := range slices.Sorted(maps.Keys(d.leases)) {
		if slices.ContainsFunc(pending, func(g group) bool { return g.Spec() == spec }) {
			continue
		}
		if err := d.write("freeze %s %s", spec, max(d.leases[spec].Sub(now), time.Millisecond)); err != nil {
			return err
		}
	}
	return d.write(format, args...)
}

// write writes one line to the running watchdog.
func (d *watchdog) write(format string, args ...any) error {
	if _, err := fmt.Fprintf(d.w, format+"\n", args...); err != nil {
		// The watchdog is gone: the next lease starts another.
		_ = d.w.Close()
		_ = d.wait()
		d.w, d.gone = nil, err
		d.goneLog.log(d.logger, d.clock.Now(), "pause: the watchdog is gone (a line to it not written); the next freeze starts another, at most once a period", "err", err)
		return fmt.Errorf("pause watchdog: %w", err)
	}
	return nil
}

// errWatchdogWait: the watchdog is gone, and the last one started less
// than a period ago; no lease is given, nothing frozen on it.
var errWatchdogWait = errors.New("pause watchdog: gone")

// watchdogLogEvery is the least time between two lines of the watchdog's
// gone or started again (each says how many it stands for).
const watchdogLogEvery = time.Minute

// limited is a log line said at most once every watchdogLogEvery.
type limited struct {
	last time.Time
	n    int // since last
}

// log logs msg at warn (with how many times it came since the last line)
// unless one was logged less than watchdogLogEvery ago.
func (l *limited) log(logger log.Logger, now time.Time, msg string, kv ...any) {
	l.n++
	if !l.last.IsZero() && now.Sub(l.last) < watchdogLogEvery {
		return
	}
	level.Warn(logger).Log(append([]any{"msg", msg, "times", l.n}, kv...)...)
	l.last, l.n = now, 0
}

// leased tells the watchdog that gs are about to be frozen for at most
// lease; with again, only one running already is (none is started: an
// error where none is).
func (d *watchdog) leased(gs []group, lease time.Duration, again bool) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if again && d.w == nil {
		return errors.New("pause watchdog: none running")
	}
	// the leases are noted first: a watchdog started on the way is told
	// these with the others, not their last (which may have ended, and
	// thaw one at once)
	if d.leases == nil {
		d.leases = map[string]time.Time{}
	}
	was := maps.Clone(d.leases)
	until := d.clock.Now().Add(lease)
	for _, g := range gs {
		d.leases[g.Spec()] = until
	}
	for i, g := range gs {
		if err := d.sayLocked(!again, gs[i:], "freeze %s %s", g.Spec(), lease); err != nil {
			d.leases = was // none is frozen
			return err
		}
	}
	return nil
}

// thawed tells the watchdog that gs were thawed. A line not written is
// no error of the thaw's: the watchdog is gone (logged as such), and
// holds nothing.
func (d *watchdog) thawed(gs []group) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range gs {
		delete(d.leases, g.Spec())
		_ = d.sayLocked(false, nil, "thawed %s", g.Spec())
	}
}

// close ends the pipe and waits for the watchdog to exit.
func (d *watchdog) close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return nil
	}
	err := d.w.Close()
	d.w, d.leases = nil, nil // (it thaws every group at the pipe's end)
	return errors.Join(err, d.wait())
}
