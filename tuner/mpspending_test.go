package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// noRestartHook is the MPS controller's answer to a client restart on a
// host without --mps.restart-hook (the default).
var noRestartHook = map[string]error{"RestartClient": fmt.Errorf("no restart hook configured (--mps.restart-hook): %w", gpu.ErrNotSupported)}

// checkRestoredPending checks that the decisions d hold one MPS restore,
// restored and pending until the client's next context, that err is nil
// (the exit status stays 0), that it counted no restore failure (failed
// were counted before it) and that the journal holds no original open, a
// restored record saying pending.
func checkRestoredPending(t *testing.T, tu *Tuner, j *Journal, d []Decision, err error, failed uint64) {
	t.Helper()
	if err != nil {
		t.Errorf("restore: %v, want none", err)
	}
	if len(d) != 1 || d[0].Outcome != OutcomeRestored || !strings.Contains(d[0].Reason, whyPending) {
		t.Errorf("decisions %+v, want the cap restored, pending", d)
	}
	if n := tu.Status().Counts.RestoreFailures - failed; n != 0 {
		t.Errorf("%d restore failures counted, want none", n)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals left open: %+v", o)
	}
	if text := journalText(t, j); !strings.Contains(text, `"event":"restored"`) || !strings.Contains(text, whyPending) {
		t.Errorf("journal has no restored record saying pending:\n%s", text)
	}
}

// noHookHost is a host without an MPS client restart (no
// --mps.restart-hook, the default): the client cap withheld, a restart
// not supported.
func noHookHost() *recorder {
	return &recorder{fakeControl{Errs: noRestartHook, NoRestartHook: mps.NoRestartHook}}
}

// On a host without an MPS client restart (no --mps.restart-hook, the
// default) a cap an earlier run set (with a restart hook) is restored
// by setting the original back, pending until the client starts a new
// context (which, started by its own supervisor, gets no cap of the
// exporter's), settled as restored, pending, at exit and at the next
// start alike: the original closed (a later call would make the same call
// again, and no call of the tuner's restarts the client there), no failure
// counted, the exit status 0. Before, every restore of an MPS cap there
// failed ("MPS fraction pending: the host has no client restart"): a
// restore failure counted at every exit and start, the original open for
// good, the exit status non-zero. (A cap of this run's is refused there,
// untried: TestMPSClientCapWithoutRestartHook. At exit: the earlier run's
// cap whose restore at this start failed, kept open, a policy's cap of the
// client refused with no call.)
func TestMPSRestorePendingWithoutRestartHook(t *testing.T) {
	t.Run("at exit", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal")
		j := reopen(t, writeJournal(t, path, mpsOriginal(7, Identity{})), path)
		rec := noHookHost()
		rec.Errs = map[string]error{"SetMPSActiveThreads": errors.New("MPS control daemon not answering")}
		clk := gpu.NewManualClock(t0.Add(time.Hour))
		tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.2)}, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := tu.Recover(ctx, emptySnap(clk.Now())); err == nil {
			t.Fatal("the start's restore succeeded, want it failed")
		}
		failed := tu.Status().Counts.RestoreFailures
		rec.Errs, rec.Calls = noRestartHook, nil
		clk.Advance(time.Minute)
		d, err := tu.RunOnce(ctx, emptySnap(clk.Now()))
		if err != nil || len(d) != 1 || d[0].Outcome != OutcomeRefused || !strings.Contains(d[0].Reason, mps.NoRestartHook) {
			t.Fatalf("round: %+v, %v; want the cap refused: %s", d, err, mps.NoRestartHook)
		}
		if o := j.Originals(); len(rec.Calls) != 0 || len(o) != 1 {
			t.Fatalf("calls %q, originals %+v; want none, the earlier run's kept", rec.Calls, o)
		}
		clk.Advance(time.Minute)
		d, err = tu.Restore(ctx)
		checkRestoredPending(t, tu, j, d, err, failed)
		if n := tu.Status().Counts.Restores; n != 1 { // (no reading after the exit confirms it)
			t.Errorf("%d restores counted, want the pending one", n)
		}
		if want := []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)"}; !slices.Equal(rec.Calls, want) {
			t.Errorf("calls %q, want %q", rec.Calls, want)
		}
		j.Close()
		if o := openJournal(t, path).Originals(); len(o) != 0 {
			t.Errorf("the next start finds %+v open", o)
		}
	})
	t.Run("at the next start", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal")
		j := reopen(t, writeJournal(t, path, mpsOriginal(7, Identity{})), path)
		rec := noHookHost()
		clk := gpu.NewManualClock(t0.Add(time.Hour))
		tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
		if err != nil {
			t.Fatal(err)
		}
		d, err := tu.Recover(context.Background(), emptySnap(clk.Now()))
		checkRestoredPending(t, tu, j, d, err, 0)
	})
}

// A restore of an MPS cap deferred to a round (the start's first
// snapshot did not list the client) on a host without client restarts is
// settled as restored, pending, as at exit; the tuner holds the original
// pending, as it holds a change's, so the round after it reads the client
// at its original, not at the cap its running context keeps (the
// reading): a policy sees it at 100%, not at the earlier run's 40%, and
// its cap is refused there, untried, no original journaled (readings
// that keep contradicting it for a minute are believed then:
// TestMPSRestorePendingContradicted). (Kept as the
// reading says, the client would read as capped already; on a host whose
// caps were tried, a later cap would journal 40% as the original, and the
// exit would "restore" the client to it.)
func TestMPSRestorePendingInRound(t *testing.T) {
	at := t0.Add(time.Hour)
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
	host.Errs, host.NoRestartHook = noRestartHook, mps.NoRestartHook
	var read []Fraction // the client's fraction as the policy reads it
	var decide deciderFunc = func(s *State) []Action {
		tg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 10}
		for _, d := range s.UpDevices() {
			for _, p := range d.Processes {
				if p.PID == tg.PID {
					read = append(read, s.MPSFraction(tg, p.MPSActiveThreads))
					return []Action{{Target: tg, Tenant: "embed", Current: read[len(read)-1], Want: Fraction(0.5), Restart: true, Reason: "test"}}
				}
			}
		}
		return nil
	}
	tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
	if _, err := tu.Recover(context.Background(), tenantSnap(at, batch(8))); err != nil {
		t.Fatal(err)
	}
	capped := 0.4 // the earlier run's cap, in the client's running context
	listed := func(at time.Time) *tenant.Snapshot { return readingClient(at, &capped) }
	d := roundAt(t, tu, clk, listed(at.Add(30*time.Second)))
	checkRestoredPending(t, tu, j, d, nil, 0)
	tu.o.Policy = decide
	d = roundAt(t, tu, clk, listed(at.Add(45*time.Second)))
	if !slices.Equal(read, []Fraction{1}) {
		t.Errorf("the policy read the client at %v, want 100%% (the original set back, pending), not the reading", read)
	}
	if len(d) != 1 || d[0].Outcome != OutcomeRefused || !strings.Contains(d[0].Reason, mps.NoRestartHook) {
		t.Errorf("decisions %+v, want the cap refused: %s", d, mps.NoRestartHook)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals after the refused cap %+v, want none", o)
	}
}

// A restore settled pending on a host without client restarts whose
// client's readings keep contradicting it (its running context keeps the
// earlier run's 40%: started by that run's hook with the cap in its
// environment) is taken as not made once they have for a minute: the
// pending value dropped (the policy reads the client at 40%, as it is),
// the original open again, in the journal too, one failure counted and a
// warning saying the client keeps 40% until it is restarted by hand or a
// restart hook is configured; no call is made again, in the rounds or at
// exit, which leaves the original open, says so in its error (the exit
// status non-zero) and counts no failure again. The restore is counted
// once: failed, not also restored, and /tuner lists its decision as failed,
// reopened. A reading that shows the original once (a new context)
// settles it, counted restored; one after the reopen closes the original
// as restored. Before, the original was closed, no failure counted, and
// the policy read the client at 100% for its lifetime while every reading
// said 40%; then, once reopened, the restore counted both restored and
// failed, the exit said nothing, and a new context left the original open.
func TestMPSRestorePendingContradicted(t *testing.T) {
	for _, c := range []struct {
		name    string
		reading float64 // after the first round
		later   float64 // after two minutes of rounds
		kept    bool
	}{
		{"the cap kept", 0.4, 0.4, true},
		{"a new context", 1, 1, false},
		{"a new context after the reopen", 0.4, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := t0.Add(time.Hour)
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
			host.Errs, host.NoRestartHook = noRestartHook, mps.NoRestartHook
			tg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 10}
			var read []Fraction // the client's fraction as the policy reads it
			var decide deciderFunc = func(s *State) []Action {
				for _, d := range s.UpDevices() {
					for _, p := range d.Processes {
						if p.PID == tg.PID {
							read = append(read, s.MPSFraction(tg, p.MPSActiveThreads))
						}
					}
				}
				return nil
			}
			var logged strings.Builder
			tu, j, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed(nil))
			tu.o.Logger = log.NewLogfmtLogger(&logged)
			if _, err := tu.Recover(context.Background(), tenantSnap(at, batch(8))); err != nil {
				t.Fatal(err)
			}
			reading := 0.4 // the earlier run's cap, in the client's running context
			listed := func(at time.Time) *tenant.Snapshot { return readingClient(at, &reading) }
			checkRestoredPending(t, tu, j, roundAt(t, tu, clk, listed(at.Add(30*time.Second))), nil, 0)
			tu.o.Policy = decide
			host.Calls = nil
			reopened := c.reading != 1
			for i := range 240 { // an hour of rounds
				roundAt(t, tu, clk, listed(at.Add(45*time.Second+time.Duration(i)*15*time.Second)))
				reading = c.reading
				if i >= 8 {
					reading = c.later
				}
			}
			want := Fraction(c.later)
			if !c.kept {
				want = 1
			}
			if read[0] != 1 || read[len(read)-1] != want {
				t.Errorf("the policy read the client at %v first, %v last; want 100%%, then %v", read[0], read[len(read)-1], want)
			}
			failures := map[bool]uint64{true: 1}[reopened]
			if n := tu.Status().Counts; n.RestoreFailures != failures || n.Restores != 1-failures {
				t.Errorf("%d restore failures, %d restores counted; want %d, %d", n.RestoreFailures, n.Restores, failures, 1-failures)
			}
			outcome := map[bool]Outcome{false: OutcomeRestored, true: OutcomeFailed}[reopened]
			if r := tu.Status().Recent; len(r) == 0 || r[0].Outcome != outcome || reopened != strings.Contains(r[0].Reason, "reopened") {
				t.Errorf("decisions %+v, want the restore's %s", r, outcome)
			}
			if o := j.Originals(); c.kept && (len(o) != 1 || o[0].Target != tg || o[0].Value != Fraction(1)) || !c.kept && len(o) != 0 {
				t.Errorf("originals open %+v, want 100%% on PID 10 open: %v", o, c.kept)
			}
			if got := strings.Count(logged.String(), "the client keeps 40% until it is restarted by hand, a restart hook is configured"); reopened && got != 1 || !reopened && got != 0 {
				t.Errorf("the cap kept said %d times\n%s", got, logged.String())
			}
			if got := strings.Count(logged.String(), "the client reads it again"); got != map[bool]int{true: 1}[reopened && !c.kept] {
				t.Errorf("the original read again said %d times\n%s", got, logged.String())
			}
			// the runner's exit, whose error makes the exit status non-zero
			last := listed(clk.Now())
			r := NewRunner(tu, nil, clk, 0, func() *tenant.Snapshot { return last }, nil)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.Run(ctx)
			if err := r.RestoreAtExit(); c.kept != (err != nil && strings.Contains(err.Error(), "did not take")) {
				t.Errorf("restore at exit: %v, want an error: %v", err, c.kept)
			}
			if n := tu.Status().Counts.RestoreFailures; len(host.Calls) != 0 || n != failures {
				t.Errorf("calls %q, %d failures counted; want none, %d", host.Calls, n, failures)
			}
			if o := j.Originals(); len(o) != map[bool]int{true: 1}[c.kept] {
				t.Errorf("originals open after the exit %+v", o)
			}
		})
	}
}

// readingClient is a snapshot at at of embed's MPS client 10, its
// fraction read as *reading, and batch's 8.
func readingClient(at time.Time, reading *float64) *tenant.Snapshot {
	s := tenantSnap(at, embed(10), batch(8))
	s.Readings.Devices[0].Processes[0].MPSActiveThreads = reading
	return s
}
