package tuner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A pause an earlier run left whose thaw fails at start (the start's
// restore and the first round's thaw) is tried again at every round of
// the run, not only at exit: the round where it takes thaws the tenant,
// closes the pause in the journal and then sets back the tenant's MPS cap
// that waited for the thaw, as the start would have; a thaw that keeps
// failing is tried again each round, each failure a failed decision, and
// at exit. (Before, no round after the first tried it: the tenant stayed
// frozen for the whole run, its cap with it.)
func TestLeftPauseThawRetriedEachRound(t *testing.T) {
	thaw := "SetPauseDuty(GPU-0,train,[7 8],0)"
	for _, tc := range []struct {
		name      string
		fixAt     int        // the round from which the thaw takes (0: never)
		rounds    [][]string // each round's calls after the first
		exit      []string
		openAfter int // originals open in the journal after the rounds
	}{
		{"the thaw takes at the second round", 2,
			[][]string{{thaw, "SetMPSActiveThreads(GPU-0,8,1.0000)", "RestartClient(GPU-0,8)"}, nil}, nil, 0},
		{"the thaw keeps failing", 0,
			[][]string{{thaw}, {thaw}}, []string{thaw}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &pauseAndMPS{}
			clk := gpu.NewManualClock(t0)
			failing := map[string]error{"SetPauseDuty": errors.New("cgroup.freeze: write error")}
			tu, j, _, err := capPausedAndRestore(t, context.Background(), ActuatorsOf(rec), clk, true, func() {
				rec.Calls, rec.Errs = nil, failing
			})
			if err == nil {
				t.Fatal("the restore at start: no error, want the failed thaw")
			}
			at := t0.Add(time.Minute)
			round := func() {
				at = at.Add(15 * time.Second)
				roundAt(t, tu, clk, tenantSnap(at, proc{7, "train"}, proc{8, "train"}))
			}
			round() // the first round: its thaw of the journal's pauses fails too
			for i, want := range tc.rounds {
				rec.Calls = nil
				if i+2 == tc.fixAt {
					rec.Errs = nil
				}
				round()
				if !slices.Equal(rec.Calls, want) {
					t.Errorf("round %d: calls %q, want %q", i+2, rec.Calls, want)
				}
			}
			if got := len(j.Originals()); got != tc.openAfter {
				t.Errorf("open originals in the journal %d, want %d", got, tc.openAfter)
			}
			if tc.fixAt == 0 {
				ds := tu.Status().Recent
				if !slices.ContainsFunc(ds, func(d Decision) bool {
					return d.Knob == gpu.KnobPauseDuty && d.Outcome == OutcomeFailed && d.Time.Equal(at) && strings.Contains(d.Reason, "thaw failed")
				}) {
					t.Errorf("decisions %+v, want the last round's failed thaw", ds)
				}
			}
			rec.Calls, rec.Errs = nil, failing
			_, _ = tu.Restore(context.Background())
			if tc.exit != nil && !slices.Equal(rec.Calls, tc.exit) {
				t.Errorf("at exit: calls %q, want %q", rec.Calls, tc.exit)
			}
		})
	}
}

// The status counts a pause an earlier run left whose thaw failed apart
// from the other failed restores: it is tried again at every round, not
// only at exit.
func TestLeftPauseThawPendingInStatus(t *testing.T) {
	rec := &pauseAndMPS{}
	clk := gpu.NewManualClock(t0)
	tu, _, _, _ := capPausedAndRestore(t, context.Background(), ActuatorsOf(rec), clk, true, func() {
		rec.Errs = map[string]error{"SetPauseDuty": errors.New("cgroup.freeze: write error")}
	})
	roundAt(t, tu, clk, tenantSnap(t0.Add(2*time.Minute), proc{7, "train"}, proc{8, "train"}))
	// the pause, tried again each round; the cap, which waits for it
	if e := tu.Status().Exit; e != (ExitRestores{ThawPending: 1, Failed: 1}) {
		t.Errorf("status %+v, want 1 thaw pending and 1 failed restore", e)
	}
}

// refusingThaws is pauseAndMPS whose thaws (duty 0) fail while refuse is
// set; a pause above 0 takes.
type refusingThaws struct {
	pauseAndMPS
	refuse bool
}

func (p *refusingThaws) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	if err := p.pauseAndMPS.SetPauseDuty(ctx, uuid, tenant, pids, duty); err != nil {
		return err
	}
	if duty == 0 && p.refuse {
		return errors.New("cgroup.freeze: write error")
	}
	return nil
}

// A pause an earlier run left whose thaw fails at start, which the policy
// then pauses again (0.5, it takes) and gives back (0, it takes: the
// tenant is thawed): the tenant's MPS cap, whose restore at start waited
// for the thaw, is set back by the round after, and the status no longer
// counts the pause a failed restore (its original stays open, the
// policy's pause target, set back at exit). (Before, the pause's original
// open held the cap for the whole run, and the status counted the thawed
// pause and the cap as two failed restores.)
func TestPolicyThawSetsBackTheCapThatWaited(t *testing.T) {
	rec := &refusingThaws{refuse: true}
	clk := gpu.NewManualClock(t0)
	tu, j, _, err := capPausedAndRestore(t, context.Background(), ActuatorsOf(rec), clk, true, func() {})
	if err == nil {
		t.Fatal("the restore at start: no error, want the failed thaw")
	}
	at := t0.Add(time.Minute)
	round := func(actions ...Action) {
		at = at.Add(15 * time.Second)
		tu.mu.Lock()
		tu.o.Policy = fixed(actions)
		tu.mu.Unlock()
		roundAt(t, tu, clk, tenantSnap(at, proc{7, "train"}, proc{8, "train"}))
	}
	round()                                             // the first round's thaw fails too
	round(pauseAction("train", gpu.ClassBatch, 0, 0.5)) // the retry fails; the policy's pause takes
	rec.refuse = false
	round(pauseAction("train", gpu.ClassBatch, 0.5, 0)) // the policy's thaw takes
	rec.Calls = nil
	round()
	round()
	if want := []string{"SetMPSActiveThreads(GPU-0,8,1.0000)", "RestartClient(GPU-0,8)"}; !slices.Equal(rec.Calls, want) {
		t.Errorf("the rounds after the policy's thaw: calls %q, want %q (train's cap set back)", rec.Calls, want)
	}
	if e := tu.Status().Exit; e != (ExitRestores{AtExit: 1}) {
		t.Errorf("status %+v, want the pause open for the exit, no failed restore", e)
	}
	if _, err := tu.Restore(context.Background()); err != nil || len(j.Originals()) != 0 {
		t.Errorf("at exit: %v, %d originals open, want none", err, len(j.Originals()))
	}
}
