package nvml

import (
	"math"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// energyStart is the fake GPU 0's counter at the first sample: 1e9 J, a
// month and more at 300 W.
const energyStart = uint64(1e12) // mJ

// energyReads makes GPU 0's energy counter answer reads in turn (mJ), the
// last one for good.
func energyReads(f *fixture, reads ...uint64) {
	i := 0
	f.devs[0].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		v := reads[min(i, len(reads)-1)]
		i++
		return v, nvml.SUCCESS
	}
}

// One reading of 2^64-1 mJ between true ones was served as 1.8e16 J, the
// true ones after it as a counter reset; a counter read behind its last
// reading likewise. A reading that does not follow from the last one
// served (ahead by more than the GPU can draw, or behind) is now refused,
// the last kept as the one the next is checked against; readings that
// agree with one another for energyguard.Confirm samples are the counter's own
// new level.
func TestEnergyCounterGlitches(t *testing.T) {
	const (
		s   = 1e12    // mJ: 1e9 J, a month and more at 300 W
		w   = 300_000 // mJ a second at 300 W
		top = math.MaxUint64
	)
	for _, tc := range []struct {
		name  string
		reads []uint64 // one a second
		want  []int64  // served, mJ; -1 absent
		log   string
	}{
		{"true readings", []uint64{s, s + w, s + 2*w}, []int64{s, s + w, s + 2*w}, ""},
		{"all ones between true readings", []uint64{s, s + w, top, s + 3*w, s + 4*w},
			[]int64{s, s + w, -1, s + 3*w, s + 4*w}, "reading refused"},
		// 1 MJ in a second, far more than 10 kW
		{"ahead once", []uint64{s, s + w, s + 1e9, s + 3*w}, []int64{s, s + w, -1, s + 3*w}, "reading refused"},
		{"behind once", []uint64{s, s + w, 0, s + 3*w}, []int64{s, s + w, -1, s + 3*w}, "reading refused"},
		{"all ones twice", []uint64{s, top, top, top, s + 4*w}, []int64{s, -1, -1, -1, s + 4*w}, "reading refused"},
		{"first reading all ones", []uint64{top, s, s + w}, []int64{-1, s, s + w}, ""},
		// the counter restarted (or the reading kept was the glitch):
		// three readings in a row that agree are taken
		{"counter restarted", []uint64{s, w, 2 * w, 3 * w, 4 * w}, []int64{s, -1, -1, 3 * w, 4 * w}, "new level"},
		{"counter ahead for good", []uint64{s, s + 1e9, s + 1e9 + w, s + 1e9 + 2*w, s + 1e9 + 3*w},
			[]int64{s, -1, -1, s + 1e9 + 2*w, s + 1e9 + 3*w}, "new level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			energyReads(f, tc.reads...)
			b := f.backend()
			for i, want := range tc.want {
				d := sample(t, b).Devices[0]
				f.clock.Advance(time.Second)
				if !d.Up {
					t.Fatalf("sample %d: GPU down: %s", i, d.Err)
				}
				switch {
				case want < 0 && d.EnergyJoules != nil:
					t.Errorf("sample %d: read %d mJ, served %g J; want absent", i, tc.reads[i], *d.EnergyJoules)
				case want >= 0 && (d.EnergyJoules == nil || *d.EnergyJoules != float64(want)/1000):
					t.Errorf("sample %d: read %d mJ, served %v; want %g J", i, tc.reads[i], d.EnergyJoules, float64(want)/1000)
				}
			}
			if tc.log != "" && f.logs.count(tc.log, "uuid="+f.devs[0].UUID) == 0 {
				t.Errorf("no log line with %q:\n%s", tc.log, f.logs.String())
			}
		})
	}
}

// The bound grows with the time between readings: a GPU not read for
// minutes (down, backing off) has its counter taken after.
func TestEnergyCounterAfterAGap(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	gap := 5 * time.Minute
	after := energyStart + uint64(gap.Seconds())*700_000 // 700 W throughout
	energyReads(f, energyStart, after)
	b := f.backend()
	sample(t, b)
	f.clock.Advance(gap)
	if d := sample(t, b).Devices[0]; d.EnergyJoules == nil || *d.EnergyJoules != float64(after)/1000 {
		t.Errorf("after %v at 700 W: served %v, want %g J", gap, d.EnergyJoules, float64(after)/1000)
	}
}

// A lost GPU comes back reset: its counter's first reading after is taken
// whatever it is, the one before the loss forgotten.
func TestEnergyCounterAfterGPULost(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	energyReads(f, energyStart, 1000)
	b := f.backend()
	sample(t, b)
	f.fail(0, "GetMemoryInfo", nvml.ERROR_GPU_IS_LOST)
	f.clock.Advance(time.Second)
	if sample(t, b).Devices[0].Up {
		t.Fatal("lost GPU up")
	}
	f.fail(0, "GetMemoryInfo", nvml.SUCCESS)
	f.clock.Advance(backoffBase + time.Second)
	if d := sample(t, b).Devices[0]; !d.Up || d.EnergyJoules == nil || *d.EnergyJoules != 1 {
		t.Errorf("after the reset: up=%v energy %v, want 1 J", d.Up, d.EnergyJoules)
	}
}

// The tenants' energy: a spike of the counter billed a tenant 9.2e15 J,
// and metering stopped for good after it (the true readings below it
// taken for copies read late). Through the backend, the sample with the
// spike is one read without the counter: over 20 s at 300 W the GPU and
// its tenant count 20 x 300 J at most.
func TestEnergySpikeNotBilled(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	const n = 20
	reads := make([]uint64, n)
	for i := range reads {
		reads[i] = energyStart + uint64(i)*300_000
	}
	reads[5] = math.MaxUint64
	energyReads(f, reads...)
	cfg, err := tenant.ParseConfig("t.yaml", []byte("tenants:\n  - {name: a, selectors: [{executable: proc7}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	b := f.backend()
	var snap *tenant.Snapshot
	prevServed := 0.0
	for i := 0; i < n; i++ {
		rd := sample(t, b)
		if e := rd.Devices[0].EnergyJoules; e != nil {
			if *e < prevServed {
				t.Errorf("sample %d: the served counter went back from %g J to %g J", i, prevServed, *e)
			}
			prevServed = *e
		}
		snap = tb.Build(rd, gpu.SamplerStats{})
		f.clock.Advance(time.Second)
	}
	most := float64(n-1) * 300
	var gpuJ float64
	for _, g := range snap.GPUMeters {
		if g.UUID == f.devs[0].UUID {
			gpuJ = g.EnergyJoules
		}
	}
	if gpuJ < most-1e-6 || gpuJ > most+1e-6 {
		t.Errorf("GPU 0 counted %g J over %d s at 300 W, want %g J", gpuJ, n-1, most)
	}
	found := false
	for _, m := range snap.Meters {
		if m.Tenant == "a" && m.UUID == f.devs[0].UUID {
			found = true
			if m.EnergyJoules <= 0 || m.EnergyJoules > most {
				t.Errorf("tenant a billed %g J on GPU 0, want some of the %g J it counted", m.EnergyJoules, most)
			}
		}
	}
	if !found {
		t.Fatalf("no meter of tenant a on GPU 0: %+v", snap.Meters)
	}
}

// A step of the counter was bounded by the power limit at the reading that
// ends it: a limit raised while the counter's reads failed, and lowered
// again before they came back, left the energy drawn at the raised limit
// refused. The limit of a sample whose read failed now bounds the next
// step too.
func TestEnergyBoundedByTheLimitWhileUnread(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	const after = energyStart + 650*3500*1000 // mJ: 650 W for most of an hour
	reads := []uint64{energyStart, 0, 0, after}
	limits := []uint32{100_000, 700_000, 100_000, 100_000} // mW
	i := 0
	f.devs[0].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		if reads[i] == 0 {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return reads[i], nvml.SUCCESS
	}
	f.devs[0].GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return limits[i], nvml.SUCCESS }
	b := f.backend()
	for _, step := range []time.Duration{time.Minute, 58 * time.Minute, time.Minute, 0} {
		d := sample(t, b).Devices[0]
		if want := reads[i] != 0; (d.EnergyJoules != nil) != want {
			t.Errorf("sample %d (limit %d mW): energy %v, want served %v", i, limits[i], d.EnergyJoules, want)
		}
		f.clock.Advance(step)
		i++
	}
}
