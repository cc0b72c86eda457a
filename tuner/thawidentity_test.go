package tuner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// idPauseAndMPS is pauseAndMPS that tells processes apart (the boot ID
// and each PID's start time), as the host's procfs does; it freezes no
// cgroup.
type idPauseAndMPS struct {
	pauseAndMPS
	starts map[uint32]uint64
}

func (p *idPauseAndMPS) ProcessStarts(pids []uint32) (string, []uint64, error) {
	return processStarts(testBoot, p.starts, nil, pids)
}

func (p *idPauseAndMPS) Cgroups([]uint32) ([]gpu.Cgroup, error) { return nil, nil }

func (p *idPauseAndMPS) ThawCgroups(context.Context, string, []gpu.Cgroup) ([]gpu.Cgroup, error) {
	return nil, nil
}

// An earlier run paused train (PIDs 7 and 8) and capped infer's MPS
// client PID 8; train's thaw fails at start and at every round after.
// The failed thaw holds the cap's restore only where PID 8 is the
// process the pause froze: where the journal names both processes and
// they differ (train's PID 8 exited and infer's client took the PID),
// infer's client is restarted to its original at start, as the thaw
// passes PID 8 over; where they are the same, or either names none, it
// waits, its reason naming train's pause and the PID it froze. (Before,
// the PID alone told, and infer's client kept the earlier run's cap for
// as long as train's thaw failed, "the pause of its tenant train" said.)
func TestFailedThawHoldsOnlyTheClientItFroze(t *testing.T) {
	const (
		paused = 200 // PID 8's start time as the pause journaled it
		reused = 900 // another process's that holds PID 8 now
	)
	for _, tc := range []struct {
		name        string
		pauseStarts []uint64 // PIDs 7 and 8 as the pause journaled them (nil: none)
		capStart    uint64   // the client's as its cap journaled it (0: none)
		now         uint64   // PID 8's start time now
		held        bool
	}{
		{"PID 8 another's client now", []uint64{100, paused}, reused, reused, false},
		{"the client the pause froze", []uint64{100, paused}, paused, paused, true},
		{"the cap names no client", []uint64{100, paused}, 0, reused, true},
		{"the pause names no processes", nil, reused, reused, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(time.Hour)
			pause := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}}
			if tc.pauseStarts != nil {
				pause = pause.withIdentity(Identity{Boot: testBoot, Starts: tc.pauseStarts})
			}
			capTg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}
			capO := Record{Time: t0.Add(time.Minute), Event: EventOriginal, Target: capTg, Tenant: "infer", From: encodeValue(Fraction(1))}
			if tc.capStart != 0 {
				capO = capO.withIdentity(Identity{Boot: testBoot, Starts: []uint64{tc.capStart}})
			}
			capA := Record{Time: t0.Add(time.Minute), Event: string(OutcomeApplied), Target: capTg, Tenant: "infer", From: encodeValue(Fraction(1)), To: encodeValue(Fraction(0.3))}
			j := crashedJournal(t, pause, capO, capA)
			rec := &idPauseAndMPS{starts: map[uint32]uint64{7: 100, 8: tc.now}}
			rec.Errs = map[string]error{"SetPauseDuty": errors.New("cgroup.freeze: write error")}
			clk := gpu.NewManualClock(at)
			tu, err := New(Options{Policy: fixed(nil), Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tu.Recover(context.Background(), tenantSnap(at, proc{7, "train"}, proc{8, "infer"}))
			for i := 1; i <= 2; i++ {
				roundAt(t, tu, clk, tenantSnap(at.Add(time.Duration(i)*15*time.Second), proc{7, "train"}, proc{8, "infer"}))
			}
			restarts := restartsOf(rec.Calls)
			switch {
			case tc.held && len(restarts) != 0:
				t.Errorf("restarts %q while train's thaw fails, want none: PID 8 may be the process its pause froze", restarts)
			case !tc.held && len(restarts) != 1:
				t.Errorf("restarts %q (calls %q), want infer's client restarted once: PID 8 is not the process train's pause froze", restarts, rec.Calls)
			}
			const why = "train's pause (GPU-0/pause_duty/pid7), which froze PID 8, is still open, its thaw failed"
			if said := err != nil && strings.Contains(err.Error(), why); said != tc.held {
				t.Errorf("the start's restore: %v, want it to say %q: %v", err, why, tc.held)
			}
		})
	}
}
