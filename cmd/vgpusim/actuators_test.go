package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// The policy's actuators forward to the simulator but are not it, and none
// of them reaches another mechanism or the simulator's readings.
func TestGuardedActuatorsHideTheSimulator(t *testing.T) {
	sc, err := sim.ParseScenario("one.yaml", []byte("name: one\ngpus: [{model: H100-SXM5-80GB, sharing: mps}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sc, sim.Options{Seed: 1, Start: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	act := guardedActuators(s)
	fields := reflect.ValueOf(act)
	var all []any
	for i := range fields.NumField() {
		if f := fields.Field(i); !f.IsNil() {
			all = append(all, f.Interface())
		}
	}
	if len(all) != 9 {
		t.Fatalf("%d actuators, want every mechanism of the simulator but the rebalancing hook (9)", len(all))
	}
	ifaces := []reflect.Type{
		reflect.TypeFor[gpu.MPSActuator](), reflect.TypeFor[gpu.VGPUSchedulerActuator](),
		reflect.TypeFor[gpu.TimeSliceActuator](), reflect.TypeFor[gpu.ClockPowerActuator](),
		reflect.TypeFor[gpu.MIGActuator](), reflect.TypeFor[gpu.MIGDrainActuator](),
		reflect.TypeFor[gpu.TenantLifecycleActuator](), reflect.TypeFor[gpu.PlacementActuator](),
		reflect.TypeFor[gpu.PauseActuator](), reflect.TypeFor[gpu.CapabilityLister](), reflect.TypeFor[gpu.Source](),
		reflect.TypeFor[gpu.AppMetricsSource](), reflect.TypeFor[gpu.Rebalancer](),
	}
	for _, w := range all {
		if _, ok := w.(*sim.Simulator); ok {
			t.Fatalf("%T is the simulator", w)
		}
		n := 0
		for _, it := range ifaces {
			if reflect.TypeOf(w).Implements(it) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%T implements %d of the actuator and source interfaces, want 1", w, n)
		}
		if f := reflect.TypeOf(w).Field(0); f.IsExported() {
			t.Errorf("%T exports its field %s", w, f.Name)
		}
	}
	for _, v := range []any{act.MPS, act.VGPUScheduler, act.TimeSlice} {
		if v == nil {
			t.Fatal("an actuator the simulator has is missing")
		}
		if _, ok := v.(gpu.Source); ok {
			t.Errorf("%T reads the GPUs", v)
		}
	}
}
