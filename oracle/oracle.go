// Package oracle is the yardstick policy of the scenario tables: it
// searches, by replaying a scenario in virtual time, for the best static
// setting of each phase of the scenario (between two of its tenant
// events) and for the best placement, and then runs what it found. It
// sees the whole scenario ahead, which no real policy can: its figures
// bound what a policy could get from the scenario's knobs.
//
// It searches only settings the tuner could give: an MPS cap within the
// share bounds the run's tenants file gives the process's tenant (those
// autotune's Bounds guard admits), "uncapped" read as share.max where
// that is below 1.
//
// What it found (a Plan) runs as every other policy runs: a schedule
// (a tuner.Decider) decides each phase's settings at the phase's start
// as tuner actions, and the tuner's engine and executor apply them,
// behind no guard. Each replay of the search runs the candidate plan the
// same way, so that the settings a replay ranks are applied as the final
// run applies them.
//
// The oracle is registered with simrun under Name, so that a run names it
// like a tuner policy.
package oracle

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Name is the oracle's name among the policies of a run: it searches, by
// replaying the scenario, for the best static setting of each phase and
// then runs it.
const Name = "oracle"

// The oracle's search space, kept coarse so that a search replays a
// scenario at most a few dozen times per phase: MPS active-thread caps
// per tenant on a grid (every combination with two tenants or fewer per
// GPU; with more, one tenant at a time, each given the best caps found
// for those before it), clipped to the tenant's share bounds
// (capsWithin), every compute time-slice level, every vGPU
// scheduler policy, on a MIG GPU every order of its instances' profiles
// in which each tenant's memory fits (a relayout at the start of a phase:
// the executor drains every instance, sets the layout once they are
// empty and starts the tenants again, each in its instance of the new
// layout), the SM clock locked at its maximum or
// not, and moving one tenant off an MPS or time-sliced GPU that misses an
// SLO or caps a tenant without one to the GPU of the same sharing mode
// with the most memory to spare.
var (
	capGridFew  = []float64{0.1, 0.2, 0.3, 0.5, 0.75, 1} // two tenants or fewer
	capGridMany = []float64{0.1, 0.25, 0.5, 1}
	timeSlices  = []gpu.TimeSliceLevel{gpu.TimeSliceDefault, gpu.TimeSliceShort, gpu.TimeSliceMedium, gpu.TimeSliceLong}
	vgpuPolicys = []gpu.VGPUPolicy{gpu.VGPUPolicyBestEffort, gpu.VGPUPolicyEqualShare, gpu.VGPUPolicyFixedShare}
)

// gpuSetting is one GPU's static setting over a phase; zero fields leave
// the GPU as it is.
type gpuSetting struct {
	Caps      map[uint32]float64 // MPS active-thread fraction by client PID
	TimeSlice gpu.TimeSliceLevel
	VGPU      gpu.VGPUPolicy // first phase only: the scheduler is fixed once VMs run
	Lock      bool           // SM clock locked at its maximum
	Layout    []string       // MIG profiles by instance; nil keeps the layout
}

// move is a placement: the tenant with this index runs on GPU To from the
// start.
type move struct{ Tenant, To int }

// phase is a stretch of the scenario between two of its events.
type phase struct {
	Start, End time.Duration
	GPUs       []gpuSetting
}

// Plan is what the oracle found.
type Plan struct {
	Phases []phase
	Moves  []move
	maxMHz []uint32 // by GPU: the clock a lock holds
	// Replays is how many replays the search ran.
	Replays int
}

// score ranks a setting of one GPU (or the host) over a phase: the SLOs
// met over the run up to the phase's end first (the run report judges an
// SLO over the whole run: a relayout whose restarts cost a tenant its SLO
// inside the phase may keep it over the run; a tenant that never served
// has not met it), then those held inside the phase (as a goodput window
// is judged), then the goodput of the tenants without an SLO (their work in the
// minutes in which every SLO on their GPU held, as the run report counts
// it; each relative to the best any candidate gave it), then the SLO
// tenants' attainment, then the same tenants' work in every minute (which
// tells candidates apart where no minute holds). Work is the report's:
// a training job's steps that a restart threw away and that it has not
// redone by the phase's end are not work (phaseRun).
type score struct {
	runMet     int
	met        int
	goodput    float64
	attainment float64
	work       float64
}

func (a score) better(b score) bool {
	if a.runMet != b.runMet {
		return a.runMet > b.runMet
	}
	if a.met != b.met {
		return a.met > b.met
	}
	if d := a.goodput - b.goodput; d > 1e-9 || d < -1e-9 {
		return d > 0
	}
	if d := a.attainment - b.attainment; d > 1e-9 || d < -1e-9 {
		return d > 0
	}
	return a.work > b.work+1e-9
}

// oracleSearch is one search over replays of a scenario.
type oracleSearch struct {
	sc     *sim.Scenario
	seed   int64
	dur    time.Duration
	phases []phase
	maxMHz []uint32 // by GPU; 0: no clock lock
	// actuators wraps a replay's simulator into the actuators its
	// executor acts through.
	actuators func(*sim.Simulator) tuner.Actuators
	// shares are the share bounds of each process's tenant, by PID; nil
	// without a tenants file.
	shares map[uint32]share
	// Replays counts the replays the search ran.
	Replays int
}

// phaseBounds cuts [0, dur) at the scenario's tenant events.
func phaseBounds(sc *sim.Scenario, dur time.Duration) []phase {
	cuts := []time.Duration{0}
	for _, e := range sc.Events {
		at := time.Duration(e.At)
		if at > 0 && at < dur && (e.Action == "rate" || e.Action == "start" || e.Action == "stop") {
			cuts = append(cuts, at)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	ps := make([]phase, len(cuts))
	for i, c := range cuts {
		ps[i] = phase{Start: c, End: dur, GPUs: make([]gpuSetting, len(sc.GPUs))}
		if i+1 < len(cuts) {
			ps[i].End = cuts[i+1]
		}
	}
	return ps
}

// Find searches for the best static setting per phase and GPU of sc run
// on seed for dur, phase by phase (each given the settings chosen before
// it), knob by knob, and then for the best placement, among the settings
// the tenants file cfg (nil: none) lets the tuner give (shares). Its
// replays act on their simulators through the actuators act wraps them
// into (nil: the simulator itself).
func Find(ctx context.Context, sc *sim.Scenario, cfg *tenant.Config, seed int64, dur time.Duration, act func(*sim.Simulator) tuner.Actuators) (*Plan, error) {
	if act == nil {
		act = func(s *sim.Simulator) tuner.Actuators { return tuner.ActuatorsOf(s) }
	}
	o := &oracleSearch{sc: sc, seed: seed, dur: dur, phases: phaseBounds(sc, dur), actuators: act}
	var err error
	if o.shares, err = shares(sc, cfg); err != nil {
		return nil, err
	}
	if err := o.probe(ctx); err != nil {
		return nil, err
	}
	p := &Plan{Phases: o.phases, maxMHz: o.maxMHz}
	for pi := range p.Phases {
		for stage := 0; ; stage++ {
			c := o.primaryCandidates(p, pi, stage)
			if c == nil {
				break
			}
			if err := o.searchKnob(ctx, p, pi, c); err != nil {
				return nil, err
			}
		}
		if err := o.searchKnob(ctx, p, pi, o.clockCandidates(p, pi)); err != nil {
			return nil, err
		}
	}
	if err := o.searchMoves(ctx, p); err != nil {
		return nil, err
	}
	p.Replays = o.Replays
	return p, nil
}

// probe reads each GPU's maximum SM clock.
func (o *oracleSearch) probe(ctx context.Context) error {
	s, err := simrun.NewSimulator(o.sc, o.seed)
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := s.Sample(ctx)
	if err != nil {
		return err
	}
	o.maxMHz = make([]uint32, len(o.sc.GPUs))
	for _, d := range r.Devices {
		if d.Index < len(o.maxMHz) && d.SMClockMaxHz != nil {
			o.maxMHz[d.Index] = uint32(*d.SMClockMaxHz / 1e6)
		}
	}
	return nil
}

func init() { simrun.RegisterPlanner(Name, plan) }

// plan is the oracle's simrun.Planner: it finds the plan of the run's
// scenario, seed and duration, and runs its placements with its schedule
// on the tuner's engine, which applies its settings phase by phase.
func plan(ctx context.Context, s simrun.Setup) (*simrun.Plan, error) {
	if s.Step != runStep {
		// its replays step as a run at runStep does: the plan would be
		// scored at another step than it was searched at
		return nil, fmt.Errorf("--step %v: the %s policy searches by replays that step as a run at the default step of %v does; leave --step out", s.Step, Name, runStep)
	}
	p, err := Find(ctx, s.Scenario, s.Tenants, s.Seed, s.Duration, s.Actuators)
	if err != nil {
		return nil, err
	}
	return &simrun.Plan{
		Scenario: placed(s.Scenario, p),
		Policy:   func() tuner.Policy { return policy(p) },
		Write:    func(w io.Writer) { p.Write(w, s.Scenario) },
	}, nil
}
