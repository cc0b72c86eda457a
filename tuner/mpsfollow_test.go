package tuner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newIDRun is an unnamedRun whose MPS actuator tells its clients apart
// (host: its starts and its successors).
func newIDRun(t *testing.T, host *idClients) *unnamedRun {
	t.Helper()
	return newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
}

// A named successor not taken (another tenant's process, unname) gives
// the client's original back to its old PID with the identity journaled
// for it when the cap was changed, not one read then (the old process is
// gone by then: none): a process that takes the old PID later is not
// restarted at exit. (Before, the original went back with no identity,
// and the restore at exit restarted whatever held the PID then: here
// another tenant's batch process.)
func TestMPSUnnamedOriginalKeepsIdentity(t *testing.T) {
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 50, 10: 500}}
	host.next = map[uint32]uint32{7: 10}
	r := newIDRun(t, host)
	r.restart(t, embed(7), batch(8))
	if o := r.j.Originals(); len(o) != 1 || o[0].Target.PID != 10 {
		t.Fatalf("originals after the restart %+v, want PID 10's", o)
	}
	delete(host.starts, 7) // the client restarted: its PID runs nothing
	r.round(t, batch(8), batch(10))
	if o := r.j.Originals(); len(o) != 1 || o[0].Target.PID != 7 || o[0].Boot != testBoot || !slices.Equal(o[0].Starts, []uint64{100}) {
		t.Errorf("originals after the named successor was refused %+v, want PID 7's with start 100", o)
	}
	host.starts[7] = 900 // PID 7 taken by a batch process
	for range 8 {
		r.round(t, batch(7), batch(8), batch(10))
	}
	if _, err := r.tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := restartsOf(r.host.Calls); len(got) != 0 {
		t.Errorf("restarts at exit %q, want none (PID 7 is another process now)\nlog: %s", got, r.log.String())
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("originals left open: %+v", o)
	}
}

// clientsWarning is the hourly warning that the tuner cannot tell an MPS
// client whose cap it changes.
const clientsWarning = "tuner cannot tell the MPS client whose cap it changes"

// An MPS original that follows the client to a PID that runs nothing (a
// successor the hook named that is not up yet, or a wrapper's PID) is
// journaled without identity, as before, but the hourly warning that the
// tuner cannot tell the client whose cap it changes is not spent on it:
// it is said at debug level, and the warning is left for a cap the tuner
// changes on a client it cannot tell. (Before, the follow logged it and
// took the hour's slot.)
func TestMPSFollowToNoProcessNotWarned(t *testing.T) {
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 50}}
	host.next = map[uint32]uint32{7: 99} // 99: no process under the procfs root
	r := newIDRun(t, host)
	r.restart(t, embed(7), batch(8))
	if o := r.j.Originals(); len(o) != 1 || o[0].Target.PID != 99 || o[0].Boot != "" {
		t.Fatalf("originals after the restart %+v, want PID 99's without identity", o)
	}
	if strings.Contains(r.log.String(), clientsWarning) {
		t.Errorf("the follow to a PID that runs nothing warned:\n%s", r.log.String())
	}
	host.err = errors.New("no procfs")
	r.tu.clientIdentity(5) // a cap changed on a client it cannot tell, within the hour
	if out := r.log.String(); !strings.Contains(out, clientsWarning) || !strings.Contains(out, "pid=5") {
		t.Errorf("the warning of a cap changed on a client the tuner cannot tell was not logged:\n%s", out)
	}
}
