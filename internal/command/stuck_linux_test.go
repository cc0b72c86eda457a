package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// A run killed at its context's end comes back although a process's
// environment cannot be read (a read of /proc/PID/environ reads the
// process's memory: for one stuck in a wedged driver, or whose
// environment's pages a file system that never answers holds, it blocks
// for good): the search for the run's marked descendants passes over it
// at the read's deadline, kills the descendant that left the process group
// all the same, does not read the stuck process again, and reads no
// process started before the run (this test's). Before, Cancel waited on
// the read, and Run with it, for good.
func TestRunReturnsDespiteAStuckEnviron(t *testing.T) {
	f := commandtest.New(t)
	stuckFile, pidsFile := filepath.Join(f.Dir, "stuck"), filepath.Join(f.Dir, "pids")
	readPID := func(file string) int {
		data, _ := os.ReadFile(file)
		if !strings.HasSuffix(string(data), "\n") {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return pid
	}
	block := make(chan struct{})
	var mu sync.Mutex
	reads := map[int]int{} // environ reads of each process
	stuck := 0
	read := func(pid int, name string, limit int64) ([]byte, error) {
		if name == "environ" {
			mu.Lock()
			reads[pid]++
			mu.Unlock()
			if pid == stuck {
				<-block
			}
		}
		return readProcFile(pid, name, limit)
	}
	old := procs
	// (the deadline bounds every read, the /proc/PID/stat that picks the
	// processes to read too: one long enough that no real read of those
	// misses it under load, which would pass over the stuck process
	// before its environ is read)
	procs = newProcReader(read, time.Second, maxStuck)
	finished := make(chan struct{}) // Run has returned
	t.Cleanup(func() {
		close(block) // a Run held by the read goes on
		<-finished
		procs = old
	})

	// a marked descendant that left the process group, and an unmarked
	// process started after the run whose environ read blocks (each writes
	// its own PID: setsid forks where its caller leads a process group, so
	// $! may name a parent that is gone at once)
	body := `setsid -f sh -c "echo \$\$ > '$D/pids.tmp' && mv '$D/pids.tmp' '$D/pids'; exec sleep 30"
env -u VGPU_COMMAND_RUN setsid -f sh -c "echo \$\$ > '$D/stuck.tmp' && mv '$D/stuck.tmp' '$D/stuck'; exec sleep 30"
sleep 30`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	hook := f.Script(t, "hook", body)
	go func() {
		defer close(finished)
		_, err := Run(ctx, Spec{Path: hook})
		done <- err
	}()
	for stuck == 0 || readPID(pidsFile) == 0 {
		time.Sleep(10 * time.Millisecond)
		stuck = readPID(stuckFile)
	}
	t.Cleanup(func() { _ = killPID(stuck) })
	escaped := readPID(pidsFile)
	cancel()
	select {
	case err := <-done:
		var e *Error
		if !errors.As(err, &e) || !e.TimedOut {
			t.Errorf("error %v, want a run killed at its context's end", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Run has not returned a minute after its context ended: Cancel waits on the blocked read of /proc/%d/environ", stuck)
	}
	for deadline := time.Now().Add(2 * time.Second); commandtest.Alive(escaped) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if commandtest.Alive(escaped) {
		t.Errorf("marked descendant %d still running: the search stopped at the stuck process", escaped)
		_ = killPID(escaped)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads[stuck] != 1 {
		t.Errorf("the stuck process's environ read %d times, want once (later searches pass over it)", reads[stuck])
	}
	if reads[os.Getpid()] != 0 {
		t.Errorf("the environ of a process started before the run (the test's) was read")
	}
}
