package tuner

import (
	"context"
	"fmt"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// MPSClients is what a policy needs of MPS: set a client's active-thread
// fraction, then restart the client so that the fraction takes effect (MPS
// applies it to new contexts only). Every gpu.MPSActuator is one.
type MPSClients interface {
	SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error
	RestartClient(ctx context.Context, uuid string, pid uint32) error
}

var _ MPSClients = gpu.MPSActuator(nil)

// Actuators are the mechanisms a policy acts through. A nil field is a
// mechanism the host lacks: a change that needs it is not applied, as not
// supported (gpu.ErrNotSupported), like a change the GPU itself refuses.
type Actuators struct {
	MPS           MPSClients
	VGPUScheduler gpu.VGPUSchedulerActuator
	TimeSlice     gpu.TimeSliceActuator
	ClockPower    gpu.ClockPowerActuator
	// Rebalancer applies a rebalancing plan (tenant moves, MIG layouts) as
	// a whole: a hook on a real host. Where a host has none but can move
	// processes or change MIG layouts itself (the simulator), the plan is
	// applied step by step through Placement and MIG (see PlanApplier).
	Rebalancer gpu.Rebalancer
	Placement  gpu.PlacementActuator
	MIG        gpu.MIGActuator
	// MIGDrain and Lifecycle let the tuner carry out a MIG relayout itself
	// where there is no hook: drain every instance, set the layout once
	// they are empty, start the processes again.
	MIGDrain  gpu.MIGDrainActuator
	Lifecycle gpu.TenantLifecycleActuator
}

// ActuatorsOf returns the actuators the backends implement; where several
// implement the same mechanism, the first one is used.
func ActuatorsOf(backends ...any) Actuators {
	var a Actuators
	for _, b := range backends {
		if m, ok := b.(MPSClients); ok && a.MPS == nil {
			a.MPS = m
		}
		if v, ok := b.(gpu.VGPUSchedulerActuator); ok && a.VGPUScheduler == nil {
			a.VGPUScheduler = v
		}
		if t, ok := b.(gpu.TimeSliceActuator); ok && a.TimeSlice == nil {
			a.TimeSlice = t
		}
		if c, ok := b.(gpu.ClockPowerActuator); ok && a.ClockPower == nil {
			a.ClockPower = c
		}
		if r, ok := b.(gpu.Rebalancer); ok && a.Rebalancer == nil {
			a.Rebalancer = r
		}
		if p, ok := b.(gpu.PlacementActuator); ok && a.Placement == nil {
			a.Placement = p
		}
		if m, ok := b.(gpu.MIGActuator); ok && a.MIG == nil {
			a.MIG = m
		}
		if d, ok := b.(gpu.MIGDrainActuator); ok && a.MIGDrain == nil {
			a.MIGDrain = d
		}
		if l, ok := b.(gpu.TenantLifecycleActuator); ok && a.Lifecycle == nil {
			a.Lifecycle = l
		}
	}
	return a
}

// rebalancer returns the plan's actuator: the Rebalancer, else one made of
// Placement and MIG; nil when the host has neither.
func (a Actuators) rebalancer() gpu.Rebalancer {
	if a.Rebalancer != nil {
		return a.Rebalancer
	}
	if a.Placement != nil || a.MIG != nil {
		return PlanApplier{Placement: a.Placement, MIG: a.MIG}
	}
	return nil
}

// PlanApplier applies a rebalancing plan step by step: each move through
// Placement (by PID), then each MIG layout through MIG. It is the
// Rebalancer of a host that has no rebalancing hook but moves processes
// itself (the simulator). It stops at the first step that fails.
type PlanApplier struct {
	Placement gpu.PlacementActuator
	MIG       gpu.MIGActuator
}

// Rebalance implements gpu.Rebalancer. A dry run changes nothing.
func (p PlanApplier) Rebalance(ctx context.Context, plan gpu.Plan) error {
	if plan.DryRun {
		return nil
	}
	for _, m := range plan.Moves {
		if p.Placement == nil || m.PID == 0 || m.ToUUID == "" {
			return fmt.Errorf("move of %s (PID %d) to %q: %w", m.Tenant, m.PID, m.ToUUID, notSupported(gpu.KnobPlacement))
		}
		if err := p.Placement.MoveProcess(ctx, m.PID, m.ToUUID); err != nil {
			return fmt.Errorf("move of %s (PID %d) to %s: %w", m.Tenant, m.PID, m.ToUUID, err)
		}
	}
	for _, l := range plan.MIG {
		if p.MIG == nil {
			return fmt.Errorf("MIG layout of %s: %w", l.UUID, notSupported(gpu.KnobMIGLayout))
		}
		if err := p.MIG.ConfigureMIG(ctx, l.UUID, l.Profiles); err != nil {
			return fmt.Errorf("MIG layout of %s: %w", l.UUID, err)
		}
	}
	return nil
}

// KnobsOf lists the knobs an actuator implementation drives, by the
// actuator interfaces it implements.
func KnobsOf(impl any) []gpu.Knob {
	var ks []gpu.Knob
	if _, ok := impl.(MPSClients); ok {
		ks = append(ks, gpu.KnobMPSActiveThreads)
	}
	if _, ok := impl.(gpu.TimeSliceActuator); ok {
		ks = append(ks, gpu.KnobComputeTimeSlice)
	}
	if _, ok := impl.(gpu.VGPUSchedulerActuator); ok {
		ks = append(ks, gpu.KnobVGPUScheduler)
	}
	if _, ok := impl.(gpu.ClockPowerActuator); ok {
		ks = append(ks, gpu.KnobLockedClocks, gpu.KnobPowerLimit)
	}
	_, reb := impl.(gpu.Rebalancer)
	if _, ok := impl.(gpu.PlacementActuator); ok || reb {
		ks = append(ks, gpu.KnobPlacement)
	}
	if _, ok := impl.(gpu.MIGActuator); ok || reb {
		ks = append(ks, gpu.KnobMIGLayout)
	}
	return ks
}

// ActuatorInfo says which backend drives a knob on this host.
type ActuatorInfo struct {
	Knob    gpu.Knob
	Backend string // "nvml", "sim", "mps", "nvidia-smi", "rebalance-hook"
}

// NamedActuator is one backend's actuator implementation.
type NamedActuator struct {
	Name string
	Impl any
}

// DescribeActuators returns, for every knob some backend drives, the
// backend that drives it: the first one, as ActuatorsOf chooses. Sorted
// by knob.
func DescribeActuators(bs []NamedActuator) []ActuatorInfo {
	seen := map[gpu.Knob]bool{}
	var out []ActuatorInfo
	for _, b := range bs {
		for _, k := range KnobsOf(b.Impl) {
			if !seen[k] {
				seen[k] = true
				out = append(out, ActuatorInfo{Knob: k, Backend: b.Name})
			}
		}
	}
	slices.SortFunc(out, func(a, b ActuatorInfo) int {
		if a.Knob < b.Knob {
			return -1
		}
		if a.Knob > b.Knob {
			return 1
		}
		return 0
	})
	return out
}

// MPSClientState is what an MPS actuator knows of one client: the
// fraction set for its next context (pending) and its running context's
// (effective), each nil when unknown.
type MPSClientState struct {
	UUID      string
	PID       uint32
	Pending   *float64
	Effective *float64
}

// MPSStateSource reports the MPS actuator's pending and effective
// fractions (on a real host, the MPS control daemon's controller). It is
// given each snapshot first, so that it may take the effective fractions
// the readings report.
type MPSStateSource interface {
	MPSStates(snap *tenant.Snapshot) []MPSClientState
}

// notSupported is the error of a change whose mechanism the host lacks.
func notSupported(k gpu.Knob) error {
	return fmt.Errorf("no backend of this host drives %s: %w", k, gpu.ErrNotSupported)
}
