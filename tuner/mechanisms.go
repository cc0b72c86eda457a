package tuner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// MPSClients is what the tuner needs of MPS: set a client's active-thread
// fraction, then restart the client so that the fraction takes effect (MPS
// applies it to new contexts only).
type MPSClients = gpu.MPSActuator

// Actuators are the mechanisms the executor acts through, one field per
// entry of the mechanism table. A nil field is a mechanism the host lacks:
// a change that needs it is not applied, as not supported
// (gpu.ErrNotSupported), like a change the GPU itself refuses.
type Actuators struct {
	MPS           MPSClients
	TimeSlice     gpu.TimeSliceActuator
	VGPUScheduler gpu.VGPUSchedulerActuator
	ClockPower    gpu.ClockPowerActuator
	// Rebalancer applies a rebalancing plan (tenant moves, MIG layouts) as
	// a whole: a hook on a real host. Where a host has none but can move
	// processes or change MIG layouts itself (the simulator), the plan is
	// applied step by step through Placement and MIG.
	Rebalancer gpu.Rebalancer
	Placement  gpu.PlacementActuator
	MIG        gpu.MIGActuator
	// MIGDrain and Lifecycle let the tuner carry out a MIG relayout itself
	// where there is no hook: drain every instance, set the layout once
	// they are empty, start the processes again.
	MIGDrain  gpu.MIGDrainActuator
	Lifecycle gpu.TenantLifecycleActuator
	// Pause pauses a tenant's processes for part of every period.
	Pause gpu.PauseActuator
}

// Mechanism is one entry of the mechanism table: the actuator interface a
// backend implements for one sharing mechanism, the knobs it drives (the
// names --tuner.disable-knob takes), the field of Actuators it fills, the
// forwarding type that hides the backend behind that interface, and how
// the executor applies a value of its knob.
type Mechanism struct {
	// Name names the mechanism in logs and docs.
	Name string
	// Knobs are the knobs the mechanism drives; Specs say, for each, its
	// unit and the sharing modes of the GPUs it applies to.
	Knobs []gpu.Knob
	Specs []KnobSpec
	// bind sets the mechanism's field of a to impl, behind its forwarding
	// type when seal, if impl implements the interface and the field is
	// still empty; it reports whether impl implements it.
	bind func(a *Actuators, impl any, seal bool) bool
	// bound reports whether a has the mechanism.
	bound func(a *Actuators) bool
	// apply sets one action's value through the bound actuator; only the
	// executor calls it. The settings of a mechanism with apply are
	// journaled before their first change and set back at exit. It is nil
	// for the mechanisms of the slow loop, whose actions carry a plan
	// (Tuner.applyPlan): a tenant moved or a MIG layout changed is not
	// undone.
	apply func(ctx context.Context, ac Actuators, a Action) error
}

// KnobSpec describes one knob of a mechanism: the unit of its values as
// numbers (Numeric; "" for a knob without numbers) and the sharing modes
// of the GPUs it applies to (shown on /tuner, kept in the history; none
// for a knob of the slow loop, which acts across GPUs).
type KnobSpec struct {
	Knob  gpu.Knob
	Unit  string
	Modes []gpu.SharingMode
}

// everyMode is every sharing mode: a knob of the whole GPU.
var everyMode = []gpu.SharingMode{gpu.SharingExclusive, gpu.SharingTimeSlice, gpu.SharingMPS, gpu.SharingMIG, gpu.SharingVGPU}

// knob is a KnobSpec.
func knob(k gpu.Knob, unit string, modes ...gpu.SharingMode) KnobSpec {
	return KnobSpec{Knob: k, Unit: unit, Modes: modes}
}

// mechanism builds a table entry for the actuator interface I held in the
// field field returns.
func mechanism[I any](name string, field func(*Actuators) *I, seal func(I) I, apply func(context.Context, Actuators, Action) error, specs ...KnobSpec) Mechanism {
	knobs := make([]gpu.Knob, len(specs))
	for i, sp := range specs {
		knobs[i] = sp.Knob
	}
	return Mechanism{
		Name: name, Knobs: knobs, Specs: specs, apply: apply,
		bind: func(a *Actuators, impl any, sealed bool) bool {
			x, ok := impl.(I)
			if !ok {
				return false
			}
			if f := field(a); any(*f) == nil {
				if sealed {
					x = seal(x)
				}
				*f = x
			}
			return true
		},
		bound: func(a *Actuators) bool { return any(*field(a)) != nil },
	}
}

// Mechanisms is the mechanism table: adding a knob adds its entry here
// (with the gpu actuator interface and the backends that implement it).
// The order is the order of knobs in flags and metrics.
var Mechanisms = []Mechanism{
	mechanism("mps", func(a *Actuators) *MPSClients { return &a.MPS },
		func(x MPSClients) MPSClients { return mpsDoor{x} },
		applyMPS, knob(gpu.KnobMPSActiveThreads, "ratio", gpu.SharingMPS)),
	mechanism("timeslice", func(a *Actuators) *gpu.TimeSliceActuator { return &a.TimeSlice },
		func(x gpu.TimeSliceActuator) gpu.TimeSliceActuator { return timeSliceDoor{x} },
		applyTimeSlice, knob(gpu.KnobComputeTimeSlice, "level", gpu.SharingTimeSlice)),
	mechanism("vgpu-scheduler", func(a *Actuators) *gpu.VGPUSchedulerActuator { return &a.VGPUScheduler },
		func(x gpu.VGPUSchedulerActuator) gpu.VGPUSchedulerActuator { return vgpuDoor{x} },
		applyVGPUScheduler, knob(gpu.KnobVGPUScheduler, "policy", gpu.SharingVGPU)),
	mechanism("clock-power", func(a *Actuators) *gpu.ClockPowerActuator { return &a.ClockPower },
		func(x gpu.ClockPowerActuator) gpu.ClockPowerActuator { return clockPowerDoor{x} },
		applyClockPower, knob(gpu.KnobLockedClocks, "mhz", everyMode...), knob(gpu.KnobPowerLimit, "watts", everyMode...)),
	mechanism("pause", func(a *Actuators) *gpu.PauseActuator { return &a.Pause },
		func(x gpu.PauseActuator) gpu.PauseActuator { return pauseDoor{x} },
		applyPause, knob(gpu.KnobPauseDuty, "ratio", gpu.SharingMPS, gpu.SharingTimeSlice)),
	mechanism("placement", func(a *Actuators) *gpu.PlacementActuator { return &a.Placement },
		func(x gpu.PlacementActuator) gpu.PlacementActuator { return placementDoor{x} },
		nil, knob(gpu.KnobPlacement, "")),
	mechanism("mig", func(a *Actuators) *gpu.MIGActuator { return &a.MIG },
		func(x gpu.MIGActuator) gpu.MIGActuator { return migDoor{x} },
		nil, knob(gpu.KnobMIGLayout, "", gpu.SharingMIG)),
	mechanism("rebalance", func(a *Actuators) *gpu.Rebalancer { return &a.Rebalancer },
		func(x gpu.Rebalancer) gpu.Rebalancer { return rebalancerDoor{x} },
		nil, knob(gpu.KnobPlacement, ""), knob(gpu.KnobMIGLayout, "", gpu.SharingMIG)),
	mechanism("mig-drain", func(a *Actuators) *gpu.MIGDrainActuator { return &a.MIGDrain },
		func(x gpu.MIGDrainActuator) gpu.MIGDrainActuator { return migDrainDoor{x} }, nil),
	mechanism("lifecycle", func(a *Actuators) *gpu.TenantLifecycleActuator { return &a.Lifecycle },
		func(x gpu.TenantLifecycleActuator) gpu.TenantLifecycleActuator { return lifecycleDoor{x} }, nil),
}

// specOf returns the table's description of knob k.
func specOf(k gpu.Knob) (KnobSpec, bool) {
	for _, m := range Mechanisms {
		for _, sp := range m.Specs {
			if sp.Knob == k {
				return sp, true
			}
		}
	}
	return KnobSpec{}, false
}

// KnobUnit is the unit of a knob's Numeric values ("ratio", "watts",
// "level", "mhz", "policy"), or "" for a knob without numbers.
func KnobUnit(k gpu.Knob) string {
	sp, _ := specOf(k)
	return sp.Unit
}

// KnobsFor are the knobs that apply to a GPU in a sharing mode, in the
// table's order with the knobs of that mode alone before those of every
// mode: an MPS GPU's client caps, a time-sliced GPU's level, a vGPU host's
// scheduler, a MIG GPU's layout, then every GPU's clocks and power.
func KnobsFor(m gpu.SharingMode) []gpu.Knob {
	var own, all []gpu.Knob
	for _, k := range CountedKnobs {
		sp, _ := specOf(k)
		switch {
		case len(sp.Modes) == len(everyMode):
			all = append(all, k)
		case slices.Contains(sp.Modes, m):
			own = append(own, k)
		}
	}
	return append(own, all...)
}

// want returns the action's value as a V, or the error of a policy that
// gave its knob a value of another kind.
func want[V Value](a Action) (V, error) {
	v, ok := a.Want.(V)
	if !ok {
		var zero V
		return zero, fmt.Errorf("tuner: %s takes a %s value, not %T", a.Knob, zero.Kind(), a.Want)
	}
	return v, nil
}

// mechanismOf returns the table entry that applies values of knob k (and
// whose settings are restored).
func mechanismOf(k gpu.Knob) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.apply != nil && slices.Contains(m.Knobs, k) {
			return m, true
		}
	}
	return Mechanism{}, false
}

// ActuatorsOf returns the actuators the backends implement; where several
// implement the same mechanism, the first one is used.
func ActuatorsOf(backends ...any) Actuators { return actuatorsOf(false, backends) }

// SealedActuatorsOf is ActuatorsOf with each actuator behind a forwarding
// type that has its interface's methods and nothing else: a policy cannot
// type-assert its way from an actuator to the backend (the simulator and
// its ground truth) or to another mechanism.
func SealedActuatorsOf(backends ...any) Actuators { return actuatorsOf(true, backends) }

func actuatorsOf(seal bool, backends []any) Actuators {
	var a Actuators
	for _, b := range backends {
		for _, m := range Mechanisms {
			m.bind(&a, b, seal)
		}
	}
	return a
}

// IsActuator reports whether impl implements any mechanism of the table.
func IsActuator(impl any) bool {
	var a Actuators
	for _, m := range Mechanisms {
		if m.bind(&a, impl, false) {
			return true
		}
	}
	return false
}

// KnobsOf lists the knobs an actuator implementation drives, by the
// mechanisms it implements.
func KnobsOf(impl any) []gpu.Knob {
	var ks []gpu.Knob
	var a Actuators
	for _, m := range Mechanisms {
		if m.bind(&a, impl, false) {
			for _, k := range m.Knobs {
				if !slices.Contains(ks, k) {
					ks = append(ks, k)
				}
			}
		}
	}
	return ks
}

// CountedKnobs are the knobs of the mechanism table, in its order: the
// knobs whose action counters start at 0.
var CountedKnobs = tableKnobs()

func tableKnobs() []gpu.Knob {
	var ks []gpu.Knob
	for _, m := range Mechanisms {
		for _, k := range m.Knobs {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	return ks
}

// KnobNames are the names of the knobs the tuner changes, for flags
// (--tuner.disable-knob).
func KnobNames() []string {
	out := make([]string, 0, len(CountedKnobs))
	for _, k := range CountedKnobs {
		out = append(out, string(k))
	}
	return out
}

// ActuatorInfo says which backend drives a knob on this host.
type ActuatorInfo struct {
	Knob    gpu.Knob
	Backend string // "nvml", "sim", "mps", "nvidia-smi", "rebalance-hook", "pause"
}

// NamedActuator is one backend's actuator implementation: Impl
// implements some of the gpu actuator interfaces (gpu.MPSActuator,
// gpu.TimeSliceActuator, gpu.Rebalancer, ...) and gpu.CapabilityLister.
type NamedActuator struct {
	Name string // "nvml", "sim", "mps", "nvidia-smi", "rebalance-hook", "pause"
	Impl any
}

// ImplsOf returns the implementations of bs, for ActuatorsOf.
func ImplsOf(bs []NamedActuator) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		out[i] = b.Impl
	}
	return out
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

// notSupported is the error of a change whose mechanism the host lacks.
func notSupported(k gpu.Knob) error {
	return fmt.Errorf("no backend of this host drives %s: %w", k, gpu.ErrNotSupported)
}

// The forwarding types of SealedActuatorsOf, one per actuator interface.
// Each embeds its interface under an unexported alias, so it has that
// interface's methods, promoted, and nothing else: no exported field, so a
// policy outside the package cannot reach the backend behind it.

type (
	mpsActuator        = gpu.MPSActuator
	timeSliceActuator  = gpu.TimeSliceActuator
	vgpuActuator       = gpu.VGPUSchedulerActuator
	clockPowerActuator = gpu.ClockPowerActuator
	pauseActuator      = gpu.PauseActuator
	placementActuator  = gpu.PlacementActuator
	migActuator        = gpu.MIGActuator
	rebalancer         = gpu.Rebalancer
	migDrainActuator   = gpu.MIGDrainActuator
	lifecycleActuator  = gpu.TenantLifecycleActuator
)

type (
	mpsDoor        struct{ mpsActuator }
	timeSliceDoor  struct{ timeSliceActuator }
	vgpuDoor       struct{ vgpuActuator }
	clockPowerDoor struct{ clockPowerActuator }
	pauseDoor      struct{ pauseActuator }
	placementDoor  struct{ placementActuator }
	migDoor        struct{ migActuator }
	rebalancerDoor struct{ rebalancer }
	migDrainDoor   struct{ migDrainActuator }
	lifecycleDoor  struct{ lifecycleActuator }
)

// DescribeActuated says what drives each knob, one backend after another:
// "sim: compute_timeslice locked_clocks; mps: mps_active_threads".
func DescribeActuated(acts []ActuatorInfo) string {
	var backends []string
	knobs := map[string][]string{}
	for _, a := range acts {
		if _, ok := knobs[a.Backend]; !ok {
			backends = append(backends, a.Backend)
		}
		knobs[a.Backend] = append(knobs[a.Backend], string(a.Knob))
	}
	parts := make([]string, len(backends))
	for i, b := range backends {
		parts[i] = b + ": " + strings.Join(knobs[b], " ")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}
