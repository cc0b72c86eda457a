package tuner

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"
)

// A restore stuck past the deadline that then sets everything back has
// its closes bounded by a deadline of their own (the exit's is spent),
// and the log says the originals are set back, in a line apart from the
// closes'. (The closes ran on the spent deadline: the journal logged as
// not closed, an error line, and no line said the originals were set
// back; the last word was "NOT restored".)
func TestExitStuckRestoreLateSetBackLogged(t *testing.T) {
	rn, host, logs := stuckRestoreRunner(t)
	releases := countReleases(rn)
	close(host.armed)
	if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "nothing closed") {
		t.Fatalf("RestoreAtExit: %v, want the stuck restore named", err)
	}
	close(host.release)
	want := [][]string{
		{"level=warn", "ended after it: the original settings are set back"},
		{"level=warn", "ended after it: the actuators and the journal closed"},
	}
	if !waitFor(func() bool { return containsAll(logs.String(), want[0]) && containsAll(logs.String(), want[1]) }) {
		t.Errorf("log:\n%s\nwant lines with %q", logs.String(), want)
	}
	if l := logs.String(); strings.Contains(l, "did not close") || strings.Contains(l, "closed after the deadline") {
		t.Errorf("log:\n%s\nwant no close failing or late", l)
	}
	if !journalClosed(rn) || !waitFor(func() bool { return releases.Load() == 1 }) {
		t.Errorf("journal closed %v, lock released %d times; want both", journalClosed(rn), releases.Load())
	}
}

// A restore that failed at start and was made at exit leaves the exit's
// status non-zero (the documented contract for a failed restore), but the
// log says a restore failed while running and every original is set back
// now, not "NOT restored". (It said "original settings NOT restored; the
// journal restores them at the next start", the journal holding none.)
func TestExitAfterFailedStartRestoreSaysSetBack(t *testing.T) {
	failed := make(chan struct{})
	close(failed) // the first call (the start's restore) fails at once
	rn := exitRunner(t, &slowPower{release: failed}, false)
	rn.SetRestoreTimeout(2 * time.Second)
	var logs lockedBuffer
	rn.logger = log.NewLogfmtLogger(&logs)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); rn.Run(ctx) }()
	if !waitFor(func() bool { return strings.Contains(logs.String(), "could not all be restored at start") }) {
		t.Fatalf("log:\n%s\nwant the start's restore failed", logs.String())
	}
	cancel()
	<-ran
	err := rn.RestoreAtExit()
	if err == nil || !strings.Contains(err.Error(), "failed while running") {
		t.Errorf("RestoreAtExit: %v, want the failure while running (a non-zero exit)", err)
	}
	if e := rn.Status().Exit; e.AtExit+e.Failed+e.KeptOpen != 0 {
		t.Fatalf("originals open after the exit: %+v, want every one set back", e)
	}
	l := logs.String()
	if strings.Contains(l, "NOT restored") || !containsAll(l, []string{"level=error", "a restore failed while running", "every original is set back now"}) {
		t.Errorf("log:\n%s\nwant the failure while running said, every original set back, no \"NOT restored\"", l)
	}
}

// The node lock kept past the exit's deadline (a round stuck at exit, a
// hook cut at exit) has its release logged when it comes, and a stuck
// round its end. (Only a failed release was logged: nobody could tell
// whether, or when, the lock went.)
func TestExitKeptLockReleaseLogged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (rn *Runner, releases *atomic.Int32, end func())
		want  [][]string
	}{
		{"stuck round", func(t *testing.T) (*Runner, *atomic.Int32, func()) {
			rn := exitRunner(t, &slowPower{}, false) // (Run never runs: its round never ends)
			rn.SetRestoreTimeout(200 * time.Millisecond)
			return rn, countReleases(rn), func() { close(rn.done) }
		}, [][]string{{"level=info", "the round stuck at exit has ended"}, {"level=info", "the node lock is released"}}},
		{"cut hook", func(t *testing.T) (*Runner, *atomic.Int32, func()) {
			r := deafHookStarted(t)
			rn := r.exitRunner()
			releases := countReleases(rn)
			runEnded(rn)
			return rn, releases, func() { r.host.release <- nil }
		}, [][]string{{"level=info", "the node lock is released"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // (the deadline's wall time the bubble's: no load makes the exit late)
				rn, releases, end := tc.setup(t)
				var logs lockedBuffer
				rn.logger = log.NewLogfmtLogger(&logs)
				if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "node lock is kept") {
					t.Fatalf("RestoreAtExit: %v, want the lock said kept", err)
				}
				if strings.Contains(logs.String(), "the node lock is released") {
					t.Fatalf("log:\n%s\nwant no release before the end", logs.String())
				}
				end()
				if !waitFor(func() bool { return releases.Load() == 1 }) {
					t.Fatalf("lock released %d times, want once", releases.Load())
				}
				for _, w := range tc.want {
					if !waitFor(func() bool { return containsAll(logs.String(), w) }) {
						t.Errorf("log:\n%s\nwant a line with %q", logs.String(), w)
					}
				}
			})
		})
	}
}

// The closes after a restore that ended past the exit's deadline run on
// a bound of their own (lateCloseTimeout), and their error and late line
// name that bound, not --tuner.restore-timeout, which they did not run
// under. (Both said "within --tuner.restore-timeout".)
func TestExitLateClosesNameTheirOwnBound(t *testing.T) {
	rn, host, logs := stuckRestoreRunner(t)
	rn.lateCloses = 100 * time.Millisecond
	release := make(chan struct{})
	rn.CloseAtExit(closeFunc(func() error { <-release; return nil }))
	close(host.armed)
	if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "nothing closed") {
		t.Fatalf("RestoreAtExit: %v, want the stuck restore named", err)
	}
	close(host.release)
	bound := "the 100ms the closes get of their own after a restore that ended past --tuner.restore-timeout"
	want := []string{"level=error", "ended after it: an actuator, the journal or the node lock did not close", "not closed within " + bound + ": actuator 1"}
	if !waitFor(func() bool { return containsAll(logs.String(), want) }) {
		t.Fatalf("log:\n%s\nwant a line with %q", logs.String(), want)
	}
	close(release)
	want = []string{"level=warn", "closed after the deadline", `deadline="` + bound + `"`, "actuator 1"}
	if !waitFor(func() bool { return containsAll(logs.String(), want) }) {
		t.Errorf("log:\n%s\nwant a line with %q", logs.String(), want)
	}
}
