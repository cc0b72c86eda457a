package tuner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A change the journal does not take, while it cannot be written, is no
// change: it spends neither the rate's tokens nor the round's cap, and each
// such decision says the journal is why, as the GPU's round does; the
// first change after the repair is made at once. (Before, the budgets were
// spent ahead of the journal: the outage's later decisions and rounds
// said "refused by rate" or by the cap, and the first change after the
// repair waited for the rate's tokens.)
func TestJournalOutageSpendsNoBudget(t *testing.T) {
	power := func(w Watts) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: w, Reason: "test"}
	}
	for _, c := range []struct {
		name    string
		guards  []Guard
		actions []Action
		rounds  int // during the outage
	}{
		{"rate", []Guard{Bounds{}, NewRate(time.Hour, 1)}, []Action{power(490)}, 3},
		{"cap", []Guard{Bounds{}, &Cap{Max: 1}}, []Action{power(490), power(500)}, 2},
		{"default chain", DefaultGuards(nil, &RevertHold{Hold: time.Minute}), []Action{power(490)}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			rec := &recorder{}
			tu, clk := newTestTuner(t, ModeEnforce, rec, c.actions, j, c.guards...)
			failWrites(t)
			for i := range c.rounds {
				ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != len(c.actions) {
					t.Fatalf("outage round %d: decisions %+v, want %d", i, ds, len(c.actions))
				}
				for _, d := range ds {
					if d.Outcome != OutcomeRecommended || d.Guard != "" || !strings.Contains(d.Reason, journalHeld) {
						t.Errorf("outage round %d: %s by %q (%s), want recommended for the journal", i, d.Outcome, d.Guard, d.Reason)
					}
				}
				s := tu.Status()
				if n := s.Counts.Refusals[GuardRate] + s.Counts.Refusals[GuardCap]; n != 0 {
					t.Errorf("outage round %d: %d refusals by the budgets", i, n)
				}
				if len(s.GPUs) != 1 || s.GPUs[0].Kind != RoundRecommend || !strings.Contains(s.GPUs[0].Why, journalHeld) {
					t.Errorf("outage round %d: the GPU's round %+v does not say the journal holds it", i, s.GPUs)
				}
				clk.Advance(time.Second)
			}
			if len(rec.Calls) != 0 {
				t.Fatalf("changed during the outage: %q", rec.Calls)
			}
			writeFile = (*os.File).Write
			ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
			if err != nil || len(ds) == 0 || ds[0].Outcome != OutcomeApplied {
				t.Fatalf("the first round after the repair: %+v, %v; want the change applied", ds, err)
			}
		})
	}
}

// A change recommended only because the journal cannot be written is
// logged at info once, when the outage starts, and again when the change
// decided differs, at debug while it repeats; "writable again" at info at
// the repair, and a later outage is logged again. (Before, it was logged
// at info every round: once a second at --tuner.interval=1s.)
func TestJournalOutageLoggedOnce(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	out := &strings.Builder{}
	clk := gpu.NewManualClock(t0)
	power := func(w Watts) fixed {
		return fixed{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: w, Reason: "test"}}
	}
	tu, err := New(Options{Policy: power(490), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: clk, Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
	if err != nil {
		t.Fatal(err)
	}
	infos := func() (n int) {
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "level=info") && strings.Contains(l, `msg="tuner decision"`) && strings.Contains(l, "outcome=recommended") {
				n++
			}
		}
		return n
	}
	round := func(p fixed) {
		t.Helper()
		tu.o.Policy = p
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	failWrites(t)
	for _, c := range []struct {
		name string
		p    fixed
		want int // info lines of recommended decisions so far
	}{
		{"the outage starts", power(490), 1},
		{"it repeats", power(490), 1},
		{"it repeats again", power(490), 1},
		{"the change differs", power(480), 2},
		{"which repeats", power(480), 2},
	} {
		round(c.p)
		if n := infos(); n != c.want {
			t.Fatalf("%s: %d recommended decisions logged at info, want %d:\n%s", c.name, n, c.want, out)
		}
	}
	writeFile = (*os.File).Write
	round(fixed(nil))
	if !strings.Contains(out.String(), `level=info msg="tuner journal writable again`) {
		t.Errorf("the repair is not logged at info:\n%s", out)
	}
	failWrites(t)
	round(power(480))
	if n := infos(); n != 3 {
		t.Errorf("a second outage with the same change: %d recommended decisions logged at info, want 3:\n%s", n, out)
	}
}

// switchable is a policy whose actions the test changes between rounds.
type switchable struct{ acts []Action }

func (*switchable) Name() string             { return "switchable" }
func (s *switchable) Decide(*State) []Action { return s.acts }

// lowerThenCrash is a run with the journal at path that lowers the power
// limit from 700 W to 490 W and crashes (no restore).
func lowerThenCrash(t *testing.T, path string) {
	t.Helper()
	j := openJournal(t, path)
	defer j.Close() // (a crash)
	pl := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	tu, err := New(Options{Policy: fixed{{Target: pl, Current: Watts(700), Want: Watts(490), Reason: "test"}},
		Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
}

// A restore whose restored record could not be written (a full disk, the
// journal's file system read-only at start) drops the original from
// memory and leaves it open in the journal. The tuner's next change of
// the setting closes it first, then journals the fresh original (the
// value in force then, an operator's since the restore): a start after a
// crash sets back that, not the value from before the restore. Where the
// restored record cannot be written then either, the change is not made.
// (The fresh original was left out, "the first original stays", and the
// next start set the stale value over the operator's.)
func TestJournalOutageRestoreClosedBeforeFreshOriginal(t *testing.T) {
	restoredFails := func(f *os.File, b []byte) (int, error) {
		if bytes.Contains(b, []byte(`"event":"restored"`)) {
			return 0, syscall.ENOSPC
		}
		return f.Write(b)
	}
	for _, tc := range []struct {
		name string
		// after is the journal's writes once the operator set 650 W
		after   func(*os.File, []byte) (int, error)
		changed bool  // whether the tuner lowers the operator's 650 W
		want    Value // the power limit's original the journal holds open
	}{
		{"journal writable again", (*os.File).Write, true, Watts(650)},
		{"restored records still unwritable", restoredFails, false, Watts(700)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			p := filepath.Join(t.TempDir(), "journal")
			pl := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
			ctx := context.Background()

			lowerThenCrash(t, p)

			// Run 2: the start's restore sets 700 W back; its restored
			// record cannot be written.
			j := openJournal(t, p)
			writeFile = func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
			rec := &recorder{}
			clk := gpu.NewManualClock(t0.Add(time.Hour))
			pol := &switchable{}
			tu, err := New(Options{Policy: pol, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			tu.Recover(ctx, emptySnap(clk.Now())) // (its restored record not written: an error)
			if !slices.Equal(rec.Calls, []string{"SetPowerLimit(GPU-0,700)"}) {
				t.Fatalf("the start's calls: %q, want the power limit set back to 700 W", rec.Calls)
			}
			writeFile = tc.after
			// An operator sets 650 W; the tuner lowers it to 455 W.
			clk.Advance(10 * time.Minute)
			pol.acts = []Action{{Target: pl, Current: Watts(650), Want: Watts(455), Reason: "test"}}
			for range 3 {
				if _, err := tu.RunOnce(ctx, emptySnap(clk.Now())); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
			}
			if changed := slices.Contains(rec.Calls, "SetPowerLimit(GPU-0,455)"); changed != tc.changed {
				t.Errorf("the operator's 650 W lowered: %v, want %v (calls %q)", changed, tc.changed, rec.Calls)
			}
			j.Close() // crash

			// Run 3: what the next start sets back.
			j = openJournal(t, p)
			defer j.Close()
			var open []Value
			for _, o := range j.Originals() {
				if o.Target == pl {
					open = append(open, o.Value)
				}
			}
			if len(open) != 1 || open[0] != tc.want {
				t.Errorf("the journal holds %v open as the power limit's original, want %v", open, tc.want)
			}
		})
	}
}

// A restore whose restored record could not be written (a full disk at
// start) keeps that record and writes it once the journal can be written
// again: at the first round that finds it writable (its probe), or at the
// exit where no round did. The setting is the operator's since (650 W
// over the 700 W the restore set back); the tuner never touches it again,
// and the next start sets nothing over it. Before, the original stayed
// open after the repair and a clean exit, and the next start set 700 W
// over the operator's 650 W. Where the journal still cannot be written at
// exit, the original stays open for the next start, as before.
func TestJournalOutageRestoredRecordWrittenOnceWritable(t *testing.T) {
	full := func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
	free := (*os.File).Write
	for _, tc := range []struct {
		name string
		// the journal's writes in the rounds after the start, and at exit
		rounds, atExit func(*os.File, []byte) (int, error)
		byRound        bool     // written before the exit
		next           []string // the next start's calls
	}{
		{"a round finds the journal writable", free, free, true, nil},
		{"the exit finds it writable", full, free, false, nil},
		{"still unwritable at exit", full, full, false, []string{"SetPowerLimit(GPU-0,700)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			p := filepath.Join(t.TempDir(), "journal")
			ctx := context.Background()

			lowerThenCrash(t, p)

			// Run 2: the start's restore sets 700 W back while the disk is
			// full; it is freed, an operator sets 650 W, and the tuner
			// changes nothing.
			j := openJournal(t, p)
			writeFile = full
			clk := gpu.NewManualClock(t0.Add(time.Hour))
			var buf bytes.Buffer
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: clk, Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&buf)})
			if err != nil {
				t.Fatal(err)
			}
			tu.Recover(ctx, emptySnap(clk.Now())) // (its restored record not written: an error)
			if n := len(j.Originals()); n != 1 {
				t.Fatalf("%d originals open after the start's restore on a full disk, want 1", n)
			}
			writeFile = tc.rounds
			for range 3 {
				clk.Advance(time.Minute)
				if _, err := tu.RunOnce(ctx, emptySnap(clk.Now())); err != nil {
					t.Fatal(err)
				}
			}
			if closed := len(j.Originals()) == 0; closed != tc.byRound {
				t.Errorf("original closed before the exit: %v, want %v", closed, tc.byRound)
			}
			writeFile = tc.atExit
			if _, err := tu.Restore(ctx); err != nil { // a clean exit
				t.Fatal(err)
			}
			j.Close()
			writeFile = (*os.File).Write
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if late := strings.Contains(string(b), whyWrittenLate); late != (tc.next == nil) {
				t.Errorf("a restored record journaled late: %v, want %v; log:\n%s", late, tc.next == nil, buf.String())
			}
			if warned := strings.Contains(buf.String(), "the next start sets them back again"); warned != (tc.next != nil) {
				t.Errorf("the exit warned of restored records left unwritten: %v, want %v; log:\n%s", warned, tc.next != nil, buf.String())
			}

			// Run 3: the next start.
			j = openJournal(t, p)
			defer j.Close()
			rec := &recorder{}
			clk3 := gpu.NewManualClock(t0.Add(3 * time.Hour))
			tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec), Journal: j, Clock: clk3, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			tu.Recover(ctx, emptySnap(clk3.Now()))
			if !slices.Equal(rec.Calls, tc.next) {
				t.Errorf("the next start's calls %q, want %q (the operator's 650 W in force)", rec.Calls, tc.next)
			}
		})
	}
}
