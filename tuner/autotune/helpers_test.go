package autotune

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

const uuid0 = "GPU-0"

// The builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)

// checkActions fails t unless acts set exactly want (target=value, in
// order) and, where reason is not empty, the first one's reason holds it.
func checkActions(t *testing.T, acts []tuner.Action, want []string, reason string) {
	t.Helper()
	var got []string
	for _, a := range acts {
		got = append(got, a.Target.String()+"="+a.Want.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if reason != "" && !strings.Contains(acts[0].Reason, reason) {
		t.Errorf("reason %q, want %q in it", acts[0].Reason, reason)
	}
}

// What the tuner set on GPU-0 at tunersSetAt, ten minutes before the
// scenes' now (scene.state), its original kept (the journal's after a
// restart): the settings a GPU without a latency tenant gets back.
var tunersSetAt = t0.Add(50 * time.Minute)

// tunersPause: embed paused 80% (was 70%).
func tunersPause(s *tuner.State) {
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true}
	s.Originals[pauseT.String()] = tuner.Duty(0)
	c := tuner.Change{At: tunersSetAt, From: tuner.Duty(0.7), To: tuner.Duty(0.8)}
	s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
}

// tunersCap: embed's MPS cap (its original kept).
func tunersCap(s *tuner.State) {
	s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}.String()] = tuner.Fraction(1)
}

// tunersLevel: the short time slice.
func tunersLevel(s *tuner.State) {
	levelT := tuner.Target{GPU: uuid0, Knob: gpu.KnobComputeTimeSlice}
	s.Originals[levelT.String()] = tuner.Level(gpu.TimeSliceDefault)
	s.Changes[levelT.DomainKey()] = tuner.Change{At: tunersSetAt, From: tuner.Level(gpu.TimeSliceDefault), To: tuner.Level(gpu.TimeSliceShort)}
}

// tunersPower: the power limit lowered from 700 W to 490 W.
func tunersPower(s *tuner.State) {
	powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	s.Originals[powT.String()] = tuner.Watts(700)
	s.Changes[powT.DomainKey()] = tuner.Change{At: tunersSetAt, From: tuner.Watts(700), To: tuner.Watts(490)}
}

// acting is what of acts the policy does not hold back (Action.Held).
func acting(acts []tuner.Action) []tuner.Action {
	return slices.DeleteFunc(slices.Clone(acts), func(a tuner.Action) bool { return a.Held != "" })
}

// runningSince is the policy New makes, its first decision taken at at
// (on a host without GPUs): it has run since then, and a GPU none of
// whose latency tenants it has seen is not one a tenant may have been on
// before it started, once that tenant's SLO window has passed since at.
func runningSince(at time.Time) *Autotune {
	p := New()
	p.Decide(&tuner.State{Now: at, Snapshot: snapshot(at, nil, nil)})
	return p
}
