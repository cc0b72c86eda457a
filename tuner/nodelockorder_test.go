package tuner

import (
	"path/filepath"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// lockAtExit is a node lock that, as it is released, sees whether another
// tuner taking it then could open the journal.
type lockAtExit struct {
	*NodeLock
	journal string
	opened  error
}

func (l *lockAtExit) Close() error {
	j, err := OpenJournal(l.journal)
	if err == nil {
		j.Close()
	}
	l.opened = err
	return l.NodeLock.Close()
}

// TestNodeLockReleasedAfterTheJournal: the restore at exit closes the
// journal before the node lock it was given (ReleaseAtExit) is released, so
// that a tuner that takes the lock then finds the journal free. (Before,
// the lock went first, and a tuner of the same journal starting then took
// it and exited on "in use by another process".)
func TestNodeLockReleasedAfterTheJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	j := openJournal(t, path)
	nl, err := AcquireNodeLock(filepath.Join(dir, "tuner.lock"), NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	lock := &lockAtExit{NodeLock: nl, journal: path}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{}, Actuators: ActuatorsOf(&fakeControl{}), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(tu, j, clk, 0, func() *tenant.Snapshot { return emptySnap(t0) }, nil)
	r.ReleaseAtExit(lock)
	if err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	if lock.opened != nil {
		t.Errorf("the journal, as the node lock was released: %v", lock.opened)
	}
}
