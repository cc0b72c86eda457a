package tuner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// deferredRun is a tuner in enforce mode at a start an hour after t0,
// over host, with embed's MPS original of PID 10 journaled with id (cap
// 100%), deciding policy every round.
func deferredRun(t *testing.T, host any, id Identity, policy Decider) (*Tuner, *Journal, *gpu.ManualClock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j := reopen(t, writeJournal(t, path, mpsOriginal(10, id)), path)
	t.Cleanup(func() { _ = j.Close() })
	clk := gpu.NewManualClock(t0.Add(time.Hour))
	tu, err := New(Options{Policy: policy, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	return tu, j, clk
}

// roundAt runs a round on snap at its time.
func roundAt(t *testing.T, tu *Tuner, clk *gpu.ManualClock, snap *tenant.Snapshot) []Decision {
	t.Helper()
	clk.Set(snap.Time)
	d, err := tu.RunOnce(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A restore made in a round (the start's, deferred till a snapshot lists
// the client; or the start's own, in the first round where nobody called
// Recover) restarts the client; the round's policy, deciding from the
// same snapshot (the client's cap before the restore), does not change
// it in that round: the next round's does. Before, the client was
// restarted twice in one round, restored and then capped from 100%.
func TestRestoreInRoundHoldsItsTarget(t *testing.T) {
	at := t0.Add(time.Hour)
	for _, c := range []struct {
		name    string
		recover bool // Recover on a snapshot without PID 10
	}{
		{"deferred till listed", true},
		{"the start's, in the first round", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
			tu, _, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed{mpsAction(10, 1, 0.5)})
			if c.recover {
				if _, err := tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"})); err != nil {
					t.Fatal(err)
				}
			}
			d := roundAt(t, tu, clk, tenantSnap(at.Add(30*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got, want := outcomes(d), []string{"mps_active_threads restored"}; !slices.Equal(got, want) {
				t.Errorf("round that restores: %v (%+v), want %v", got, d, want)
			}
			if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
				t.Errorf("restarts %q after the round that restores, want %q", got, want)
			}
			d = roundAt(t, tu, clk, tenantSnap(at.Add(45*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got, want := outcomes(d), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
				t.Errorf("next round: %v (%+v), want the policy's change", got, d)
			}
			if n := len(restartsOf(host.Calls)); n != 2 {
				t.Errorf("%d restarts after the next round, want 2", n)
			}
		})
	}
}

// journalText is the journal at j's path.
func journalText(t *testing.T, j *Journal) string {
	t.Helper()
	b, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// At the next start, an MPS original journaled with its client's identity
// whose PID the first snapshot does not list is closed at once where the
// procfs tells the client gone (another boot; no process or another start
// time under a root that shows the GPU's other processes); it is left to
// the rounds only where the procfs shows the same client or cannot tell.
// Before, each was left to the rounds, and an exit before GoneAfter failed
// its restore.
func TestUnlistedClientGoneClosedAtStart(t *testing.T) {
	at := t0.Add(time.Hour)
	const other = "process gone, not restarted: PID 10 (another process holds it now, or none)"
	for _, c := range []struct {
		name   string
		boot   string
		starts map[uint32]uint64
		err    error
		closed string // the restored record's reason; "": left open, to the rounds
	}{
		{"another boot", otherBoot, map[uint32]uint64{10: 500, 8: 50}, nil, "process gone, not restarted: PID 10 (journaled before the host's last boot)"},
		{"no process", testBoot, map[uint32]uint64{8: 50}, nil, other},
		{"another start time", testBoot, map[uint32]uint64{10: 900, 8: 50}, nil, other},
		{"the same client", testBoot, map[uint32]uint64{10: 500, 8: 50}, nil, ""},
		{"a root blind to the GPU's processes", testBoot, map[uint32]uint64{10: 900}, nil, ""},
		{"no process, a root blind to the GPU's", testBoot, map[uint32]uint64{}, nil, ""},
		{"the procfs unreadable", testBoot, nil, errors.New("permission denied"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: c.boot, starts: c.starts, err: c.err}
			tu, j, _ := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
			_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
			if got := restartsOf(host.Calls); len(got) != 0 {
				t.Errorf("restarts %q, want none", got)
			}
			open, text := len(j.Originals()), journalText(t, j)
			if c.closed == "" && open != 1 || c.closed != "" && (open != 0 || !strings.Contains(text, c.closed)) {
				t.Errorf("%d originals open, want closed %q\njournal: %s", open, c.closed, text)
			}
			if w := len(tu.restoreWaits); w != open {
				t.Errorf("%d restores left to the rounds, want %d", w, open)
			}
		})
	}
}

// An MPS original the tuner cannot tell its client by (journaled without
// identity, or an actuator that reads no procfs) whose PID the first
// snapshot does not list is closed as gone at the start, as before the
// rounds waited for a listing: a later snapshot listing its PID, under
// another tenant, is not restarted. Before, it was left to the rounds,
// and that PID restarted.
func TestUnlistedClientWithoutIdentityClosedAtStart(t *testing.T) {
	at := t0.Add(time.Hour)
	id := Identity{Boot: testBoot, Starts: []uint64{500}}
	for _, c := range []struct {
		name string
		host interface{ calls() []string }
		id   Identity
	}{
		{"no identity journaled", &idClients{boot: testBoot, starts: map[uint32]uint64{10: 900, 8: 50}}, Identity{}},
		{"an actuator that reads no procfs", &successorHost{}, id},
	} {
		t.Run(c.name, func(t *testing.T) {
			tu, j, clk := deferredRun(t, c.host, c.id, fixed(nil))
			_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
			if o := j.Originals(); len(o) != 0 {
				t.Errorf("originals %+v open after the start, want it closed as gone", o)
			}
			roundAt(t, tu, clk, tenantSnap(at.Add(30*time.Second), proc{10, "batch"}, proc{8, "batch"}))
			if got := restartsOf(c.host.calls()); len(got) != 0 {
				t.Errorf("restarts %q, want none", got)
			}
			if text := journalText(t, j); !strings.Contains(text, "process gone; nothing to restore") {
				t.Errorf("journal %s, want the original closed as gone", text)
			}
		})
	}
}

func (s *successorHost) calls() []string { return s.Calls }

// The minute an MPS client the start did not find listed is waited for
// runs from the first snapshot that reads its GPU, not from the tuner's
// start, and counts none of the time its GPU was not read: a first
// snapshot a minute after the start, or a read of the GPU after two
// minutes read down, leaves it to the rounds, restored by the next that
// lists it. Before, either closed it as gone at once.
func TestUnlistedClientWaitCountsFromItsGPUsRead(t *testing.T) {
	at := t0.Add(time.Hour)
	none := func(after time.Duration) *tenant.Snapshot { return tenantSnap(at.Add(after), proc{8, "batch"}) }
	down := func(after time.Duration) *tenant.Snapshot {
		return snapshot(at.Add(after), []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil)
	}
	for _, c := range []struct {
		name   string
		start  *tenant.Snapshot   // Recover's
		rounds []*tenant.Snapshot // then, before the one that lists PID 10
	}{
		{"the first snapshot a minute after the start", none(GoneAfter + time.Second), nil},
		{"its GPU read down for two minutes", none(0), []*tenant.Snapshot{down(30 * time.Second), down(GoneAfter), down(2 * GoneAfter), none(2*GoneAfter + 15*time.Second)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
			tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
			clk.Set(c.start.Time)
			_, _ = tu.Recover(context.Background(), c.start)
			last := c.start
			for _, s := range c.rounds {
				roundAt(t, tu, clk, s)
				last = s
			}
			if n := len(j.Originals()); n != 1 {
				t.Fatalf("%d originals open before a snapshot lists PID 10, want it open\njournal: %s", n, journalText(t, j))
			}
			roundAt(t, tu, clk, tenantSnap(last.Time.Add(15*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
				t.Errorf("restarts %q, want %q", got, want)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d originals open after the round that lists PID 10, want it restored", n)
			}
		})
	}
}

// The minute of an unlisted client's wait counts the samples that read
// its GPU, not the time since the last read after one that did not: a
// GPU read on and off (every other sample timed out) closes it as gone
// once its reads have missed it for a minute, as a GPU read throughout
// does. Before, each read after an unread sample started the minute
// again, and the wait, never ending, failed every exit.
func TestUnlistedClientWaitEndsOnAGPUReadOnAndOff(t *testing.T) {
	at := t0.Add(time.Hour)
	none := func(after time.Duration) *tenant.Snapshot { return tenantSnap(at.Add(after), proc{8, "batch"}) }
	down := func(after time.Duration) *tenant.Snapshot {
		return snapshot(at.Add(after), []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil)
	}
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}, err: errors.New("permission denied")}
	tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	clk.Set(at)
	_, _ = tu.Recover(context.Background(), none(0))
	var last time.Duration
	for last = 15 * time.Second; last <= 4*GoneAfter; last += 15 * time.Second {
		s := none(last)
		if last%(30*time.Second) != 0 {
			s = down(last)
		}
		roundAt(t, tu, clk, s)
	}
	host.err = nil
	roundAt(t, tu, clk, tenantSnap(at.Add(last), proc{10, "embed"}, proc{8, "batch"}))
	if got := restartsOf(host.Calls); len(got) != 0 {
		t.Errorf("restarts %q, want none: its reads missed it for a minute", got)
	}
	if n := len(j.Originals()); n != 0 {
		t.Errorf("%d originals open, want it closed as gone\njournal: %s", n, journalText(t, j))
	}
}

// A restore left to the rounds waits on through a round whose readings
// lack its GPU, whose mode by index (another GPU's given as recommend)
// cannot be told then: the next round that lists the client restores it.
// Before, that round dropped the wait for good, the cap left on.
func TestUnlistedClientWaitKeptWhileItsGPUUnread(t *testing.T) {
	at := t0.Add(time.Hour)
	path := filepath.Join(t.TempDir(), "journal")
	j := reopen(t, writeJournal(t, path, mpsOriginal(10, Identity{Boot: testBoot, Starts: []uint64{500}})), path)
	t.Cleanup(func() { _ = j.Close() })
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	clk := gpu.NewManualClock(at)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce,
		GPUModes: map[string]Mode{"1": ModeRecommend}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
	roundAt(t, tu, clk, snapshot(at.Add(15*time.Second), []gpu.Device{{UUID: "GPU-other", Index: 1, Up: true, Mode: gpu.SharingMPS}}, nil))
	roundAt(t, tu, clk, tenantSnap(at.Add(30*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q", got, want)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals %+v open, want PID 10's restored", o)
	}
}

// An MPS original the start left to the rounds, its client not listed
// yet, is counted apart in what the exit does (the exit leaves it open,
// a failed restore), not as restored at exit; once a round restores it,
// nothing is left. Before, it was counted restored at exit.
func TestUnlistedClientCountedApartAtExit(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	tu, _, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
	if got, want := tu.Status().Exit, (ExitRestores{WaitingForListing: 1}); got != want {
		t.Errorf("exit restores %+v while PID 10 is not listed, want %+v", got, want)
	}
	roundAt(t, tu, clk, tenantSnap(at.Add(15*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if got := tu.Status().Exit; got != (ExitRestores{}) {
		t.Errorf("exit restores %+v once PID 10 is restored, want none", got)
	}
}

// An MPS original journaled with its client's identity whose GPU the
// start's snapshot reads down is left to the rounds as an unlisted one:
// counted waiting for a listing, its minute run from the first snapshot
// that reads the GPU, and restored by the first that lists the client.
// Before, the start gave it up at once (a failed restore, "no snapshot
// says whether PID 10 still runs"), no round retried it, and the status
// counted it waiting for a listing all the same.
func TestUnreadGPUAtStartLeftToTheRounds(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	if _, err := tu.Recover(context.Background(), snapshot(at, []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil)); err != nil {
		t.Errorf("start: %v, want its restore left to the rounds", err)
	}
	if got, want := tu.Status().Exit, (ExitRestores{WaitingForListing: 1}); got != want {
		t.Errorf("exit restores %+v after the start, want %+v", got, want)
	}
	roundAt(t, tu, clk, tenantSnap(at.Add(GoneAfter), proc{8, "batch"}))
	roundAt(t, tu, clk, tenantSnap(at.Add(GoneAfter+15*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q", got, want)
	}
	if text := journalText(t, j); len(j.Originals()) != 0 || strings.Contains(text, "restore_failed") {
		t.Errorf("%d originals open, want PID 10's restored, no restore failed\njournal: %s", len(j.Originals()), text)
	}
}

// An unlisted client's original whose restore the exit gave up (its GPU
// read down) is counted failed, not waiting for a listing: nothing waits
// for one any more. Before, it was counted waiting.
func TestGivenUpRestoreNotCountedWaiting(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	tu, _, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
	roundAt(t, tu, clk, snapshot(at.Add(15*time.Second), []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil))
	_, _ = tu.Restore(context.Background())
	if got, want := tu.Status().Exit, (ExitRestores{Failed: 1}); got != want {
		t.Errorf("exit restores %+v after the exit gave it up, want %+v", got, want)
	}
}

// The minute an unlisted client is waited for runs on the snapshots'
// sample times: a sampler that stalls after the start's sample, the
// rounds given that sample again for longer than GoneAfter, does not
// close it as gone; the next fresh sample that lists it restores it.
// Before, the rounds' clock ran the minute and the client kept the cap.
func TestUnlistedClientWaitRunsOnSampleTimes(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}, err: errors.New("permission denied")}
	tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	first := tenantSnap(at, proc{8, "batch"})
	_, _ = tu.Recover(context.Background(), first)
	for i := 1; i <= 6; i++ {
		clk.Set(at.Add(time.Duration(i) * 15 * time.Second))
		if _, err := tu.RunOnce(context.Background(), first); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(j.Originals()); n != 1 {
		t.Fatalf("%d originals open after a minute and a half of one sample, want it open\njournal: %s", n, journalText(t, j))
	}
	host.err = nil
	roundAt(t, tu, clk, tenantSnap(at.Add(105*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q", got, want)
	}
}

// Past its minute of samples not listing it, an unlisted client is closed
// as gone, not restarted, also where the procfs shows its PID with the
// boot ID and start time journaled: a job that left its GPU and runs on,
// waited for, would be for good, every exit failing its restore (shown
// over a day of rounds); one the procfs cannot tell too.
func TestUnlistedClientClosedPastItsMinute(t *testing.T) {
	at := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		err  error // the procfs's, till the listing
	}{
		{"the procfs shows it", nil},
		{"the procfs unreadable", errors.New("permission denied")},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}, err: c.err}
			tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
			_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
			for i := 1; i <= 8; i++ {
				roundAt(t, tu, clk, tenantSnap(at.Add(time.Duration(i)*15*time.Second), proc{8, "batch"}))
			}
			host.err = nil
			roundAt(t, tu, clk, tenantSnap(at.Add(135*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got := restartsOf(host.Calls); len(got) != 0 {
				t.Errorf("restarts %q, want none\njournal: %s", got, journalText(t, j))
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d originals open, want it closed as gone\njournal: %s", n, journalText(t, j))
			}
		})
	}
}

// With --sample.interval longer than --tuner.interval, the round after a
// restore may get the sample the restore's round had, taken before it:
// the target stays held until a round's sample is later than the restore.
// Before, the hold lasted one round, and the next restarted the client
// again, decided from its cap before the restore.
func TestRestoreHoldLastsTillALaterSample(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	tu, _, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed{mpsAction(10, 1, 0.5)})
	tu.o.StaleAfter = StaleAfterFor(30 * time.Second)
	_, _ = tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"}))
	s := tenantSnap(at.Add(30*time.Second), proc{10, "embed"}, proc{8, "batch"})
	roundAt(t, tu, clk, s)
	clk.Set(s.Time.Add(15 * time.Second))
	if _, err := tu.RunOnce(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if n := len(restartsOf(host.Calls)); n != 1 {
		t.Errorf("%d restarts after a round on the restore's sample, want the restore's alone", n)
	}
	roundAt(t, tu, clk, tenantSnap(at.Add(60*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if n := len(restartsOf(host.Calls)); n != 2 {
		t.Errorf("%d restarts after a later sample, want the policy's change made", n)
	}
}

// A restore deferred at start (its client not listed yet) of a tenant
// whose thaw failed waits for the thaw: the round that lists the client
// and fails the thaw again does not restart it (a restart hook meeting
// frozen processes waits on them, up to its timeout), nor a later one;
// the exit, thawing it first, sets the cap back. (Before, the round
// restarted it while the pause was still open.)
func TestDeferredRestoreWaitsForTheThaw(t *testing.T) {
	at := t0.Add(time.Hour)
	path := filepath.Join(t.TempDir(), "journal")
	pause := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 10}, Tenant: "embed", From: encodeValue(Duty(0)), PIDs: []uint32{10}}
	j := reopen(t, writeJournal(t, path, mpsOriginal(10, Identity{Boot: testBoot, Starts: []uint64{500}}), pause), path)
	clk := gpu.NewManualClock(at)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	thaw := &thawFailing{fail: true}
	tu, err := New(Options{Policy: fixed(nil), Enabled: pauseOn, Actuators: ActuatorsOf(host, thaw), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"})); err == nil {
		t.Fatal("Recover: no error, want the failed thaw")
	}
	roundAt(t, tu, clk, tenantSnap(at.Add(30*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if r := restartsOf(host.Calls); slices.Contains(r, "RestartClient(GPU-0,10)") {
		t.Fatalf("embed's client restarted (%q) while embed's thaw fails (%q)", r, thaw.calls)
	}
	roundAt(t, tu, clk, tenantSnap(at.Add(60*time.Second), proc{10, "embed"}, proc{8, "batch"}))
	if r := restartsOf(host.Calls); len(r) != 0 {
		t.Fatalf("restarts %q at the next round, embed's thaw still failed, want none", r)
	}
	thaw.fail = false
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := restartsOf(host.Calls); !slices.Equal(r, []string{"RestartClient(GPU-0,10)"}) {
		t.Errorf("restarts %q at exit, embed thawed (%q), want embed's client set back once", r, thaw.calls)
	}
	if open := len(j.Originals()); open != 0 {
		t.Errorf("%d originals open after the exit, want none", open)
	}
}

// thawFailing is a pause actuator whose calls fail while fail is set.
type thawFailing struct {
	fail  bool
	calls []string
}

func (p *thawFailing) SetPauseDuty(_ context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	p.calls = append(p.calls, fmt.Sprintf("SetPauseDuty(%s,%s,%v,%g)", uuid, tenant, pids, duty))
	if p.fail {
		return errors.New("cgroup.freeze: write error")
	}
	return nil
}
