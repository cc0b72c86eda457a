package main

import (
	"github.com/vgpu-exporter/vgpu_exporter/test/scenarios"
	"reflect"
	"slices"
	"strings"
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
	all := guarded(s)
	if len(all) != 9 {
		t.Fatalf("%d wrappers, want one per actuator interface (9)", len(all))
	}
	ifaces := []reflect.Type{
		reflect.TypeFor[gpu.MPSActuator](), reflect.TypeFor[gpu.VGPUSchedulerActuator](),
		reflect.TypeFor[gpu.TimeSliceActuator](), reflect.TypeFor[gpu.ClockPowerActuator](),
		reflect.TypeFor[gpu.MIGActuator](), reflect.TypeFor[gpu.MIGDrainActuator](),
		reflect.TypeFor[gpu.TenantLifecycleActuator](), reflect.TypeFor[gpu.PlacementActuator](),
		reflect.TypeFor[gpu.CapabilityLister](), reflect.TypeFor[gpu.Source](),
		reflect.TypeFor[gpu.AppMetricsSource](),
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
	act := guardedActuators(s)
	for _, v := range []any{act.MPS, act.VGPUScheduler, act.TimeSlice} {
		if v == nil {
			t.Fatal("an actuator the simulator has is missing")
		}
		if _, ok := v.(gpu.Source); ok {
			t.Errorf("%T reads the GPUs", v)
		}
	}
}

// The oracle runs on every built-in scenario and prints what it found. Its
// search replays each scenario many times: under -race that takes minutes,
// so `make effects` runs it without the race detector.
func TestOracleRunsOnEveryScenario(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race; make effects runs it")
	}
	bs, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			code, out, stderr := vgpusim(t, false, "run", "--scenario", b.Name, "--policy", "oracle", "--duration", "10s")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(out, "oracle: best static settings found in") || !strings.Contains(out, "phase 0s-") {
				t.Errorf("no plan in the output:\n%s", out)
			}
		})
	}
}

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in    string
		count int
		list  []int64
		err   bool
	}{
		{"3", 3, nil, false},
		{"1,5,9", 3, []int64{1, 5, 9}, false},
		{"0", 0, nil, true},
		{"x", 0, nil, true},
		{"1,0", 0, nil, true},
		{"1,,2", 0, nil, true},
	}
	for _, tc := range tests {
		n, l, err := parseSeeds(tc.in)
		if (err != nil) != tc.err || n != tc.count || !slices.Equal(l, tc.list) {
			t.Errorf("parseSeeds(%q) = %d, %v, %v", tc.in, n, l, err)
		}
	}
}

// Three seeds give three runs and one line of means per tenant.
func TestSeedsReportsSpread(t *testing.T) {
	code, out, stderr := vgpusim(t, false, "run", "--scenario", "clock-stability", "--duration", "20s", "--seeds", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"seed 1:", "seed 2:", "seed 3:", "3 seeds: mean ± standard deviation", "vision-locked", "energy:"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
