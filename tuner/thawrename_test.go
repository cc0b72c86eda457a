package tuner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A cap's original and a pause's original of the same processes under two
// tenant names (the cap set before a reload of the tenants file renamed
// train to trainer, the pause after): a failed thaw of trainer's pause
// holds the restart of the client it froze, PID 8, as it holds one of the
// same name. (Before, the names alone told them apart, and the client was
// restarted while its process may be frozen.)
func TestFailedThawHoldsTheCapOfARenamedTenant(t *testing.T) {
	at := t0.Add(time.Hour)
	j := crashedJournal(t,
		Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "train", From: encodeValue(Fraction(1))},
		Record{Time: t0, Event: string(OutcomeApplied), Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "train", From: encodeValue(Fraction(1)), To: encodeValue(Fraction(0.3))},
		Record{Time: t0.Add(time.Minute), Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "trainer", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}})
	rec := &pauseAndMPS{}
	rec.Errs = map[string]error{"SetPauseDuty": errors.New("cgroup.freeze: write error")}
	tu, err := New(Options{Policy: fixed(nil), Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(at), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.Recover(context.Background(), tenantSnap(at, proc{7, "trainer"}, proc{8, "trainer"})); err == nil {
		t.Fatal("Recover: no error, want the failed thaw")
	}
	if r := restartsOf(rec.Calls); len(r) != 0 {
		t.Errorf("restarts %q (calls %q) while trainer's thaw failed, want none: PID 8 is among the processes its pause froze", r, rec.Calls)
	}
	if got := len(j.Originals()); got != 2 {
		t.Errorf("open originals %d, want 2 (the pause and the cap waiting for it)", got)
	}
	rec.Calls, rec.Errs = nil, nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetPauseDuty(GPU-0,trainer,[7 8],0)", "SetMPSActiveThreads(GPU-0,8,1.0000)", "RestartClient(GPU-0,8)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("at exit: calls %q, want %q", rec.Calls, want)
	}
}
