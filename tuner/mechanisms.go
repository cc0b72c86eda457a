package tuner

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Actuators are the actuators the executor acts through: for each
// mechanism of the table (Mechanisms) that the host has, the backend that
// implements its gpu interface. A mechanism missing is one the host lacks:
// a change that needs it is not applied, as not supported
// (gpu.ErrNotSupported), like a change the GPU itself refuses. Only the
// executor reaches an actuator (actuator): Actuators has no field and no
// method that gives one back, so a policy handed them cannot call a setter
// or type-assert its way to the backend (the simulator and its ground
// truth).
type Actuators struct {
	// by holds, under each mechanism's interface type, the backend bound
	// to it, which implements that interface.
	by map[reflect.Type]any
}

// actuator returns the host's actuator of interface I, if it has one.
func actuator[I any](ac Actuators) (I, bool) {
	x, ok := ac.by[reflect.TypeFor[I]()].(I)
	return x, ok
}

// has reports whether the host has an actuator of interface I.
func has[I any](ac Actuators) bool {
	_, ok := actuator[I](ac)
	return ok
}

// Knobs are the knobs of the mechanisms the actuators have, in the
// table's order.
func (ac Actuators) Knobs() []gpu.Knob {
	var ks []gpu.Knob
	for _, m := range Mechanisms {
		if _, ok := ac.by[m.actuator]; ok {
			ks = appendNew(ks, m.Knobs...)
		}
	}
	return ks
}

// Mechanism is one entry of the mechanism table: the gpu actuator
// interface a backend implements for one sharing mechanism, the knobs it
// drives (the names --tuner.disable-knob takes) and how the executor
// applies a value of its knob through that interface.
type Mechanism struct {
	// Name names the mechanism in logs and docs.
	Name string
	// Knobs are the knobs the mechanism drives; Specs say, for each, its
	// unit and the sharing modes of the GPUs it applies to.
	Knobs []gpu.Knob
	Specs []KnobSpec
	// actuator is the mechanism's gpu interface.
	actuator reflect.Type
	// apply sets one action's value through the host's actuator of the
	// mechanism, or answers not supported where the host has none; only
	// the executor calls it. The settings of a mechanism with apply are
	// journaled before their first change and set back at exit. It is nil
	// for the mechanisms of the slow loop, whose actions carry a plan
	// (Tuner.applyPlan): a tenant moved or a MIG layout changed is not
	// undone.
	apply func(ctx context.Context, ac Actuators, a Action) error
	// hold is set for a mechanism whose settings stop a tenant's
	// processes (the pause): the executor journals the processes a change
	// acts on, with the original before the first change, before a change
	// may reach processes not journaled yet and after it took, so that a
	// restore after a crash lets every one of them go.
	hold *processHold
}

// processHold says, for a mechanism whose settings stop processes, which
// processes a change acts on and whether it lets them go.
type processHold struct {
	pids     func(a Action) []uint32
	releases func(a Action) bool
}

// holding returns m with the processes its settings stop described by h.
func (m Mechanism) holding(h processHold) Mechanism {
	m.hold = &h
	return m
}

// holdOf returns how the mechanism of knob k holds processes, false for a
// knob whose settings stop none.
func holdOf(k gpu.Knob) (processHold, bool) {
	if m, ok := mechanismOf(k); ok && m.hold != nil {
		return *m.hold, true
	}
	return processHold{}, false
}

// KnobSpec describes one knob of a mechanism: the unit of its values as
// numbers (Numeric; "" for a knob without numbers) and the sharing modes
// of the GPUs it applies to (shown on /tuner, kept in the history; none
// for a knob of the slow loop, which acts across GPUs).
type KnobSpec struct {
	Knob  gpu.Knob
	Unit  string
	Modes []gpu.SharingMode
	// perProcess is set for a knob whose setting of a process ends with
	// it (ofProcess): the tuner forgets what it keeps of the setting once
	// the process is gone (forgetGone).
	perProcess bool
}

// ofProcess returns sp for a knob whose setting of a process ends with the
// process: an MPS client's cap (its context ends with it), a process's
// placement. A pause names its tenant by a PID that may be gone
// (State.Paused) and a relayout's stopped processes are missing while
// stopped: theirs are not.
func (sp KnobSpec) ofProcess() KnobSpec {
	sp.perProcess = true
	return sp
}

// endsWithProcess reports whether a setting of knob k on a process ends
// with the process.
func endsWithProcess(k gpu.Knob) bool {
	sp, _ := specOf(k)
	return sp.perProcess
}

// everyMode is every sharing mode: a knob of the whole GPU.
var everyMode = []gpu.SharingMode{gpu.SharingExclusive, gpu.SharingTimeSlice, gpu.SharingMPS, gpu.SharingMIG, gpu.SharingVGPU}

// knob is a KnobSpec.
func knob(k gpu.Knob, unit string, modes ...gpu.SharingMode) KnobSpec {
	return KnobSpec{Knob: k, Unit: unit, Modes: modes}
}

// mechanism builds the table's entry of the mechanism whose backends
// implement the actuator interface I: apply (nil for a mechanism of the
// slow loop) sets an action's value through the host's I.
func mechanism[I any](name string, apply func(ctx context.Context, act I, a Action) error, specs ...KnobSpec) Mechanism {
	m := Mechanism{Name: name, Specs: specs, actuator: reflect.TypeFor[I]()}
	for _, sp := range specs {
		m.Knobs = append(m.Knobs, sp.Knob)
	}
	if apply != nil {
		m.apply = func(ctx context.Context, ac Actuators, a Action) error {
			act, ok := actuator[I](ac)
			if !ok {
				return notSupported(a.Knob)
			}
			if why := withheld(act, a); why != "" {
				return fmt.Errorf("%s: %w", why, gpu.ErrNotSupported)
			}
			return apply(ctx, act, a)
		}
	}
	return m
}

// withheld says why act withholds the knob of a, a change that is not a
// revert, on its GPU (gpu.KnobWithholder): refused with no call, as the
// knob's availability says (the MPS controller without a restart hook,
// whose client cap would be pending for good). A revert, a restore, sets
// back what an earlier call set. "" where it may be tried.
func withheld(act any, a Action) string {
	if a.Revert {
		return ""
	}
	return withheldBy(act, a.GPU, a.Knob)
}

// valued adapts set, which sets a knob to a value of type V, into the
// apply of a table entry: an action whose value is of another type is an
// error of the policy that gave it.
func valued[I any, V Value](set func(ctx context.Context, act I, a Action, v V) error) func(context.Context, I, Action) error {
	return func(ctx context.Context, act I, a Action) error {
		v, err := want[V](a)
		if err != nil {
			return err
		}
		return set(ctx, act, a, v)
	}
}

// implements reports whether impl implements the mechanism's interface.
func (m Mechanism) implements(impl any) bool {
	return impl != nil && reflect.TypeOf(impl).Implements(m.actuator)
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
func ActuatorsOf(backends ...any) Actuators {
	a := Actuators{by: map[reflect.Type]any{}}
	for _, b := range backends {
		for _, m := range Mechanisms {
			if _, ok := a.by[m.actuator]; !ok && m.implements(b) {
				a.by[m.actuator] = b
			}
		}
	}
	return a
}

// IsActuator reports whether impl implements any mechanism of the table.
func IsActuator(impl any) bool {
	return slices.ContainsFunc(Mechanisms, func(m Mechanism) bool { return m.implements(impl) })
}

// KnobsOf lists the knobs an actuator implementation drives, by the
// mechanisms it implements.
func KnobsOf(impl any) []gpu.Knob { return ActuatorsOf(impl).Knobs() }

// CountedKnobs are the knobs of the mechanism table, in its order: the
// knobs whose action counters start at 0.
var CountedKnobs = tableKnobs()

func tableKnobs() []gpu.Knob {
	var ks []gpu.Knob
	for _, m := range Mechanisms {
		ks = appendNew(ks, m.Knobs...)
	}
	return ks
}

// appendNew appends to ks those of more it does not hold yet.
func appendNew(ks []gpu.Knob, more ...gpu.Knob) []gpu.Knob {
	for _, k := range more {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
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
