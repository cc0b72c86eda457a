package tuner

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// vgpuOnly has the vGPU scheduler and nothing else, as the NVML backend
// has no MPS or time-slice actuator.
type vgpuOnly struct{ f fakeControl }

func (v *vgpuOnly) SetVGPUScheduler(ctx context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return v.f.SetVGPUScheduler(ctx, uuid, s)
}

func TestActuatorsOf(t *testing.T) {
	full, other, vo := &fakeControl{}, &fakeControl{}, &vgpuOnly{}
	tests := []struct {
		name          string
		backends      []any
		mps, vgpu, ts any // want; nil for none
	}{
		{"none", nil, nil, nil, nil},
		{"not an actuator", []any{struct{}{}}, nil, nil, nil},
		{"one backend has all", []any{full}, full, full, full},
		{"first wins", []any{full, other}, full, full, full},
		{"partial backend first", []any{vo, full}, full, vo, full},
		{"partial backend alone", []any{vo}, nil, vo, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ActuatorsOf(tc.backends...)
			for _, c := range []struct {
				what      string
				got, want any
			}{{"MPS", boundOf[gpu.MPSActuator](a), tc.mps}, {"VGPUScheduler", boundOf[gpu.VGPUSchedulerActuator](a), tc.vgpu}, {"TimeSlice", boundOf[gpu.TimeSliceActuator](a), tc.ts}} {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

// boundOf is the actuator of interface I a holds, or nil.
func boundOf[I any](a Actuators) any {
	if x, ok := actuator[I](a); ok {
		return x
	}
	return nil
}

// clocksOnly drives clocks and power only.
type clocksOnly struct{ Calls []string }

func (c *clocksOnly) LockClocks(_ context.Context, uuid string, l gpu.ClockLock) error {
	c.Calls = append(c.Calls, fmt.Sprintf("LockClocks(%s,%d-%d)", uuid, l.MinMHz, l.MaxMHz))
	return nil
}

func (c *clocksOnly) SetPowerLimit(_ context.Context, uuid string, w float64) error {
	c.Calls = append(c.Calls, fmt.Sprintf("SetPowerLimit(%s,%.0f)", uuid, w))
	return nil
}

// The mechanism table is the one list of knobs: the flags' names, the
// knobs a backend drives, the actuators bound and the executor's apply
// all come from it.
func TestMechanismTable(t *testing.T) {
	want := "mps_active_threads compute_timeslice vgpu_scheduler locked_clocks power_limit pause_duty placement mig_layout"
	if got := strings.Join(KnobNames(), " "); got != want {
		t.Errorf("knob names %q, want %q", got, want)
	}
	co := &clocksOnly{}
	if got := fmt.Sprint(KnobsOf(co)); got != "[locked_clocks power_limit]" {
		t.Errorf("KnobsOf(clocks) = %s", got)
	}
	if !IsActuator(co) || IsActuator(struct{}{}) {
		t.Error("IsActuator: want true for a clock actuator, false for a plain value")
	}
	seen := map[reflect.Type]string{}
	for _, m := range Mechanisms {
		if other, ok := seen[m.actuator]; ok {
			t.Errorf("%s and %s bind the same interface %v", other, m.Name, m.actuator)
		}
		seen[m.actuator] = m.Name
	}
	act := ActuatorsOf(co)
	if got := fmt.Sprint(act.Knobs()); got != "[locked_clocks power_limit]" {
		t.Errorf("Knobs() = %s", got)
	}
	tu, err := New(Options{Policy: fixed(nil), Actuators: act, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		a   Action
		err string
	}{
		{Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobPowerLimit}, Want: Watts(300)}, ""},
		{Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobLockedClocks}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}}, ""},
		{Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobLockedClocks}, Want: Fraction(0.5)}, "takes a clock range or watts"},
		{Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobComputeTimeSlice}, Want: Level(gpu.TimeSliceLong)}, "no backend of this host drives compute_timeslice"},
		{Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobMIGLayout}, Want: Layout("1g.10gb")}, "no mechanism sets mig_layout"},
	} {
		err := tu.apply(ctx, tc.a)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: error %v, want %q", tc.a, err, tc.err)
		}
	}
	if got := fmt.Sprint(co.Calls); got != "[SetPowerLimit(GPU-a,300) LockClocks(GPU-a,1980-1980)]" {
		t.Errorf("calls %s", got)
	}
}

// A policy is handed Actuators and reaches no actuator through them, so it
// can neither call a setter nor type-assert its way to the backend (the
// simulator and its ground truth): no exported field, and no method whose
// results could hold one.
func TestActuatorsGiveNothingBack(t *testing.T) {
	typ := reflect.TypeFor[Actuators]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			t.Errorf("Actuators exports its field %s", f.Name)
		}
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		for j := range m.Type.NumOut() {
			if out := m.Type.Out(j); mayHold(out) {
				t.Errorf("Actuators.%s returns a %v, which could hold an actuator", m.Name, out)
			}
		}
	}
}

// mayHold reports whether a value of type typ could hold an actuator.
func mayHold(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return true
	case reflect.Slice, reflect.Array:
		return mayHold(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if mayHold(typ.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// The table says which knobs a GPU of each sharing mode shows and the
// unit of each knob's numbers.
func TestKnobSpecs(t *testing.T) {
	for _, tc := range []struct {
		mode gpu.SharingMode
		want []gpu.Knob
	}{
		{gpu.SharingMPS, []gpu.Knob{gpu.KnobMPSActiveThreads, gpu.KnobPauseDuty, gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
		{gpu.SharingTimeSlice, []gpu.Knob{gpu.KnobComputeTimeSlice, gpu.KnobPauseDuty, gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
		{gpu.SharingVGPU, []gpu.Knob{gpu.KnobVGPUScheduler, gpu.KnobPauseDuty, gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
		{gpu.SharingMIG, []gpu.Knob{gpu.KnobMIGLayout, gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
		{gpu.SharingExclusive, []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
	} {
		if got := KnobsFor(tc.mode); !slices.Equal(got, tc.want) {
			t.Errorf("KnobsFor(%s) = %v, want %v", tc.mode, got, tc.want)
		}
	}
	for k, unit := range map[gpu.Knob]string{gpu.KnobMPSActiveThreads: "ratio", gpu.KnobPauseDuty: "ratio", gpu.KnobPowerLimit: "watts", gpu.KnobComputeTimeSlice: "level",
		gpu.KnobLockedClocks: "mhz", gpu.KnobVGPUScheduler: "policy", gpu.KnobPlacement: "", gpu.KnobMIGLayout: ""} {
		if got := KnobUnit(k); got != unit {
			t.Errorf("KnobUnit(%s) = %q, want %q", k, got, unit)
		}
	}
}

// The settings that end with their process are an MPS client's cap and a
// placement, in every entry that drives the knob; a pause's (named by a
// PID that may be gone) and the GPU's knobs are not.
func TestKnobsEndingWithProcess(t *testing.T) {
	want := map[gpu.Knob]bool{gpu.KnobMPSActiveThreads: true, gpu.KnobPlacement: true}
	for _, k := range CountedKnobs {
		if got := endsWithProcess(k); got != want[k] {
			t.Errorf("endsWithProcess(%s) = %v, want %v", k, got, want[k])
		}
	}
	for _, m := range Mechanisms {
		for _, sp := range m.Specs {
			if sp.perProcess != want[sp.Knob] {
				t.Errorf("mechanism %s: %s marked ending with its process %v, want %v", m.Name, sp.Knob, sp.perProcess, want[sp.Knob])
			}
		}
	}
}

// TestDescribeActuated: one backend after another in the order they first
// drive a knob, each with its knobs; none when nothing is actuated.
func TestDescribeActuated(t *testing.T) {
	for _, tc := range []struct {
		in   []ActuatorInfo
		want string
	}{
		{nil, "none"},
		{[]ActuatorInfo{{Knob: gpu.KnobLockedClocks, Backend: "sim"}}, "sim: locked_clocks"},
		{[]ActuatorInfo{{Knob: gpu.KnobLockedClocks, Backend: "nvml"}, {Knob: gpu.KnobMPSActiveThreads, Backend: "mps"}, {Knob: gpu.KnobPowerLimit, Backend: "nvml"}},
			"nvml: locked_clocks power_limit; mps: mps_active_threads"},
	} {
		if got := DescribeActuated(tc.in); got != tc.want {
			t.Errorf("DescribeActuated(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Only the pause's settings stop processes: its changes name them (the
// action's PIDs, else its target's), and a duty of 0 lets them go.
func TestProcessHolds(t *testing.T) {
	for _, k := range CountedKnobs {
		if _, ok := holdOf(k); ok != (k == gpu.KnobPauseDuty) {
			t.Errorf("%s: holds processes %v", k, ok)
		}
	}
	h, _ := holdOf(gpu.KnobPauseDuty)
	for _, c := range []struct {
		a        Action
		pids     []uint32
		releases bool
	}{
		{Action{Target: Target{PID: 7}, Want: Duty(0.5)}, []uint32{7}, false},
		{Action{Target: Target{PID: 7}, PIDs: []uint32{8, 9}, Want: Duty(0.5)}, []uint32{8, 9}, false},
		{Action{PIDs: []uint32{8}, Want: Duty(0)}, []uint32{8}, true},
		{Action{Want: Duty(0.2)}, nil, false},
		{Action{PIDs: []uint32{8}, Want: Duty(-0.1)}, []uint32{8}, false},
		{Action{PIDs: []uint32{8}, Want: Fraction(0)}, []uint32{8}, true},
	} {
		if got := h.pids(c.a); !slices.Equal(got, c.pids) {
			t.Errorf("%+v: pids %v, want %v", c.a, got, c.pids)
		}
		if got := h.releases(c.a); got != c.releases {
			t.Errorf("%+v: releases %v, want %v", c.a, got, c.releases)
		}
	}
}
