package tenant

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestMeterRules(t *testing.T) {
	// A time-sliced GPU whose energy counter rises by 100 J over 2 s with
	// tenants a and b at 0.5 and 0.25 of its SM activity; a MIG GPU of 100
	// SMs rising by 200 J, with instance 1 (60 SMs, c at 0.5 of it) and
	// instance 2 (40 SMs, d and e sharing it, 0.25 and 0.25 of it).
	ts := func(energy float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, EnergyJoules: gpu.Float(energy)}
	}
	mig := func(energy float64) gpu.Device {
		return gpu.Device{Index: 1, UUID: "GPU-1", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 100,
			EnergyJoules: gpu.Float(energy),
			MIG:          []gpu.MIGInstance{{GPUInstanceID: 1, SMCount: 60}, {GPUInstanceID: 2, SMCount: 40}}}
	}
	usage := []Usage{
		{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5), MemoryUsedBytes: 4},
		{Tenant: "b", UUID: "GPU-0", SMActive: gpu.Float(0.25), MemoryUsedBytes: 2},
		{Tenant: "c", UUID: "GPU-1", GPUInstance: "1", SMActive: gpu.Float(0.5)},
		{Tenant: "d", UUID: "GPU-1", GPUInstance: "2", SMActive: gpu.Float(0.25)},
		{Tenant: "e", UUID: "GPU-1", GPUInstance: "2", SMActive: gpu.Float(0.25)},
	}
	type fig = meterFig
	for _, tc := range []struct {
		rule IdleEnergy
		want map[string]fig
		idle map[string]float64
	}{
		{IdleToIdle, map[string]fig{
			"a": {50, 1, 1, 8}, "b": {25, 0.5, 1, 4},
			// c: 0.5 of 60% of the GPU; d, e: 0.25 of 40%; c holds 60%, d and e 20% each
			"c": {60, 0.6, 1.2, 0}, "d": {20, 0.2, 0.4, 0}, "e": {20, 0.2, 0.4, 0},
		}, map[string]float64{"GPU-0": 25, "GPU-1": 100}},
		{IdleByReservation, map[string]fig{
			// the rest (25 J) split equally between a and b
			"a": {62.5, 1, 1, 8}, "b": {37.5, 0.5, 1, 4},
			// the rest (100 J) split 60/20/20
			"c": {120, 0.6, 1.2, 0}, "d": {40, 0.2, 0.4, 0}, "e": {40, 0.2, 0.4, 0},
		}, map[string]float64{"GPU-0": 0, "GPU-1": 0}},
	} {
		t.Run(string(tc.rule), func(t *testing.T) {
			m := newMeterState()
			first := &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{ts(1000), mig(5000)}}
			m.meter(tc.rule, nil, first, usage) // the first sample only sets the counters' start
			second := &gpu.Readings{Time: time.Unix(102, 0), Interval: 2 * time.Second, Devices: []gpu.Device{ts(1100), mig(5200)}}
			meters, gpus := m.meter(tc.rule, nil, second, usage)
			if len(meters) != len(tc.want) {
				t.Fatalf("%d meters, want %d: %+v", len(meters), len(tc.want), meters)
			}
			for _, mt := range meters {
				w := tc.want[mt.Tenant]
				got := fig{mt.EnergyJoules, mt.GPUSecondsUsed, mt.GPUSecondsReserved, mt.MemoryByteSeconds}
				if !closeFig(got, w) {
					t.Errorf("%s: %+v, want %+v", mt.Tenant, got, w)
				}
			}
			for _, g := range gpus {
				if math.Abs(g.IdleEnergyJoules-tc.idle[g.UUID]) > 1e-9 {
					t.Errorf("%s idle %g, want %g", g.UUID, g.IdleEnergyJoules, tc.idle[g.UUID])
				}
			}
			checkConserved(t, meters, gpus)
		})
	}
}

func closeFig(a, b meterFig) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return c(a.energy, b.energy) && c(a.used, b.used) && c(a.reserved, b.reserved) && c(a.memory, b.memory)
}

// checkConserved fails unless, per GPU, the tenants' and the idle energy
// add up to the energy the GPU counted.
func checkConserved(t *testing.T, meters []Meter, gpus []GPUMeter) {
	t.Helper()
	sum := map[string]float64{}
	for _, m := range meters {
		sum[m.UUID] += m.EnergyJoules
	}
	for _, g := range gpus {
		if got := sum[g.UUID] + g.IdleEnergyJoules; math.Abs(got-g.EnergyJoules) > 1e-6*max(1, g.EnergyJoules) {
			t.Errorf("GPU %s: tenants %g + idle %g = %g, the GPU counted %g", g.UUID, sum[g.UUID], g.IdleEnergyJoules, got, g.EnergyJoules)
		}
	}
}

func TestMeterCounterEdges(t *testing.T) {
	at := time.Unix(100, 0)
	dev := func(e *float64, up bool) gpu.Readings {
		at = at.Add(time.Second)
		return gpu.Readings{Time: at, Interval: time.Second, Devices: []gpu.Device{{UUID: "GPU-0", Up: up, EnergyJoules: e}}}
	}
	busy := []Usage{{Tenant: "a", UUID: "GPU-0", KernelBusy: gpu.Float(0.8)}, {Tenant: "b", UUID: "GPU-0", KernelBusy: gpu.Float(0.7)}}
	for _, tc := range []struct {
		name    string
		samples []gpu.Readings
		usage   []Usage
		wantA   float64 // a's energy at the end
		wantGPU float64 // energy the GPU counted
	}{
		// kernel-busy weights adding up to 1.5 are scaled to 1: a gets 8/15
		{"kernel busy scaled", []gpu.Readings{dev(gpu.Float(0), true), dev(gpu.Float(150), true)}, busy, 80, 150},
		// a driver reload resets the counter: the new value is the increase
		{"counter reset", []gpu.Readings{dev(gpu.Float(1000), true), dev(gpu.Float(30), true)}, busy, 16, 30},
		{"no energy counter", []gpu.Readings{dev(nil, true), dev(nil, true)}, busy, 0, 0},
		// a lost GPU is not metered; the next sample covers the outage
		{"lost between", []gpu.Readings{dev(gpu.Float(0), true), dev(nil, false), dev(gpu.Float(300), true)}, busy, 160, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			var meters []Meter
			var gpus []GPUMeter
			for i := range tc.samples {
				meters, gpus = m.meter(IdleToIdle, nil, &tc.samples[i], tc.usage)
			}
			if len(meters) != 2 || math.Abs(meters[0].EnergyJoules-tc.wantA) > 1e-9 || len(gpus) != 1 || gpus[0].EnergyJoules != tc.wantGPU {
				t.Errorf("meters %+v gpus %+v; want a at %g J of %g", meters, gpus, tc.wantA, tc.wantGPU)
			}
			checkConserved(t, meters, gpus)
		})
	}
}

func TestIdleEnergyConfig(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want IdleEnergy
		ok   bool
	}{
		{"defaults: {idle_energy: reservation}\ntenants: [{name: a, selectors: [{executable: a}]}]\n", IdleByReservation, true},
		{"defaults: {idle_energy: idle}\ntenants: [{name: a, selectors: [{executable: a}]}]\n", IdleToIdle, true},
		{"tenants: [{name: a, selectors: [{executable: a}]}]\n", "", true},
		{"defaults: {idle_energy: everyone}\ntenants: [{name: a, selectors: [{executable: a}]}]\n", "", false},
	} {
		cfg, err := ParseConfig("t.yaml", []byte(tc.yaml))
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.yaml, err, tc.ok)
			continue
		}
		if err == nil && cfg.Defaults.IdleEnergy != tc.want {
			t.Errorf("%q: idle_energy %q, want %q", tc.yaml, cfg.Defaults.IdleEnergy, tc.want)
		}
	}
}

// meterFig is a meter's four figures.
type meterFig struct{ energy, used, reserved, memory float64 }

func TestMeterSameReadingsTwice(t *testing.T) {
	m := newMeterState()
	usage := []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5), MemoryUsedBytes: 1}}
	r1 := &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{{UUID: "GPU-0", Up: true, EnergyJoules: gpu.Float(0)}}}
	r2 := &gpu.Readings{Time: time.Unix(101, 0), Interval: time.Second, Devices: []gpu.Device{{UUID: "GPU-0", Up: true, EnergyJoules: gpu.Float(10)}}}
	m.meter(IdleToIdle, nil, r1, usage)
	once, _ := m.meter(IdleToIdle, nil, r2, usage)
	twice, _ := m.meter(IdleToIdle, nil, r2, usage) // a rebuild of the same sample
	if !reflect.DeepEqual(once[0], twice[0]) || once[0].GPUSecondsUsed != 0.5 || once[0].EnergyJoules != 5 {
		t.Errorf("once %+v, twice %+v: want 0.5 GPU-seconds and 5 J, unchanged by the rebuild", once[0], twice[0])
	}
}
