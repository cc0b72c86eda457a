package tenant

import (
	"math"
	"reflect"
	"slices"
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

// TestReservations: what each tenant holds of a GPU, by sharing mode.
func TestReservations(t *testing.T) {
	whole := &gpu.Device{UUID: "GPU-0"}
	mig := &gpu.Device{UUID: "GPU-1", MIGEnabled: true, SMCount: 100,
		MIG: []gpu.MIGInstance{{GPUInstanceID: 1, SMCount: 60}, {GPUInstanceID: 2, SMCount: 40}}}
	res := func(parts ...*float64) []Usage {
		out := make([]Usage, len(parts))
		for i, p := range parts {
			out[i] = Usage{Tenant: string(rune('a' + i)), Reservation: p}
		}
		return out
	}
	f := gpu.Float
	for _, tc := range []struct {
		name  string
		d     *gpu.Device
		usage []Usage
		want  []float64
	}{
		{"exclusive", whole, res(nil), []float64{1}},
		{"time-sliced: equal", whole, res(nil, nil), []float64{0.5, 0.5}},
		// MPS caps adding up to less than 1: each its cap, the rest unheld
		{"MPS caps", whole, res(f(0.3), f(0.5)), []float64{0.3, 0.5}},
		// caps adding up to 1.4: scaled to 1
		{"MPS caps over 1", whole, res(f(0.6), f(0.8)), []float64{0.6 / 1.4, 0.8 / 1.4}},
		// tenants without a cap split what the capped ones leave
		{"MPS some uncapped", whole, res(f(0.3), nil, nil), []float64{0.3, 0.35, 0.35}},
		{"MPS uncapped, caps over 1", whole, res(f(0.7), f(0.7), nil), []float64{0.5, 0.5, 0}},
		// vGPU profiles of 20 and 40 GiB on an 80 GiB GPU
		{"vGPU profiles", whole, res(f(0.25), f(0.5)), []float64{0.25, 0.5}},
		// a profile and a process outside any VM
		{"vGPU and host process", whole, res(f(0.25), nil), []float64{0.25, 0.75}},
		// MIG: by slice, a Reservation ignored
		{"MIG slices", mig, []Usage{{Tenant: "c", GPUInstance: "1", Reservation: f(0.1)}, {Tenant: "d", GPUInstance: "2"},
			{Tenant: "e", GPUInstance: "2"}, {Tenant: "f"}}, []float64{0.6, 0.2, 0.2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptrs := make([]*Usage, len(tc.usage))
			for i := range tc.usage {
				ptrs[i] = &tc.usage[i]
			}
			got := reservations(tc.d, ptrs)
			for i := range tc.want {
				if math.Abs(got[i]-tc.want[i]) > 1e-12 {
					t.Errorf("%s: %g, want %g (all %v)", tc.usage[i].Tenant, got[i], tc.want[i], got)
				}
			}
		})
	}
}

// TestMeterByMPSCaps: on an MPS GPU the idle energy, the reserved
// GPU-seconds and the GPU-time cost follow the tenants' active-thread
// caps, and the tenants and the idle row add up to the GPU's figures.
func TestMeterByMPSCaps(t *testing.T) {
	dev := func(at int64, energy float64) *gpu.Readings {
		return &gpu.Readings{Time: time.Unix(at, 0), Interval: time.Duration(at-100) * time.Second, Devices: []gpu.Device{
			{UUID: "GPU-0", Up: true, Mode: gpu.SharingMPS, EnergyJoules: gpu.Float(energy)}}}
	}
	// a capped at 0.2 and b at 0.6 of the SMs, running at 0.1 and 0.3
	usage := []Usage{
		{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.1), Reservation: gpu.Float(0.2)},
		{Tenant: "b", UUID: "GPU-0", SMActive: gpu.Float(0.3), Reservation: gpu.Float(0.6)},
	}
	prices := &Prices{Currency: "USD", PerGPUHour: gpu.Float(3600), PerKWh: gpu.Float(3.6e6)}
	m := newMeterState()
	m.meter(IdleByReservation, prices, dev(100, 0), usage)
	meters, gpus := m.meter(IdleByReservation, prices, dev(102, 100), usage)
	// 100 J: 10 and 30 active, the rest 60 J by 0.2 and 0.6, 12 J idle
	want := map[string]meterFig{"a": {10 + 12, 0.2, 0.4, 0}, "b": {30 + 36, 0.6, 1.2, 0}}
	for _, mt := range meters {
		got := meterFig{mt.EnergyJoules, mt.GPUSecondsUsed, mt.GPUSecondsReserved, mt.MemoryByteSeconds}
		if !closeFig(got, want[mt.Tenant]) {
			t.Errorf("%s: %+v, want %+v", mt.Tenant, got, want[mt.Tenant])
		}
		// 1 per GPU-second and per joule
		if len(mt.Costs) != 1 || math.Abs(mt.Costs[0].GPUTime-want[mt.Tenant].reserved) > 1e-9 {
			t.Errorf("%s: costs %+v, want GPU time %g", mt.Tenant, mt.Costs, want[mt.Tenant].reserved)
		}
	}
	if g := gpus[0]; math.Abs(g.IdleEnergyJoules-12) > 1e-9 || len(g.IdleCosts) != 1 || math.Abs(g.IdleCosts[0].GPUTime-0.4) > 1e-9 {
		t.Errorf("idle %g J, costs %+v: want 12 J and the 0.4 GPU-seconds no cap holds", g.IdleEnergyJoules, g.IdleCosts)
	}
	checkConserved(t, meters, gpus)
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
		// a lost GPU is not metered; the next sample's shares get the part
		// of the increase in its own interval (half of 2 s), the rest is idle
		{"lost between", []gpu.Readings{dev(gpu.Float(0), true), dev(nil, false), dev(gpu.Float(300), true)}, busy, 80, 300},
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

// Any step back of a GPU's energy counter was a driver reload, its new
// value the increase: a copy of the counter read late (dcgm-exporter's
// page filling a sample whose NVML read failed: 30 s behind, 9 kJ at
// 300 W) billed the GPU's whole counter, 777.6 MJ after 30 days at 300 W,
// to the sample's tenants. Now a step back is a reload only where the new
// value is at most what the GPU could have drawn since the previous
// reading (maxDrawWatts); otherwise the sample read the GPU without its
// counter, owed its part of the next increase, which is counted from the
// previous reading.
func TestMeterEnergyCounterStepBack(t *testing.T) {
	const month = 777.6e6 // J: 300 W for 30 days
	usage := []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5)}}
	type read struct {
		at     int64 // s
		joules float64
	}
	for _, tc := range []struct {
		name          string
		reads         []read
		wantGPU, want float64 // the GPU's energy counted, a's
		wantUnsampled float64
	}{
		// 3 s at 300 W, the third sample owed its part: half of it a's
		{"copy read late", []read{{1, month}, {2, month + 300}, {3, month + 300 - 9000}, {4, month + 900}}, 900, 450, 0},
		{"copies read late twice", []read{{1, month}, {2, month - 9000}, {3, month - 8700}, {4, month + 900}}, 900, 450, 0},
		{"driver reload", []read{{1, month}, {2, 250}, {3, 550}}, 550, 275, 0},
		// 1 MJ is less than 10 min at maxDrawWatts: a reload after a gap;
		// 1 s of the 600 s the sample's interval, the rest unsampled
		{"driver reload across a gap", []read{{1, month}, {601, 1e6}}, 1e6, 1e6 / 600 / 2, 1e6 * 599 / 600},
		// 1.5 MJ back after 10 min is no reload: the two samples' 2 s of
		// the 601 s metered, the rest unsampled
		{"copy read late across a gap", []read{{1, month}, {601, month - 1.5e6}, {602, month + 300}}, 300, 300.0 / 601, 300 * 599.0 / 601},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			var meters []Meter
			var gpus []GPUMeter
			prev := 0.0
			for i, r := range tc.reads {
				rd := gpu.Readings{Time: time.Unix(100+r.at, 0), Interval: time.Second, Devices: []gpu.Device{{UUID: "GPU-0", Up: true, EnergyJoules: gpu.Float(r.joules)}}}
				if i == 0 {
					rd.Interval = 0
				}
				meters, gpus = m.meter(IdleToIdle, nil, &rd, usage)
				if gpus[0].EnergyJoules < prev {
					t.Errorf("sample %d: the GPU's energy counted went back from %g J to %g J", i, prev, gpus[0].EnergyJoules)
				}
				prev = gpus[0].EnergyJoules
			}
			if g := gpus[0]; math.Abs(g.EnergyJoules-tc.wantGPU) > 1e-6 || math.Abs(meters[0].EnergyJoules-tc.want) > 1e-6 ||
				math.Abs(g.UnsampledEnergyJoules-tc.wantUnsampled) > 1e-6 {
				t.Errorf("the GPU counted %g J (%g unsampled), a %g J; want %g J (%g unsampled), a %g J",
					g.EnergyJoules, g.UnsampledEnergyJoules, meters[0].EnergyJoules, tc.wantGPU, tc.wantUnsampled, tc.want)
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

// TestMeterEnergyAcrossGap: where the GPU's energy counter rose over more
// time than the sample meters (the GPU lost, or its counter not read, in
// the samples between), the tenants get, by the sample's shares, only the
// part of the increase that falls in the sample's interval (the GPU's
// average power over the whole time assumed); the rest, counted while no
// sample was taken, goes to idle under both rules, as no tenant was metered
// GPU time for it. Where a sample's interval itself spans the time (a
// sampler that stalled, whose activity figures cover that time too), the
// whole increase is apportioned as usual.
func TestMeterEnergyAcrossGap(t *testing.T) {
	// a's process is gone (no activity), b is at 0.25 of the SMs; the two
	// split the time-sliced GPU equally. The counter rises by 2100 J over
	// 21 s, of which the last sample covers 1 s: 100 J metered, 2000 J not.
	usage := []Usage{
		{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0)},
		{Tenant: "b", UUID: "GPU-0", SMActive: gpu.Float(0.25)},
	}
	read := func(at int64, interval time.Duration, e *float64, up bool) *gpu.Readings {
		return &gpu.Readings{Time: time.Unix(at, 0), Interval: interval, Devices: []gpu.Device{
			{UUID: "GPU-0", Up: up, Mode: gpu.SharingTimeSlice, EnergyJoules: e}}}
	}
	lost := []*gpu.Readings{read(100, 0, gpu.Float(1000), true)}
	for at := int64(101); at < 121; at++ {
		lost = append(lost, read(at, time.Second, nil, false))
	}
	lost = append(lost, read(121, time.Second, gpu.Float(3100), true))
	// the GPU up all along but its counter not read for 20 s: the samples
	// that read it without are owed their part of the increase (they went
	// to idle, as unsampled, while their tenants were billed the time)
	unread := slices.Clone(lost)
	for i := 1; i < 21; i++ {
		unread[i] = read(100+int64(i), time.Second, nil, true)
	}
	// its counter unread for 10 s, then the GPU lost for 10 s
	unreadLost := slices.Clone(lost)
	for i := 1; i < 11; i++ {
		unreadLost[i] = read(100+int64(i), time.Second, nil, true)
	}
	stalled := []*gpu.Readings{read(100, 0, gpu.Float(1000), true), read(121, 21*time.Second, gpu.Float(3100), true)}
	for _, tc := range []struct {
		name            string
		samples         []*gpu.Readings
		rule            IdleEnergy
		want            map[string]meterFig
		idle, unsampled float64
	}{
		// b: 0.25 of 100 J; the 75 J left to idle with the 2000 J of the gap
		{"lost, idle", lost, IdleToIdle, map[string]meterFig{"a": {0, 0, 0.5, 0}, "b": {25, 0.25, 0.5, 0}}, 2075, 2000},
		// the 75 J left split by the 0.5 each holds of the second billed; the gap's to idle
		{"lost, reservation", lost, IdleByReservation, map[string]meterFig{"a": {37.5, 0, 0.5, 0}, "b": {62.5, 0.25, 0.5, 0}}, 2000, 2000},
		// as one interval of 21 s
		{"unread, reservation", unread, IdleByReservation, map[string]meterFig{"a": {787.5, 0, 10.5, 0}, "b": {1312.5, 5.25, 10.5, 0}}, 0, 0},
		{"unread, idle", unread, IdleToIdle, map[string]meterFig{"a": {0, 0, 10.5, 0}, "b": {525, 5.25, 10.5, 0}}, 1575, 0},
		// 11 s read of the 21 s: 1100 J split as over one interval of 11 s, 1000 J unsampled
		{"unread then lost, reservation", unreadLost, IdleByReservation, map[string]meterFig{"a": {412.5, 0, 5.5, 0}, "b": {687.5, 2.75, 5.5, 0}}, 1000, 1000},
		// one interval of 21 s: all of it apportioned, as the GPU time is
		{"stalled, reservation", stalled, IdleByReservation, map[string]meterFig{"a": {787.5, 0, 10.5, 0}, "b": {1312.5, 5.25, 10.5, 0}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			prices := &Prices{Currency: "USD", PerGPUHour: gpu.Float(3.6), PerKWh: gpu.Float(3.6)}
			var meters []Meter
			var gpus []GPUMeter
			var sec float64
			for _, r := range tc.samples {
				meters, gpus = m.meter(tc.rule, prices, r, usage)
				if r.Devices[0].Up {
					sec += r.Interval.Seconds()
				}
			}
			for _, mt := range meters {
				got := meterFig{mt.EnergyJoules, mt.GPUSecondsUsed, mt.GPUSecondsReserved, mt.MemoryByteSeconds}
				if !closeFig(got, tc.want[mt.Tenant]) {
					t.Errorf("%s: %+v, want %+v", mt.Tenant, got, tc.want[mt.Tenant])
				}
				if c := mt.Costs[0]; !closeTo(c.Energy, mt.EnergyJoules/1e6) {
					t.Errorf("%s: energy cost %g for %g J at 3.6 USD/kWh", mt.Tenant, c.Energy, mt.EnergyJoules)
				}
			}
			checkCostsConserved(t, meters, gpus, prices, sec)
			if len(gpus) != 1 || math.Abs(gpus[0].IdleEnergyJoules-tc.idle) > 1e-9 || math.Abs(gpus[0].UnsampledEnergyJoules-tc.unsampled) > 1e-9 ||
				math.Abs(gpus[0].EnergyJoules-2100) > 1e-9 {
				t.Errorf("gpus %+v: want %g J idle, %g J of it unsampled, of 2100", gpus, tc.idle, tc.unsampled)
			}
			checkConserved(t, meters, gpus)
		})
	}
}

// Shares scaled down to add up to 1 may add up to 1+2^-52 in floating point
// (0.51 and 0.66 of the GPU's kernel-busy time): the rest was below 0, and
// the idle tenant's energy and energy cost, and the GPU's idle energy, went
// below 0 and decreased with each sample.
func TestMeterCountersNeverDecrease(t *testing.T) {
	for _, rule := range []IdleEnergy{IdleByReservation, IdleToIdle} {
		t.Run(string(rule), func(t *testing.T) {
			b := mustBuilder(t, "defaults: {idle_energy: "+string(rule)+"}\ntenants:\n  - {name: a, selectors: [{executable: a}]}\n  - {name: b, selectors: [{executable: b}]}\n  - {name: c, selectors: [{executable: c}]}\n",
				BuilderOptions{Prices: &Prices{Currency: "USD", PerKWh: gpu.Float(0.2)}})
			proc := func(pid uint32, name string, util float64) gpu.Process {
				return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: -1, ComputeInstanceID: -1, SMUtil: gpu.Float(util), UsedMemoryBytes: gpu.Uint(1 << 30)}
			}
			prev := map[string]float64{}
			for i := range 6 {
				d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 3 << 30,
					EnergyJoules: gpu.Float(float64(i) * 7000),
					Processes:    []gpu.Process{proc(1, "a", 0.51), proc(2, "b", 0.66), proc(3, "c", 0)}}
				r := &gpu.Readings{Time: time.Unix(int64(10*i), 0), Devices: []gpu.Device{d}}
				if i > 0 {
					r.Interval = 10 * time.Second
				}
				s := b.Build(r, gpu.SamplerStats{})
				figs := map[string]float64{"idle": s.GPUMeters[0].IdleEnergyJoules}
				for _, c := range s.GPUMeters[0].IdleCosts {
					figs["idle cost"] = c.Energy
				}
				for _, m := range s.Meters {
					figs[m.Tenant] = m.EnergyJoules
					for _, c := range m.Costs {
						figs[m.Tenant+" cost"] = c.Energy
					}
				}
				for k, v := range figs {
					if v < 0 || v < prev[k] {
						t.Errorf("sample %d: %s energy counter %g, was %g", i, k, v, prev[k])
					}
					prev[k] = v
				}
				checkConserved(t, s.Meters, s.GPUMeters)
			}
		})
	}
}

// Where the activity of a GPU's tenants is not known (a MIG instance
// without its SM activity: no GPM before Hopper, no DCGM profiling; a
// whole GPU with neither SM activity nor a per-process figure), it was
// taken as 0: a tenant running flat out was metered 0 GPU-seconds used and
// 0 J, and the energy went to idle as if nothing ran. Now the tenant's used
// time, and its energy where its split needs the activity, are unknown;
// the energy its known activity leaves is the GPU's unattributed energy
// (a part of its idle energy); and a sample that knows the activity again
// makes them known. A whole GPU whose per-process utilization was read
// without a sample (NVML's NOT_FOUND: no process ran a kernel) knows its
// tenants' activity, 0: its energy was all unattributed, and under
// reservation the tenants holding it got none. Under reservation, a MIG
// tenant whose own activity was known while another instance's was not
// was charged its part of the activity with its energy unknown: charged,
// not served. Its energy is known with its activity, under either rule.
// A GPU whose process list NVML refused had no usage and was known idle:
// its energy, whatever ran, is unattributed unless its SM activity says 0.
// So is an MPS GPU's whose MPS clients' list NVML refused (its compute
// list read empty), which was known idle.
func TestMeterActivityUnknown(t *testing.T) {
	mig := func(energy float64) gpu.Device {
		return gpu.Device{UUID: "GPU-0", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 100, EnergyJoules: gpu.Float(energy),
			MIG: []gpu.MIGInstance{{GPUInstanceID: 1, SMCount: 60}, {GPUInstanceID: 2, SMCount: 40}}}
	}
	whole := func(energy float64) gpu.Device {
		return gpu.Device{UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, EnergyJoules: gpu.Float(energy)}
	}
	noneRan := func(energy float64) gpu.Device {
		d := whole(energy)
		d.NoProcessSamples = true
		return d
	}
	unread := func(dev func(float64) gpu.Device) func(float64) gpu.Device {
		return func(energy float64) gpu.Device {
			d := dev(energy)
			d.ProcessesUnread = true
			return d
		}
	}
	// an MPS GPU whose compute list was read (empty) and whose MPS
	// clients' list was not: a client may run
	mpsUnread := func(energy float64) gpu.Device {
		d := whole(energy)
		d.Mode, d.MPSProcessesUnread = gpu.SharingMPS, true
		return d
	}
	mpsUnreadIdle := func(energy float64) gpu.Device {
		d := mpsUnread(energy)
		d.Activity.SMActive = gpu.Float(0)
		return d
	}
	unreadIdle := func(energy float64) gpu.Device {
		d := unread(whole)(energy)
		d.Activity.SMActive = gpu.Float(0)
		return d
	}
	type want struct {
		energy                     float64
		usedUnknown, energyUnknown bool
	}
	for _, tc := range []struct {
		name         string
		rule         IdleEnergy
		dev          func(float64) gpu.Device
		usage        []Usage
		want         map[string]want
		unattributed float64 // of the 100 J of the sample
	}{
		{"mig idle", IdleToIdle, mig, []Usage{{Tenant: "a", UUID: "GPU-0", GPUInstance: "1"}},
			map[string]want{"a": {0, true, true}}, 100},
		{"mig reservation", IdleByReservation, mig, []Usage{{Tenant: "a", UUID: "GPU-0", GPUInstance: "1"}},
			map[string]want{"a": {0, true, true}}, 100},
		// instance 1's tenant at 0.5 of its 60 SMs: 30 J; the 70 J left
		// hold instance 2's unknown activity
		{"mig one instance unknown, idle", IdleToIdle, mig, []Usage{
			{Tenant: "a", UUID: "GPU-0", GPUInstance: "1", SMActive: gpu.Float(0.5)}, {Tenant: "b", UUID: "GPU-0", GPUInstance: "2"}},
			map[string]want{"a": {30, false, false}, "b": {0, true, true}}, 70},
		// under reservation too: a's 30 J were charged and its energy
		// unknown, a charge not served (and the tenants served and the
		// idle energy short of the GPU's)
		{"mig one instance unknown, reservation", IdleByReservation, mig, []Usage{
			{Tenant: "a", UUID: "GPU-0", GPUInstance: "1", SMActive: gpu.Float(0.5)}, {Tenant: "b", UUID: "GPU-0", GPUInstance: "2"}},
			map[string]want{"a": {30, false, false}, "b": {0, true, true}}, 70},
		// processes outside any instance hold no SMs and run nothing
		{"mig outside instances", IdleToIdle, mig, []Usage{{Tenant: "a", UUID: "GPU-0"}},
			map[string]want{"a": {0, false, false}}, 0},
		{"whole idle", IdleToIdle, whole, []Usage{{Tenant: "a", UUID: "GPU-0"}, {Tenant: "b", UUID: "GPU-0"}},
			map[string]want{"a": {0, true, true}, "b": {0, true, true}}, 100},
		// one tenant holding all of the GPU has all of its energy under
		// reservation, whatever its activity
		{"whole one tenant, reservation", IdleByReservation, whole, []Usage{{Tenant: "a", UUID: "GPU-0"}},
			map[string]want{"a": {100, true, false}}, 0},
		{"whole one tenant, idle", IdleToIdle, whole, []Usage{{Tenant: "a", UUID: "GPU-0"}},
			map[string]want{"a": {0, true, true}}, 100},
		// per-process samples of one tenant: the other ran no kernel
		{"whole kernel-busy of one", IdleToIdle, whole, []Usage{{Tenant: "a", UUID: "GPU-0", KernelBusy: gpu.Float(0.25)}, {Tenant: "b", UUID: "GPU-0"}},
			map[string]want{"a": {25, false, false}, "b": {0, false, false}}, 0},
		// per-process utilization read, no sample: no tenant ran a kernel
		{"whole no process ran, idle", IdleToIdle, noneRan, []Usage{{Tenant: "a", UUID: "GPU-0"}, {Tenant: "b", UUID: "GPU-0"}},
			map[string]want{"a": {0, false, false}, "b": {0, false, false}}, 0},
		{"whole no process ran, reservation", IdleByReservation, noneRan, []Usage{{Tenant: "a", UUID: "GPU-0"}, {Tenant: "b", UUID: "GPU-0"}},
			map[string]want{"a": {50, false, false}, "b": {50, false, false}}, 0},
		// a process list NVML refused (no permission) holds no usage:
		// not that nothing ran, unless the GPU's own SM activity says so
		{"whole process list unread", IdleToIdle, unread(whole), nil, nil, 100},
		{"mig process lists unread", IdleByReservation, unread(mig), nil, nil, 100},
		{"whole process list unread, SM activity 0", IdleToIdle, unreadIdle, nil, nil, 0},
		{"mps clients' list unread", IdleToIdle, mpsUnread, nil, nil, 100},
		{"mps clients' list unread, SM activity 0", IdleToIdle, mpsUnreadIdle, nil, nil, 0},
		// a rule left unset is idle
		{"whole kernel-busy of one, rule unset", "", whole, []Usage{{Tenant: "a", UUID: "GPU-0", KernelBusy: gpu.Float(0.25)}, {Tenant: "b", UUID: "GPU-0"}},
			map[string]want{"a": {25, false, false}, "b": {0, false, false}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			read := func(at int64, e float64) *gpu.Readings {
				return &gpu.Readings{Time: time.Unix(at, 0), Interval: time.Second, Devices: []gpu.Device{tc.dev(e)}}
			}
			m.meter(tc.rule, nil, &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{tc.dev(1000)}}, tc.usage)
			meters, gpus := m.meter(tc.rule, nil, read(101, 1100), tc.usage)
			for _, mt := range meters {
				w := tc.want[mt.Tenant]
				if math.Abs(mt.EnergyJoules-w.energy) > 1e-9 || mt.UsedUnknown != w.usedUnknown || mt.EnergyUnknown != w.energyUnknown {
					t.Errorf("%s: %g J, used unknown %v, energy unknown %v; want %+v", mt.Tenant, mt.EnergyJoules, mt.UsedUnknown, mt.EnergyUnknown, w)
				}
			}
			if g := gpus[0]; math.Abs(g.UnattributedEnergyJoules-tc.unattributed) > 1e-9 || g.UnattributedEnergyJoules > g.IdleEnergyJoules+1e-9 {
				t.Errorf("unattributed %g J of the idle %g J, want %g J", g.UnattributedEnergyJoules, g.IdleEnergyJoules, tc.unattributed)
			}
			checkConserved(t, meters, gpus)
			// a sample knowing every tenant's activity makes it known
			known := slices.Clone(tc.usage)
			for i := range known {
				known[i].SMActive = gpu.Float(0)
			}
			meters, _ = m.meter(tc.rule, nil, read(102, 1200), known)
			for _, mt := range meters {
				if mt.UsedUnknown || mt.EnergyUnknown {
					t.Errorf("%s, its activity known since: used unknown %v, energy unknown %v", mt.Tenant, mt.UsedUnknown, mt.EnergyUnknown)
				}
			}
		})
	}
}

// A MIG instance's part of the GPU was its SMs over those of the
// instances that exist where NVML does not know the GPU's SM count (an
// A100, an H100 PCIe or NVL, a GH200): a lone 1g instance of an A100 was
// billed all of the GPU, seven times its reserved GPU-seconds, GPU-time
// cost and energy. An instance whose SMs were not read counted as all of
// the GPU. Now the GPU's SMs, or else its full-GPU profile's, are the
// denominator; where neither, or the instance's, is known, its part is not
// known: its tenant's reserved time, used time and energy are.
func TestMeterMIGFraction(t *testing.T) {
	for _, tc := range []struct {
		name            string
		gpuSMs, fullSMs int // the GPU's, its full-GPU profile's
		instSMs         int
		fraction        float64
		unknown         bool
	}{
		{"GPU's SMs unknown, its full profile's known", 0, 98, 14, 1.0 / 7, false},
		{"GPU's SMs known", 108, 98, 14, 14.0 / 108, false},
		{"neither known", 0, 0, 14, 0, true},
		{"instance's SMs unread", 0, 98, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, "tenants:\n  - {name: small, selectors: [{executable: small}]}\n",
				BuilderOptions{Prices: &Prices{Currency: "USD", PerGPUHour: gpu.Float(7)}})
			var s *Snapshot
			for i := range 2 {
				d := gpu.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA A100-SXM4-80GB", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
					SMCount: tc.gpuSMs, MIGSMCount: tc.fullSMs, EnergyJoules: gpu.Float(float64(i) * 3000), // 300 W over 10 s
					MIG: []gpu.MIGInstance{{UUID: "MIG-a", GPUInstanceID: 13, Profile: "1g.10gb", SMCount: tc.instSMs, MemoryTotalBytes: 10 << 30, MemoryUsedBytes: 5 << 30,
						Activity: gpu.Activity{SMActive: gpu.Float(1)}}},
					Processes: []gpu.Process{{PID: 7, Name: "small", UID: -1, GPUInstanceID: 13, ComputeInstanceID: 0, UsedMemoryBytes: gpu.Uint(5 << 30)}}}
				r := &gpu.Readings{Time: time.Unix(int64(10*i), 0), Devices: []gpu.Device{d}}
				if i > 0 {
					r.Interval = 10 * time.Second
				}
				s = b.Build(r, gpu.SamplerStats{})
			}
			m := meterOf(s, "small")
			if m == nil {
				t.Fatal("no meter for small")
			}
			want := fig3{10 * tc.fraction, 7 * 10 * tc.fraction / 3600, 3000 * tc.fraction}
			if got := (fig3{m.GPUSecondsReserved, m.Costs[0].GPUTime, m.EnergyJoules}); !got.close(want) {
				t.Errorf("over 10 s at 300 W: reserved GPU-s, gpu_time cost at 7 USD/GPU-hour, energy = %v, want %v", got, want)
			}
			if m.ReservedUnknown != tc.unknown || m.UsedUnknown != tc.unknown || m.EnergyUnknown != tc.unknown {
				t.Errorf("reserved, used and energy unknown: %v %v %v, want %v", m.ReservedUnknown, m.UsedUnknown, m.EnergyUnknown, tc.unknown)
			}
			checkConserved(t, s.Meters, s.GPUMeters)
		})
	}
}

type fig3 [3]float64

func (a fig3) close(b fig3) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}
