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

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A revert passes the back-off guard (docs/tuning.md: "an action marked as
// a revert, which no guard holds up"): after a further change of the
// clock lock was refused (busy), a violation gives the clocks back at
// once, not after the back-off.
func TestRevertPassesTheBackoff(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	tg := Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}
	low, lower := ClockRange{MinMHz: 1200, MaxMHz: 1200}, ClockRange{MinMHz: 1000, MaxMHz: 1000}
	pol := &fixed{}
	tu, err := New(Options{Policy: pol, Guards: DefaultGuards(nil, nil), Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		advance time.Duration
		a       Action
		errs    map[string]error
		want    Outcome
	}{
		{0, Action{Target: tg, Current: ClockRange{}, Want: low, Relax: true, Reason: "energy"}, nil, OutcomeApplied},
		{30 * time.Second, Action{Target: tg, Current: low, Want: lower, Relax: true, Reason: "energy, further"}, map[string]error{"LockClocks": gpu.ErrBusy}, OutcomeRefused},
		{10 * time.Second, Action{Target: tg, Current: low, Want: ClockRange{}, Revert: true, Reason: "violation: give the clocks back"}, nil, OutcomeApplied},
	} {
		clk.Advance(step.advance)
		*pol, rec.Errs = fixed{step.a}, step.errs
		ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Outcome != step.want {
			t.Errorf("step %d: %v, want %s", i, ds, step.want)
		}
	}
}

// refusesRevertOnce is a guard that refuses the first revert it is asked.
type refusesRevertOnce struct{ done bool }

func (*refusesRevertOnce) Name() string { return "refuses_revert_once" }
func (g *refusesRevertOnce) Admit(_ *State, a Action, _ time.Time) (bool, string) {
	if !a.Revert || g.done {
		return true, ""
	}
	g.done = true
	return false, "the first revert"
}

// A relaxing change judged worse is reverted, whatever a guard did to the
// revert: a change of the same setting refused by the actuator (busy)
// just before the judgement puts the target in back-off, which the revert
// passes; a revert a guard refuses keeps its judgement, judged again (and
// made) at the next round, not dropped with the change never reverted.
func TestRevertIfWorseJudgedAgainAfterARefusal(t *testing.T) {
	powT := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	for _, tc := range []struct {
		name  string
		busy  bool  // a further change refused just before the judgement
		guard Guard // added to the default chain
	}{
		{name: "back-off after a refusal", busy: true},
		{name: "a guard refuses the revert", guard: &refusesRevertOnce{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			clk := gpu.NewManualClock(t0)
			pol := &fixed{}
			guards := DefaultGuards(nil, nil)
			if tc.guard != nil {
				guards = append(guards, tc.guard)
			}
			tu, err := New(Options{Policy: pol, Guards: guards, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce, RevertAfter: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			usage := []tenant.Usage{{Tenant: "vision", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{8}}}
			var good float64
			reverted := false
			for i := range 30 {
				rec.Errs = nil
				switch {
				case i == 1:
					*pol = fixed{{Target: powT, Current: Watts(700), Want: Watts(490), Relax: true}}
				case i == 8 && tc.busy: // the judgement is due at round 9
					*pol = fixed{{Target: powT, Current: Watts(490), Want: Watts(400)}}
					rec.Errs = map[string]error{"SetPowerLimit": gpu.ErrBusy}
				default:
					*pol = fixed{}
				}
				// vision: never late before the change, 10% late after it
				if good += 90; i <= 1 {
					good += 10
				}
				s := emptySnap(clk.Now())
				s.Usage = usage
				s.SLOs = []tenant.SLOStatus{{Tenant: "vision", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, GoodKnown: true,
					WindowRequests: 100, RequestsTotal: float64(100 * (i + 1)), GoodRequestsTotal: good, Epoch: 1}}}
				ds, err := tu.RunOnce(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if strings.HasPrefix(d.Reason, "revert:") {
						t.Logf("round %d: %s %s", i, d.Outcome, d.Reason)
						reverted = reverted || d.Outcome == OutcomeApplied
					}
				}
				clk.Advance(15 * time.Second)
			}
			if !reverted {
				t.Errorf("the relaxed power limit that made vision late is never reverted (calls %q)", rec.Calls)
			}
		})
	}
}

// A revert passes a back-off left by another change, not the one its own
// failure left: a clock give-back the actuator fails at every try, which
// the policy proposes at every round while a tenant violates its SLO, is
// tried at 0, 30 s, 90 s and 210 s in 5 minutes (before, at every 15 s
// round: 20 tries, 20 warnings and their journal records).
func TestFailingRevertBacksOff(t *testing.T) {
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	giveBack := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{MinMHz: 1200, MaxMHz: 1200}, Want: ClockRange{}, Revert: true, HoldLeft: true,
		Reason: "vision violates its SLO: give the SM clock back"}
	var logBuf bytes.Buffer
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	tu, err := New(Options{Policy: fixed{giveBack}, Guards: DefaultGuards(nil, nil), Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce,
		Journal: j, Logger: log.NewLogfmtLogger(&logBuf)})
	if err != nil {
		t.Fatal(err)
	}
	rec.Errs = map[string]error{"LockClocks": errors.New("nvml: Unknown Error")}
	failed := 0
	for range 20 { // 5 minutes at the default interval
		ds, err := tu.RunOnce(context.Background(), twoClients(clk.Now()))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Outcome == OutcomeFailed {
				failed++
			}
		}
		clk.Advance(DefaultInterval)
	}
	if n, warns := countCalls(rec.Calls, "LockClocks"), strings.Count(logBuf.String(), "level=warn"); n != 4 || failed != 4 || warns != 4 {
		t.Errorf("a revert failing at every try tried %d times in 5 minutes (%d failed decisions, %d warnings, journal of %d bytes), want 4",
			n, failed, warns, len(readFile(t, j.Path())))
	}
}
