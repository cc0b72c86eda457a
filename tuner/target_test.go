package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A target is what the tuner set (or, in recommend mode, recommends): a
// change a guard refused, or that failed, is a decision and leaves the
// target as it was; a pause thawed has the target 0, and its thaw is a
// restore (counted with the restores, not the policy's actions), from the
// duty it was set to.
func TestTargetIsWhatIsSet(t *testing.T) {
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(500), Reason: "test"}
	for _, tc := range []struct {
		name    string
		mode    Mode
		action  Action
		killAt  int // the round (from 1) the kill switch is engaged at, 0 for never
		failing bool
		rounds  int
		want    Value // the target, nil for none
		wmode   Mode
		counts  map[ActionKey]uint64
		thawed  bool
	}{
		{name: "applied", mode: ModeEnforce, action: pauseAction("train", gpu.ClassBatch, 0, 0.5), rounds: 1, want: Duty(0.5), wmode: ModeEnforce,
			counts: map[ActionKey]uint64{{gpu.KnobPauseDuty, OutcomeApplied}: 1}},
		{name: "refused by a guard", mode: ModeEnforce, action: pauseAction("train", gpu.ClassBatch, 0, 0.5), killAt: 1, rounds: 1,
			counts: map[ActionKey]uint64{{gpu.KnobPauseDuty, OutcomeGuarded}: 1}},
		{name: "recommended", mode: ModeRecommend, action: pauseAction("train", gpu.ClassBatch, 0, 0.5), rounds: 1, want: Duty(0.5), wmode: ModeRecommend,
			counts: map[ActionKey]uint64{{gpu.KnobPauseDuty, OutcomeRecommended}: 1}},
		{name: "failed", mode: ModeEnforce, action: power, failing: true, rounds: 1,
			counts: map[ActionKey]uint64{{gpu.KnobPowerLimit, OutcomeFailed}: 1}},
		{name: "thawed at the kill switch, the next pause refused", mode: ModeEnforce, action: pauseAction("train", gpu.ClassBatch, 0, 0.5), killAt: 2, rounds: 2,
			want: Duty(0), wmode: ModeEnforce, thawed: true,
			counts: map[ActionKey]uint64{{gpu.KnobPauseDuty, OutcomeApplied}: 1, {gpu.KnobPauseDuty, OutcomeGuarded}: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			if tc.failing {
				rec.Errs = map[string]error{"SetPowerLimit": errors.New("boom")}
			}
			kill := &KillSwitch{}
			tu, err := New(Options{Policy: fixed{tc.action}, Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn,
				Actuators: ActuatorsOf(rec, &pauseRecorder{}), Clock: gpu.NewManualClock(t0), Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			var last []Decision
			for r := 1; r <= tc.rounds; r++ {
				kill.Engaged.Store(tc.killAt > 0 && r >= tc.killAt)
				if last, err = tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Duration(r)*time.Second))); err != nil {
					t.Fatal(err)
				}
			}
			s := tu.Status()
			var got []Setting
			for _, x := range s.Settings {
				if x.Knob == tc.action.Knob {
					got = append(got, x)
				}
			}
			switch {
			case tc.want == nil && len(got) > 0:
				t.Errorf("target %v (%s), want none: nothing was set", got[0].Target, got[0].Mode)
			case tc.want != nil && (len(got) != 1 || got[0].Target != tc.want || got[0].Mode != tc.wmode):
				t.Errorf("targets %+v, want %v (%s)", got, tc.want, tc.wmode)
			}
			for k, n := range s.Counts.Actions {
				if k.Knob == tc.action.Knob && n != tc.counts[k] {
					t.Errorf("actions %s/%s: %d, want %d", k.Knob, k.Outcome, n, tc.counts[k])
				}
			}
			var thaws []Decision
			for _, d := range last {
				if d.Outcome == OutcomeRestored {
					thaws = append(thaws, d)
				}
			}
			if tc.thawed {
				if len(thaws) != 1 || thaws[0].From != "50%" || thaws[0].To != "0%" || !thaws[0].Applied {
					t.Errorf("thaws %+v, want one restored 50%% -> 0%%", thaws)
				}
				if s.Counts.Restores != 1 {
					t.Errorf("%d restores counted, want the thaw's", s.Counts.Restores)
				}
			} else if len(thaws) > 0 || s.Counts.Restores != 0 {
				t.Errorf("thaws %+v, %d restores, want none", thaws, s.Counts.Restores)
			}
		})
	}
}

// The status says what the exit does with each setting changed: restored
// (in enforce mode, and a pause in any mode), tried again after a failed
// restore, or left as it is outside enforce mode, its original open in the
// journal.
func TestExitRestores(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		gpuMode map[string]Mode
		journal bool // a power limit original an earlier run left open
		policy  []Action
		failing bool
		want    ExitRestores
	}{
		{name: "nothing changed", mode: ModeEnforce, want: ExitRestores{}},
		{name: "enforce, a pause set", mode: ModeEnforce, policy: []Action{pauseAction("train", gpu.ClassBatch, 0, 0.5)}, want: ExitRestores{AtExit: 1}},
		{name: "recommend, an original from an earlier run", mode: ModeRecommend, journal: true, want: ExitRestores{KeptOpen: 1}},
		{name: "enforce, its restore at start failed", mode: ModeEnforce, journal: true, failing: true, want: ExitRestores{Failed: 1}},
		{name: "enforce, restored at start", mode: ModeEnforce, journal: true, want: ExitRestores{}},
		// another GPU in enforce does not make the exit restore this one's
		{name: "its GPU in recommend, another in enforce", mode: ModeRecommend, gpuMode: map[string]Mode{"GPU-other": ModeEnforce}, journal: true, want: ExitRestores{KeptOpen: 1}},
		{name: "its GPU in recommend, the host in enforce", mode: ModeEnforce, gpuMode: map[string]Mode{uuid0: ModeRecommend}, journal: true, want: ExitRestores{KeptOpen: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journalWithPowerOriginal(t, tc.journal)
			defer j.Close()
			rec := &recorder{}
			if tc.failing {
				rec.Errs = map[string]error{"SetPowerLimit": errors.New("no such GPU")}
			}
			tu, err := New(Options{Policy: fixed(tc.policy), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Journal: j,
				Actuators: ActuatorsOf(rec, &pauseRecorder{}), Clock: gpu.NewManualClock(t0), Mode: tc.mode, GPUModes: tc.gpuMode})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Second))) // (a failed restore at start is returned)
			s := tu.Status()
			if s.Exit != tc.want || s.Unrestored != tc.want.AtExit+tc.want.Failed+tc.want.KeptOpen {
				t.Errorf("exit %+v of %d unrestored, want %+v", s.Exit, s.Unrestored, tc.want)
			}
		})
	}
}

// A restore says what it sets back from: the value this run set, or
// nothing where this run set none (an original an earlier run left in the
// journal, restored at start).
func TestRestoreFrom(t *testing.T) {
	powerTarget := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	for _, tc := range []struct {
		name     string
		journal  bool // a power limit original an earlier run left open
		policy   []Action
		from, to string
	}{
		{name: "set by this run, restored at exit", policy: []Action{{Target: powerTarget, Current: Watts(700), Want: Watts(500), Reason: "test"}}, from: "500W", to: "700W"},
		{name: "paused by this run, thawed at exit", policy: []Action{pauseAction("train", gpu.ClassBatch, 0, 0.4)}, from: "40%", to: "0%"},
		{name: "left by an earlier run, restored at start", journal: true, from: "", to: "700W"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journalWithPowerOriginal(t, tc.journal)
			defer j.Close()
			tu, err := New(Options{Policy: fixed(tc.policy), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Journal: j,
				Actuators: ActuatorsOf(&recorder{}, &pauseRecorder{}), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.journal {
				if ds, err = tu.Restore(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			var got []Decision
			for _, d := range ds {
				if d.Outcome == OutcomeRestored {
					got = append(got, d)
				}
			}
			if len(got) != 1 || got[0].From != tc.from || got[0].To != tc.to {
				t.Errorf("restores %+v, want one from %q to %q", got, tc.from, tc.to)
			}
		})
	}
}

// A device setting whose change the GPU refused (busy, or not supported)
// was not changed: its original is closed at once, so neither the exit nor
// the next start tries to set back a value in force (a vGPU scheduler
// refused while VMs run would be refused again, and each restore would wait
// out its deadline). An original kept from an earlier change, or a change
// that failed, still is restored.
func TestRefusedChangeLeavesNothingToRestore(t *testing.T) {
	power := func(cur, want Watts) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: cur, Want: want, Reason: "test"}
	}
	for _, tc := range []struct {
		name       string
		rounds     []Action // one per round
		errs       []error  // SetPowerLimit's error in each round
		unrestored int      // after the rounds, and at the next start
	}{
		{name: "refused", rounds: []Action{power(700, 500)}, errs: []error{fmt.Errorf("VMs run: %w", gpu.ErrBusy)}},
		{name: "not supported", rounds: []Action{power(700, 500)}, errs: []error{gpu.ErrNotSupported}},
		{name: "failed", rounds: []Action{power(700, 500)}, errs: []error{errors.New("boom")}, unrestored: 1},
		{name: "applied, then the next change refused", rounds: []Action{power(700, 500), power(500, 400)},
			errs: []error{nil, fmt.Errorf("VMs run: %w", gpu.ErrBusy)}, unrestored: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			rec := &recorder{}
			round := 0
			tu, err := New(Options{Policy: deciderFunc(func(*State) []Action { return []Action{tc.rounds[round]} }), Guards: []Guard{Bounds{}}, Journal: j,
				Actuators: ActuatorsOf(rec), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			for round = range tc.rounds {
				rec.Errs = map[string]error{"SetPowerLimit": tc.errs[round]}
				if tc.errs[round] == nil {
					rec.Errs = nil
				}
				_, _ = tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Duration(round+1)*time.Minute)))
			}
			if got := tu.Status().Unrestored; got != tc.unrestored {
				t.Errorf("%d settings left to restore, want %d", got, tc.unrestored)
			}
			j.Close()
			// the next start, the GPU still refusing
			j = openJournal(t, path)
			defer j.Close()
			rec2 := &recorder{}
			rec2.Errs = map[string]error{"SetPowerLimit": fmt.Errorf("VMs run: %w", gpu.ErrBusy)}
			next, err := New(Options{Policy: fixed(nil), Guards: []Guard{Bounds{}}, Journal: j,
				Actuators: ActuatorsOf(rec2), Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			if got := next.Status().Unrestored; got != tc.unrestored {
				t.Errorf("the next start finds %d settings to restore, want %d", got, tc.unrestored)
			}
		})
	}
}

// journalWithPowerOriginal opens a new journal holding, with left, the
// power limit original (700 W) an earlier run left open.
func journalWithPowerOriginal(t *testing.T, left bool) *Journal {
	t.Helper()
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	if left {
		if err := j.Append(Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(700))}); err != nil {
			t.Fatal(err)
		}
	}
	return j
}
