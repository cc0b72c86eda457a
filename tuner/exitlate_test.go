package tuner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"
)

// A close still blocked at the deadline, named in the exit's error as
// not closed, has its end logged when it comes: a success as closed
// after the deadline, a failure at error level naming the closer and its
// error. (Its end was dropped: nobody could tell whether the tenant was
// thawed.)
func TestExitLateCloseLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"succeeds", nil, []string{"level=warn", "closed after the deadline", `closer="actuator 1 (tuner.closeFunc)"`}},
		{"fails", errors.New("thaw tenant-a: device busy"), []string{"level=error", "ended after it and failed", `closer="actuator 1 (tuner.closeFunc)"`, `err="thaw tenant-a: device busy"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn := exitRunnerEnded(t, 300*time.Millisecond)
			var logs lockedBuffer
			rn.logger = log.NewLogfmtLogger(&logs)
			release := make(chan struct{})
			rn.CloseAtExit(closeFunc(func() error { <-release; return tc.err }))
			if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "not closed within --tuner.restore-timeout: actuator 1") {
				t.Fatalf("RestoreAtExit: %v, want the blocked close named", err)
			}
			close(release)
			if !waitFor(func() bool { return containsAll(logs.String(), tc.want) }) {
				t.Errorf("log:\n%s\nwant a line with %q", logs.String(), tc.want)
			}
		})
	}
}

// containsAll reports whether a line of s holds each of want.
func containsAll(s string, want []string) bool {
	for _, l := range strings.Split(s, "\n") {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// armedPower hangs in its calls, whatever their context, once armed,
// until release; before, it fails those with a context done (the start's
// restore, on a run stopped at once).
type armedPower struct {
	recorder
	armed   chan struct{}
	release chan struct{}
}

func (a *armedPower) SetPowerLimit(ctx context.Context, _ string, _ float64) error {
	select {
	case <-a.armed:
		<-a.release
		return nil
	default:
		return ctx.Err()
	}
}

// stuckRestoreRunner is a runner whose Run has returned and whose
// restore at exit will be stuck, past its 300 ms deadline, on the host's
// power limit until host.release is closed (once host.armed is), logging
// into logs.
func stuckRestoreRunner(t *testing.T) (*Runner, *armedPower, *lockedBuffer) {
	t.Helper()
	host := &armedPower{armed: make(chan struct{}), release: make(chan struct{})}
	rn := exitRunner(t, host, false)
	rn.SetRestoreTimeout(300 * time.Millisecond)
	runEnded(rn)
	logs := &lockedBuffer{}
	rn.logger = log.NewLogfmtLogger(logs)
	return rn, host, logs
}

// A restore stuck past the deadline ("not finished ... nothing closed")
// has its later end logged: what it set back and closed then. (Its result
// was sent to nobody.)
func TestExitStuckRestoreLateEndLogged(t *testing.T) {
	rn, host, logs := stuckRestoreRunner(t)
	close(host.armed)
	if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "nothing closed") {
		t.Fatalf("RestoreAtExit: %v, want the stuck restore named", err)
	}
	close(host.release)
	if !waitFor(func() bool {
		return strings.Contains(logs.String(), "the restore stuck at the deadline ended after it")
	}) {
		t.Errorf("log:\n%s\nwant the stuck restore's later end", logs.String())
	}
}

// A close or a release that fails after a restore that set everything
// back is logged under its own message, not as settings NOT restored,
// and still makes the exit's error. (It was logged as "original settings
// NOT restored", and the SRE chased settings that were set back.)
func TestExitCloseFailureNotLoggedAsNotRestored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(rn *Runner)
		want  string
	}{
		{"release", func(rn *Runner) {
			rn.ReleaseAtExit(&pathLock{path: "/run/vgpu-exporter/tuner.lock", release: func() error { return errors.New("bad file descriptor") }})
		}, "releasing the node lock /run/vgpu-exporter/tuner.lock: bad file descriptor"},
		{"close", func(rn *Runner) {
			rn.CloseAtExit(closeFunc(func() error { return errors.New("thaw tenant-a: device busy") }))
		}, "thaw tenant-a: device busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn := exitRunnerEnded(t, 2*time.Second)
			var logs lockedBuffer
			rn.logger = log.NewLogfmtLogger(&logs)
			tc.setup(rn)
			err := rn.RestoreAtExit()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RestoreAtExit: %v, want %q (a non-zero exit)", err, tc.want)
			}
			if l := logs.String(); strings.Contains(l, "NOT restored") || !containsAll(l, []string{"level=error", "did not close or could not be released", tc.want}) {
				t.Errorf("log:\n%s\nwant the failure under its own message, no \"NOT restored\"", l)
			}
		})
	}
}

// A hook cut at exit that has not ended (its process still dying) keeps
// the node lock: released once it ends, not while what it does may still
// land. (The lock was released as the closes ended, the hook running.)
func TestExitCutHookKeepsTheNodeLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // (the deadline's wall time the bubble's: no load makes the exit late)
		r := deafHookStarted(t)
		rn := r.exitRunner()
		releases := countReleases(rn)
		runEnded(rn)
		err := rn.RestoreAtExit()
		if err == nil || !strings.Contains(err.Error(), "pid8: its hook") || !strings.Contains(err.Error(), "node lock is kept") {
			t.Errorf("RestoreAtExit: %v, want the cut hook named and the lock said kept", err)
		}
		if n := releases.Load(); n != 0 {
			t.Errorf("lock released %d times with the cut hook still running, want it kept", n)
		}
		r.host.release <- nil
		if !waitFor(func() bool { return releases.Load() == 1 }) {
			t.Errorf("lock released %d times once the cut hook ended, want once", releases.Load())
		}
	})
}

// After a round stuck at exit (it holds the tuner), the hooks still
// running are cancelled all the same (by the exit: the round, stuck,
// cancels nothing), and the node lock is released once
// the round and every hook have ended. (They were left running, the lock
// released as the round ended, a hook's call still under way.)
func TestStuckRoundExitCancelsHooksAndKeepsTheLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		deaf bool // the hook does not end when cancelled
	}{{"cancelled", false}, {"deaf", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHookRun(t)
			if tc.deaf {
				r.tu.bind(ActuatorsOf(deafHost{r.host}))
			}
			r.round(t, capBatch)
			r.host.waitStarted(t)
			var h *hookCall
			for _, h = range r.tu.hooks {
			}
			rn := r.exitRunner()
			releases := countReleases(rn)
			if tc.deaf {
				lateExitWay(t)
			}
			// (Run never runs: its round never ends, as a stuck one)
			if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "round did not end") {
				t.Fatalf("RestoreAtExit: %v, want the stuck round named", err)
			}
			// the hook, which ends only when released or cancelled, ends
			// with the round still stuck: the exit cancelled it (its
			// return may land just after RestoreAtExit's own, on a
			// loaded host)
			if !tc.deaf && !waitFor(h.returned) {
				t.Error("the hook still runs after RestoreAtExit, the round stuck, want it cancelled")
			}
			close(rn.done) // the round ends
			time.Sleep(50 * time.Millisecond)
			if tc.deaf {
				if n := releases.Load(); n != 0 {
					t.Errorf("lock released %d times with the hook still running, want it kept", n)
				}
				r.host.release <- nil
			}
			if !waitFor(func() bool { return releases.Load() == 1 }) {
				t.Errorf("lock released %d times once the round and the hook ended, want once", releases.Load())
			}
		})
	}
}
