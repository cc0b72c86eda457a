// Package reap reaps the orphans that reach the exporter when it runs as
// the first process of a PID namespace (a container without an init:
// the chart's default, hostPID false). The kernel gives such a process
// every orphan of its namespace: a grandchild left by a hook or a control
// program (a daemon it started, or what a run killed at its timeout
// leaves behind). Nobody else waits for them, and without a reaper each
// stays a zombie, holding a PID, until the container ends.
//
// Reaping must not take the exit status of a program the exporter itself
// waits for (os/exec's Wait would then fail with "no child processes"):
// every child the exporter starts goes through Start, which registers it,
// and the reaper takes only zombies nobody registered. Start and the
// reaper share a lock, so that a child that exits at once is registered
// before the reaper can see it.
package reap

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

var (
	// starting is held (read) while a child starts and is registered, and
	// (write) while the reaper looks at and reaps zombies.
	starting sync.RWMutex
	// mu guards ours.
	mu sync.Mutex
	// ours are the children started through Start and not waited for yet.
	ours = map[int]struct{}{}
	// nudge wakes the reaper once a child of ours was waited for (a zombie
	// of ours it found first may have hidden others behind it) and once a
	// Start ended (the reaper does not wait for one under way).
	nudge = make(chan struct{}, 1)
)

// Start starts cmd, registered as a child the caller waits for; call the
// returned func once cmd.Wait has returned. Nothing else changes: cmd is
// started as cmd.Start starts it.
func Start(cmd *exec.Cmd) (waited func(), err error) {
	starting.RLock()
	defer wake() // a reaper that found a Start under way looks again
	defer starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return func() {}, err
	}
	pid := cmd.Process.Pid
	mu.Lock()
	ours[pid] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(ours, pid)
		mu.Unlock()
		wake()
	}, nil
}

// wake nudges the reaper.
func wake() {
	select {
	case nudge <- struct{}{}:
	default:
	}
}

// Run runs cmd through Start and waits for it, as cmd.Run does.
func Run(cmd *exec.Cmd) error {
	waited, err := Start(cmd)
	if err != nil {
		return err
	}
	err = cmd.Wait()
	waited()
	return err
}

// isOurs says whether pid is a child started through Start and not
// waited for yet.
func isOurs(pid int) bool {
	mu.Lock()
	defer mu.Unlock()
	_, ok := ours[pid]
	return ok
}

// Reaped is one orphan the reaper waited for.
type Reaped struct {
	PID    int
	Status string // how it ended: "exit status 3", "signal: killed"
}

// Loop reaps orphans until ctx is done: at once, whenever a child ends
// (SIGCHLD), whenever a child of ours was waited for, and at every tick
// of backstop (signals coalesce). Each orphan reaped is passed to report.
// Only one Loop may run in a process.
func Loop(ctx context.Context, backstop <-chan time.Time, report func(Reaped)) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for {
		for _, r := range reapOrphans() {
			report(r)
		}
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-nudge:
		case <-backstop:
		}
	}
}

// reapOrphans reaps the zombies among the process's children that are
// not ours, until none is left or the next one is ours (left to its
// Wait, which nudges the reaper). The kernel shows one zombie at a time,
// so a child of ours that ended hides the orphans behind it until it is
// waited for: every child started through Start is waited for as soon as
// it exits.
//
// A Start under way (its exec may hang in the kernel: a program on a hung
// mount) makes the reaper pass, to look again once it ended: waiting for
// it would hold every later Start behind the reaper's lock.
func reapOrphans() []Reaped {
	if !starting.TryLock() {
		return nil
	}
	defer starting.Unlock()
	var out []Reaped
	for {
		pid, ok := nextZombie()
		if !ok || isOurs(pid) {
			return out
		}
		status, ok := reapPID(pid)
		if !ok {
			return out
		}
		out = append(out, Reaped{PID: pid, Status: status})
	}
}

// Backstop is how often Background looks for orphans whose SIGCHLD
// coalesced with another's.
const Backstop = 10 * time.Second

// Background runs Loop in a goroutine, its backstop ticking every
// Backstop, until the func it returns is called (which returns once Loop
// has).
func Background(report func(Reaped)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	tick := time.NewTicker(Backstop)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, tick.C, report)
	}()
	return func() {
		cancel()
		<-done
		tick.Stop()
	}
}
