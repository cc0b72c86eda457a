package tuner

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// blockingCloser is an actuator whose Close blocks until release (a
// freezer's write on a stuck file system), then calls then.
type blockingCloser struct {
	release chan struct{}
	then    func()
}

func (b *blockingCloser) Close() error {
	<-b.release
	b.then()
	return nil
}

// exitRunnerEnded is exitRunner (its restore at exit quick) with Run
// ended, on deadline.
func exitRunnerEnded(t *testing.T, deadline time.Duration) *Runner {
	t.Helper()
	rn := exitRunner(t, &slowPower{}, false)
	rn.SetRestoreTimeout(deadline)
	runEnded(rn)
	return rn
}

// waitFor waits up to 30 s for cond.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// An actuator whose close blocks after the restore (no round stuck)
// keeps neither the journal's close nor the other actuators': the exit
// returns within its deadline naming it, the node lock kept until it
// ends; what it writes to the journal then is refused, the file as it
// was. (The closes ran one after another: the journal stayed open and the
// exit ended on a bare "not finished in".)
func TestExitBlockedActuatorCloseKeepsNoOther(t *testing.T) {
	rn := exitRunnerEnded(t, time.Second)
	late := make(chan error, 1)
	stuck := &blockingCloser{release: make(chan struct{}), then: func() { late <- rn.journal.Append(originalRec("GPU-1", 500)) }}
	rn.CloseAtExit(stuck)
	closes, releases := countCloses(rn), countReleases(rn)
	err := rn.RestoreAtExit()
	if err == nil || !strings.Contains(err.Error(), "not closed within --tuner.restore-timeout: actuator 1 (*tuner.blockingCloser)") || strings.Contains(err.Error(), "not finished") {
		t.Errorf("RestoreAtExit: %v, want the blocked actuator named as not closed", err)
	}
	if !journalClosed(rn) || closes.Load() != 1 || releases.Load() != 0 {
		t.Errorf("journal closed %v, other actuator closed %d times, lock released %d times; want both closed, the lock kept", journalClosed(rn), closes.Load(), releases.Load())
	}
	before := readFile(t, rn.journal.Path())
	close(stuck.release)
	if err := <-late; err == nil {
		t.Error("a write of a late actuator's close into the closed journal succeeded, want it refused")
	}
	if !waitFor(func() bool { return releases.Load() == 1 }) {
		t.Errorf("lock released %d times once the close ended, want 1", releases.Load())
	}
	if after := readFile(t, rn.journal.Path()); !bytes.Equal(after, before) {
		t.Errorf("journal changed by a write after its close:\n%s\nwas\n%s", after, before)
	}
}

// An actuator that closes in time closes before the journal: a write it
// made as it closed would land in it (none of the production ones does).
func TestExitActuatorsCloseBeforeTheJournal(t *testing.T) {
	rn := exitRunnerEnded(t, 2*time.Second)
	wrote := errors.New("never closed")
	rn.CloseAtExit(closeFunc(func() error {
		time.Sleep(20 * time.Millisecond)
		wrote = rn.journal.Append(originalRec("GPU-1", 500))
		return nil
	}))
	if err := rn.RestoreAtExit(); err != nil {
		t.Fatal(err)
	}
	if wrote != nil {
		t.Errorf("the actuator's write as it closed: %v, want it in the journal", wrote)
	}
	j := openJournal(t, rn.journal.Path())
	defer j.Close()
	if o := j.Originals(); len(o) != 1 || o[0].Target.GPU != "GPU-1" {
		t.Errorf("journal holds %+v, want GPU-1's original the actuator wrote as it closed", o)
	}
}

// An actuator whose close outlasts half of what is left of the deadline
// has the journal closed beside it, and is waited for to the deadline
// all the same: one that ends then, in time (its thaw lands), leaves the
// exit clean and the lock released. (The journal waited for it: this
// close, which ends once the journal is closed, ended the exit on a bare
// "not finished in".)
func TestExitSlowActuatorCloseWaitedForPastTheJournal(t *testing.T) {
	rn := exitRunnerEnded(t, 2*time.Second)
	rn.CloseAtExit(closeFunc(func() error {
		if !waitFor(func() bool { return journalClosed(rn) }) {
			return errors.New("the journal not closed beside this close")
		}
		return nil
	}))
	releases := countReleases(rn)
	if err := rn.RestoreAtExit(); err != nil {
		t.Errorf("RestoreAtExit: %v, want the journal closed beside the slow close and the close waited for", err)
	}
	if n := releases.Load(); n != 1 {
		t.Errorf("lock released %d times when RestoreAtExit returned, want once", n)
	}
}

// pathLock is a node lock at path whose release calls release.
type pathLock struct {
	path    string
	release func() error
}

func (l *pathLock) Path() string { return l.path }
func (l *pathLock) Close() error { return l.release() }

// After a round stuck at exit, the node lock is released once the round
// has ended and the journal's close has returned, and a release that
// fails is logged naming the lock. (It was released as the round ended,
// the journal's close still blocked, and its error dropped.)
func TestStuckRoundReleasesAfterTheJournal(t *testing.T) {
	host := &hangingPower{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	rn := exitRunner(t, host, true)
	j := openJournal(t, filepath.Join(t.TempDir(), "journal")) // (the runner's, apart from the tuner's, which the round writes)
	rn.journal = j
	rn.SetRestoreTimeout(2 * time.Second) // (its last 5%, 100 ms, is the closes' after the stuck round: a loaded machine can take longer than 10 ms to run them)
	var logs lockedBuffer
	rn.logger = log.NewLogfmtLogger(&logs)
	closedAtRelease := make(chan bool, 1)
	rn.ReleaseAtExit(&pathLock{path: "/run/vgpu-exporter/tuner.lock", release: func() error {
		closed := j.mu.TryLock()
		if closed {
			closed = j.closed
			j.mu.Unlock()
		}
		closedAtRelease <- closed
		return errors.New("bad file descriptor")
	}})
	ctx, cancel := context.WithCancel(context.Background())
	go rn.Run(ctx)
	hangs(t, host) // (a wait of 30 ms could end before the round began, on a loaded machine)
	cancel()
	j.mu.Lock() // the journal's close blocks
	if err := rn.RestoreAtExit(); err == nil || !strings.Contains(err.Error(), "not closed within --tuner.restore-timeout: the journal") {
		t.Errorf("RestoreAtExit: %v, want the journal named as not closed", err)
	}
	close(host.release)
	<-rn.done
	time.Sleep(100 * time.Millisecond) // (the round ended, the journal's close still blocked)
	j.mu.Unlock()
	select {
	case closed := <-closedAtRelease:
		if !closed {
			t.Error("the node lock was released before the journal's close returned")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node lock was not released once the round and the journal's close ended")
	}
	if !waitFor(func() bool {
		return strings.Contains(logs.String(), "releasing the node lock /run/vgpu-exporter/tuner.lock: bad file descriptor")
	}) {
		t.Errorf("log %s, want the failed release logged naming the lock", logs.String())
	}
}
