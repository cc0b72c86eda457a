//go:build linux

package reap_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/reap"
)

// subreaper makes the test process the one orphans of its children go
// to, as PID 1 of a container is.
func subreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
}

// zombies counts the process's children that ended and were not waited for.
func zombies(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, n := os.Getpid(), 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(self) {
			n++
		}
	}
	return n
}

// loop runs the reaper as the exporter does (woken by SIGCHLD) until the
// test ends; it returns how many orphans it reaped so far.
func loop(t *testing.T) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	reaped := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		reap.Loop(ctx, time.Tick(50*time.Millisecond), func(reap.Reaped) {
			mu.Lock()
			reaped++
			mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return reaped
	}
}

// orphaning runs a program that leaves a child behind it, which ends
// a moment later, an orphan.
func orphaning(t *testing.T, exit int) {
	t.Helper()
	_, err := command.Run(context.Background(), command.Spec{Path: "/bin/sh",
		Args: []string{"-c", "sleep 0.05 & exit " + strconv.Itoa(exit)}, Timeout: 10 * time.Second})
	var e *command.Error
	switch {
	case exit == 0 && err != nil:
		t.Errorf("run: %v", err)
	case exit != 0 && (!errors.As(err, &e) || e.ExitCode != exit):
		t.Errorf("run: want exit status %d, got %v", exit, err)
	}
}

// TestOrphansReaped: without the reaper every orphan stays a zombie;
// with it none is left, and each was reported.
func TestOrphansReaped(t *testing.T) {
	subreaper(t)
	before := zombies(t)
	for range 5 {
		orphaning(t, 0)
	}
	// each orphan ends a moment after its parent (later on a loaded
	// machine): wait for the five, a hang guard rather than a bound
	until(func() bool { return zombies(t)-before >= 5 })
	time.Sleep(100 * time.Millisecond) // none more comes
	if got := zombies(t) - before; got != 5 {
		t.Fatalf("without the reaper: %d zombies, want 5 (the test cannot tell the reaper's work)", got)
	}
	reaped := loop(t)
	for range 5 {
		orphaning(t, 0)
	}
	// no zombie at one look is not the end: an orphan still running
	// becomes one later; the reaper has done its work once it reported
	// every orphan
	until(func() bool { return reaped() >= 10+before })
	if got := reaped(); got != 10+before {
		t.Errorf("reaped %d orphans, want %d", got, 10+before)
	}
	if n := zombies(t); n != 0 {
		t.Fatalf("with the reaper: %d zombies left", n)
	}
}

// until polls cond every 20 ms until it holds or 10 s have passed (a
// hang guard: the test then fails on what it checks next).
func until(cond func() bool) {
	for deadline := time.Now().Add(10 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOwnChildrenKeepTheirStatus: programs the exporter waits for keep
// their exit status while orphans end around them and are reaped (a
// reaper taking every zombie would make their Wait fail with "no child
// processes").
func TestOwnChildrenKeepTheirStatus(t *testing.T) {
	subreaper(t)
	loop(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				orphaning(t, 1+(i+j)%5)
				// a program that ends at once, the reaper's likeliest prey
				cmd := exec.Command("/bin/true")
				if err := reap.Run(cmd); err != nil {
					t.Errorf("/bin/true: %v", err)
				}
			}
		})
	}
	wg.Wait()
}
