package tuner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A restarted MPS client's successor keeps no cap of the tuner's without
// an original anywhere: whatever became of the restart, the original
// goes to the successor, and the exit sets the successor back.

// diskFullAfterRestart is an MPS host whose first client restart fills
// the disk under the journal as it ends (a restart hook may run for
// minutes).
type diskFullAfterRestart struct {
	successorHost
	filled bool
}

func (d *diskFullAfterRestart) RestartClient(ctx context.Context, uuid string, pid uint32, tn string) error {
	err := d.successorHost.RestartClient(ctx, uuid, pid, tn)
	if !d.filled {
		d.filled = true
		writeFile = func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
	}
	return err
}

// followRefused is what the tuner logs each time the journal does not
// take a successor's original.
const followRefused = "could not journal the original of an MPS client's successor"

// The successor of a restarted client told (named by the hook, or found
// as the one new process of its tenant) while the journal cannot take its
// original (a full disk) is followed once the journal takes it: the
// follow is tried again with back-off (15 s, doubled up to 5 min) while
// the journal stays unwritable, and at once in the first round that finds
// it writable again; the old PID's original, gone meanwhile, is not
// closed as gone. Before, the original stayed with the old PID, a minute
// later closed as "process gone; nothing to restore", and the successor
// kept the tuner's cap for good: no exit or start set it back.
func TestSuccessorFollowedOnceTheJournalTakesIt(t *testing.T) {
	for _, c := range []struct {
		name  string
		named bool
		full  time.Duration // how long the disk stays full after the restart
		tries int           // the most follows refused
	}{
		{"named, a round", true, 10 * time.Second, 1},
		{"named, three minutes", true, 3 * time.Minute, 4},
		{"found, three minutes", false, 3 * time.Minute, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			host := &diskFullAfterRestart{}
			if c.named {
				host.next = map[uint32]uint32{7: 9}
			}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.restart(t, embed(7), batch(8))
			freed := t0.Add(c.full)
			for range 20 { // five minutes: PID 7 gone, 9 running
				if !r.clk.Now().Add(15 * time.Second).Before(freed) {
					writeFile = (*os.File).Write
				}
				r.round(t, batch(8), embed(9))
			}
			if o := r.j.Originals(); len(o) == 1 && o[0].At.After(freed.Add(15*time.Second)) {
				t.Errorf("successor followed at %v, want the first round after the disk was freed (%v)", o[0].At, freed)
			}
			if n := strings.Count(r.log.String(), followRefused); n == 0 || n > c.tries {
				t.Errorf("follow refused %d times, want 1 to %d (backed off)\nlog: %s", n, c.tries, r.log.String())
			}
			r.exit(t, 9, restoredOn9)
			if o := r.j.Originals(); len(o) != 0 {
				t.Errorf("originals left open after the exit: %+v", o)
			}
		})
	}
}

// swapThenFail is an MPS host whose restart hook fails at its first run
// for PID 7 (killed at its timeout while it waited for the successor's
// health check, or for the old client to stop), having started the
// successor, with the new cap in its environment, or not (the snapshots
// tell which). Where hooked, it runs off the round.
type swapThenFail struct {
	successorHost
	hooked, failed bool
}

func (h *swapThenFail) RunsHooks() bool { return h.hooked }

func (h *swapThenFail) RestartClient(ctx context.Context, uuid string, pid uint32, tn string) error {
	err := h.successorHost.RestartClient(ctx, uuid, pid, tn)
	if pid != 7 || h.failed {
		return err
	}
	h.failed = true
	return errors.New(`restart hook for MPS client 7 (tenant "embed") on GPU GPU-0: killed after its timeout (--mps.restart-hook.timeout)`)
}

// A client restart that failed after its hook had started the successor
// (killed at --mps.restart-hook.timeout, in the round or off it) is
// followed as one whose hook named none: the one new process of the
// tenant takes the original, and the exit sets it back. Where the hook
// failed before it swapped, the client runs on under its own PID, keeps
// its original, and is set back at exit; nothing is said of a successor.
// Before, the failed change left the original with the old PID, closed
// as gone a minute later, and the successor kept the tuner's cap.
func TestFailedRestartSuccessorTakesOriginal(t *testing.T) {
	for _, c := range []struct {
		name          string
		hooked, swaps bool
	}{
		{"in the round, swapped", false, true},
		{"off the round, swapped", true, true},
		{"in the round, failed before the swap", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &swapThenFail{hooked: c.hooked}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.tu.o.Policy = fixed{mpsAction(7, 1, 0.5)}
			if _, err := r.tu.RunOnce(context.Background(), tenantSnap(r.clk.Now(), embed(7), batch(8))); err != nil {
				t.Fatal(err)
			}
			r.tu.o.Policy = fixed(nil)
			waitHookEnded(t, r.tu)
			after, client, calls := []proc{batch(8), embed(9)}, uint32(9), restoredOn9
			if !c.swaps {
				after, client = []proc{embed(7), batch(8)}, 7
				calls = []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)"}
			}
			var failed bool
			for range 6 {
				for _, d := range r.round(t, after...) {
					failed = failed || d.Outcome == OutcomeFailed
				}
			}
			if !failed && c.hooked {
				t.Error("the hook's failure was not settled")
			}
			if strings.Contains(r.log.String(), unnamedLog) {
				t.Errorf("a successor not told was logged:\n%s", r.log.String())
			}
			r.host.Calls = nil
			r.exit(t, client, calls)
			if o := r.j.Originals(); len(o) != 0 {
				t.Errorf("originals left open after the exit: %+v", o)
			}
		})
	}
}

// An MPS original whose client's restart is younger than the bound
// within which its successor is told is not closed as gone, even where no
// search for the successor holds it, past GoneAfter since its process was
// last seen: by the round, nor by the exit, which leaves it open for the
// next start (a failed restore); it is once the restart is older, or
// dated ahead of the clock (its bound cannot be counted).
func TestRestartedOriginalNotClosedAsGone(t *testing.T) {
	k := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}.String()
	for _, c := range []struct {
		name      string
		restarted time.Duration // before the round, from the restart's record
		kept      bool
	}{
		{"restarted 30 s before", 30 * time.Second, true},
		{"restarted 2 min before", 2 * time.Minute, false},
		{"dated an hour ahead", -time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			r.restart(t, embed(7), batch(8))
			r.clk.Advance(2 * time.Minute)
			r.tu.mu.Lock()
			o := r.tu.originals[k]
			o.Restart.At = r.clk.Now().Add(15*time.Second - c.restarted)
			r.tu.originals[k] = o
			delete(r.tu.watches, k) // (no search holds it)
			r.tu.mu.Unlock()
			r.round(t, batch(8))
			if got := len(r.j.Originals()) == 1; got != c.kept {
				t.Errorf("original kept %v, want %v: %+v", got, c.kept, r.j.Originals())
			}
			_, err := r.tu.Restore(context.Background())
			if got := len(r.j.Originals()) == 1; got != c.kept || (err != nil) != c.kept {
				t.Errorf("after the exit: original kept %v (%v), want %v", got, err, c.kept)
			}
		})
	}
}

// namingHookHost is a hookHost whose restarts may go on under another
// PID (it names none).
type namingHookHost struct{ *hookHost }

func (namingHookHost) Successor(string, uint32) (uint32, bool) { return 0, false }

// A client restart the exit cancels (its hook still running) is settled
// as failed, and the exit sets the client back itself, as before: no
// search for a successor begins then, which would leave the original
// open, a failed restore, its successor not told before the minute has
// passed.
func TestExitCancelledRestartSetsClientBack(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	host := namingHookHost{newHookHost()}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.5)}, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), tenantSnap(t0, embed(7), batch(8))); err != nil {
		t.Fatal(err)
	}
	<-host.started
	clk.Advance(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := tu.Restore(ctx); err != nil {
		t.Errorf("restore at exit: %v, want none", err)
	}
	if got, want := host.Calls(), []string{"SetMPSActiveThreads(GPU-0,7,0.50)", "RestartClient(GPU-0,7)", "SetMPSActiveThreads(GPU-0,7,1.00)", "SetMPSActiveThreads(GPU-0,7,1.00)", "RestartClient(GPU-0,7)"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals left open: %+v", o)
	}
}

// toGone is what the tuner logs when a successor told while the journal
// could not take its original is not the process told any more.
const toGone = "is not listed on its GPU under its tenant any more"

// diskFullIDs is a diskFullAfterRestart that tells its clients apart by
// their start times, as idClients does.
type diskFullIDs struct {
	diskFullAfterRestart
	starts map[uint32]uint64
}

func (d *diskFullIDs) ProcessStarts(pids []uint32) (string, []uint64, error) {
	return processStarts(testBoot, d.starts, nil, pids)
}

// A successor told (named, or found) while the journal cannot take its
// original, that exits before the journal takes it, its PID then taken by
// another process, is not followed onto that process: one of another
// tenant is given up, said at warning level (the original stays with the
// old PID and is closed as gone), and nothing is followed or restarted
// once the disk is freed, nor at exit; one of the same tenant is
// followed with the identity read when the successor was told, which the
// exit tells from the process's and closes as gone, restarting nothing.
// Before, the follow retried later moved the original onto whatever held
// the PID then, with that process's identity, and the exit set back and
// restarted it: another tenant's process.
func TestToldSuccessorReusedPIDNotFollowed(t *testing.T) {
	for _, c := range []struct {
		name   string
		named  bool
		reuser proc   // the process that takes PID 9
		open   uint32 // the original journaled before the exit
	}{
		{"named, another tenant's", true, batch(9), 0},
		{"found, another tenant's", false, batch(9), 0},
		{"found, its tenant's", false, embed(9), 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			host := &diskFullIDs{starts: map[uint32]uint64{7: 70, 8: 80}}
			if c.named {
				host.next = map[uint32]uint32{7: 9}
			}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.restart(t, embed(7), batch(8))
			delete(host.starts, 7)
			host.starts[9] = 90
			freed := t0.Add(10 * time.Minute)
			for i := range 60 {
				if !r.clk.Now().Add(15 * time.Second).Before(freed) {
					writeFile = (*os.File).Write
				}
				switch {
				case i < 8: // the successor 9 runs
					r.round(t, batch(8), embed(9))
				case i < 12: // it exits, and its PID is taken
					delete(host.starts, 9)
					r.round(t, batch(8))
				default:
					host.starts[9] = 95
					r.round(t, batch(8), c.reuser)
				}
			}
			if n := strings.Count(r.log.String(), toGone); n != 1 && c.open == 0 || n != 0 && c.open != 0 {
				t.Errorf("successor given up %d times\nlog: %s", n, r.log.String())
			}
			r.exit(t, c.open, nil)
			if o := r.j.Originals(); len(o) != 0 {
				t.Errorf("originals left open after the exit: %+v", o)
			}
		})
	}
}

// diskFreedAtExit is a diskFullAfterRestart whose disk is freed as the
// exit restarts PID 9 (freed), or not.
type diskFreedAtExit struct {
	diskFullAfterRestart
	freed bool
}

func (d *diskFreedAtExit) RestartClient(ctx context.Context, uuid string, pid uint32, tn string) error {
	err := d.diskFullAfterRestart.RestartClient(ctx, uuid, pid, tn)
	if pid == 9 && d.freed {
		writeFile = (*os.File).Write
	}
	return err
}

// The successor told (named, or found) whose original the journal takes
// not even at exit is set back by the exit all the same, with the
// identity read when it was told, and the old PID's original closed once
// the journal takes that (at the exit's end; else it stays open for the
// next start, said at warning level). Before, the exit left the original
// "for the next start, which looks for the successor again", but the
// next start looks only within a minute of the restart, and closed the
// original as gone: the successor kept the tuner's cap for good (as it
// did where the last sample before the exit missed it).
func TestToldSuccessorSetBackAtExit(t *testing.T) {
	for _, c := range []struct {
		name         string
		named, freed bool
	}{
		{"named, disk full", true, false},
		{"found, disk full", false, false},
		{"found, disk freed at exit", false, true},
		{"found, missed by the last sample", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			host := &diskFreedAtExit{freed: c.freed}
			if c.named {
				host.next = map[uint32]uint32{7: 9}
			}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.restart(t, embed(7), batch(8))
			for range 20 { // five minutes, the disk full throughout
				r.round(t, batch(8), embed(9))
			}
			if strings.HasSuffix(c.name, "sample") {
				// a sample may miss a running client: one seen within
				// GoneAfter of the last sample is set back all the same
				r.round(t, batch(8))
			}
			r.exit(t, 7, restoredOn9)
			var open []uint32
			for _, o := range r.j.Originals() {
				open = append(open, o.Target.PID)
			}
			if want := map[bool][]uint32{false: {7}, true: nil}[c.freed]; !slices.Equal(open, want) {
				t.Errorf("originals open after the exit on PIDs %v, want %v", open, want)
			}
			if c.freed {
				return
			}
			// the next start cannot tell the successor (the minute has
			// passed), and says that the exit may have set it back
			writeFile = (*os.File).Write
			r.j.Close()
			next := newUnnamedRun(t, r.path)
			next.clk.Set(r.clk.Now().Add(30 * time.Second))
			if _, err := next.tu.Recover(context.Background(), tenantSnap(next.clk.Now(), batch(8), embed(9))); err != nil {
				t.Fatal(err)
			}
			for range 6 {
				next.round(t, batch(8), embed(9))
			}
			if l := next.log.String(); !strings.Contains(l, "unless the run that restarted it set it back at exit") || len(next.host.Calls) != 0 {
				t.Errorf("next start: calls %q, open %+v, log:\n%s", next.host.Calls, next.j.Originals(), l)
			}
		})
	}
}

// A successor told while the journal cannot take its original that a few
// samples list with no tenant (the attribution missed it), for less than
// a minute, is still followed once the journal takes it: only another
// tenant's process on its PID, or a minute without it, gives it up.
func TestToldSuccessorUnattributedAWhile(t *testing.T) {
	t.Cleanup(func() { writeFile = (*os.File).Write })
	host := &diskFullAfterRestart{}
	r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
	r.restart(t, embed(7), batch(8))
	for range 6 { // the successor found
		r.round(t, batch(8), embed(9))
	}
	for range 3 {
		r.round(t, batch(8), proc{9, ""})
	}
	writeFile = (*os.File).Write
	r.round(t, batch(8), embed(9))
	if strings.Contains(r.log.String(), toGone) {
		t.Errorf("the successor was given up:\n%s", r.log.String())
	}
	r.exit(t, 9, restoredOn9)
}
