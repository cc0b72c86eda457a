package tuner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
