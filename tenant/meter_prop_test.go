package tenant

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestMeterPropertiesOnRandomSamples meters random sample sequences of one
// GPU (fixed seeds), whole or MIG, under either rule: counters read,
// missing, reset by a driver reload or read late (a step back); the GPU
// lost; tenants with SM activity, kernel-busy time or neither, with or
// without a reservation, coming and forgotten. On every sample no
// tenant's energy decreases; the GPU counts no more than it drew; no
// energy, used or reserved time is charged while its series is not served
// (unknown); the tenants, the forgotten
// ones and the idle energy add up to the GPU's, and their costs to its
// energy and time metered at the prices; unsampled and unattributed energy
// are parts of the idle energy.
func TestMeterPropertiesOnRandomSamples(t *testing.T) {
	prices := &Prices{Currency: "USD", PerGPUHour: gpu.Float(3.6), PerKWh: gpu.Float(3.6)}
	names := []string{"a", "b", "c"}
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 0))
		mig := seed%2 == 1
		rule := IdleToIdle
		if rng.IntN(2) == 0 {
			rule = IdleByReservation
		}
		fail := func(i int, format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (%s, MIG %v) sample %d: "+format, append([]any{seed, rule, mig, i}, args...)...)
		}
		m := newMeterState()
		at := time.Unix(1000, 0)
		e := 1e6          // the GPU's counter, J
		var drawn float64 // since the first sample, but what a reload lost
		prev := map[string]float64{}
		var gone, goneCost, goneTime, metered float64 // of forgotten tenants; seconds metered
		for i := range 12 {
			dt := time.Duration(1+rng.IntN(3)) * time.Second
			at = at.Add(dt)
			inc := float64(rng.IntN(500))
			e += inc
			drawn += inc
			var read *float64
			switch rng.IntN(7) {
			case 0: // no counter
			case 1: // a driver reload
				e = float64(rng.IntN(100))
				drawn += e - inc
				read = gpu.Float(e)
			case 2: // a copy read up to 1 kJ late (not soon after a reload, where it may read as one)
				read = gpu.Float(e)
				if e > 1e5 {
					read = gpu.Float(e - float64(rng.IntN(1000)))
				}
			default:
				read = gpu.Float(e)
			}
			up := rng.IntN(6) != 0
			var usage []Usage
			for _, name := range names {
				if rng.IntN(2) == 0 {
					continue
				}
				u := Usage{Tenant: name, UUID: "G", MemoryUsedBytes: 1}
				switch rng.IntN(3) {
				case 0:
					u.SMActive = gpu.Float(rng.Float64())
				case 1:
					u.KernelBusy = gpu.Float(rng.Float64())
				}
				if mig {
					u.GPUInstance = []string{"", "1", "2", "2"}[rng.IntN(4)]
					u.KernelBusy = nil
					if u.GPUInstance == "" {
						u.SMActive = nil
					}
				}
				if !mig && rng.IntN(3) == 0 {
					u.Reservation = gpu.Float(rng.Float64())
				}
				usage = append(usage, u)
			}
			if rng.IntN(5) == 0 {
				k := meterKey{"G", names[rng.IntN(len(names))]}
				if mt := m.tenants[k]; mt != nil {
					gone += mt.EnergyJoules
					for _, c := range mt.Costs {
						goneCost += c.Energy
						goneTime += c.GPUTime
					}
				}
				m.forget(k)
				delete(prev, k.tenant) // back, it starts at 0
			}
			d := gpu.Device{UUID: "G", Up: up, EnergyJoules: read, NoProcessSamples: rng.IntN(2) == 0}
			if mig {
				d.MIGEnabled = true
				d.SMCount = []int{0, 132, 132}[rng.IntN(3)]
				d.MIGSMCount = []int{0, 132}[rng.IntN(2)]
				d.MIG = []gpu.MIGInstance{{GPUInstanceID: 1, SMCount: []int{0, 60, 60}[rng.IntN(3)]}, {GPUInstanceID: 2, SMCount: 64}}
			}
			r := &gpu.Readings{Time: at, Interval: dt, Devices: []gpu.Device{d}}
			if i == 0 {
				r.Interval = 0
			}
			meters, gpus := m.meter(rule, prices, r, usage)
			if len(gpus) == 0 {
				continue
			}
			g := gpus[0]
			if up && i > 0 {
				metered += dt.Seconds()
			}
			sum, cost, timeCost := gone, goneCost, goneTime
			for _, mt := range meters {
				sum += mt.EnergyJoules
				for _, c := range mt.Costs {
					cost += c.Energy
					timeCost += c.GPUTime
				}
				if math.IsNaN(mt.EnergyJoules) || mt.EnergyJoules < prev[mt.Tenant]-1e-9 {
					fail(i, "%s's energy %g J, was %g J", mt.Tenant, mt.EnergyJoules, prev[mt.Tenant])
				}
				prev[mt.Tenant] = mt.EnergyJoules
				if mt.EnergyUnknown && mt.EnergyJoules != 0 || mt.UsedUnknown && mt.GPUSecondsUsed != 0 || mt.ReservedUnknown && mt.GPUSecondsReserved != 0 {
					fail(i, "%s charged while not served: %+v", mt.Tenant, mt)
				}
			}
			for _, c := range g.IdleCosts {
				cost += c.Energy
				timeCost += c.GPUTime
			}
			// (a first reading read late is up to 1 kJ older)
			if g.EnergyJoules > drawn+1000 {
				fail(i, "the GPU counted %g J, it drew %g J", g.EnergyJoules, drawn)
			}
			if math.Abs(sum+g.IdleEnergyJoules-g.EnergyJoules) > 1e-6*max(1, g.EnergyJoules) {
				fail(i, "tenants %g J + idle %g J != the GPU's %g J", sum, g.IdleEnergyJoules, g.EnergyJoules)
			}
			if g.UnsampledEnergyJoules+g.UnattributedEnergyJoules > g.IdleEnergyJoules+1e-6*max(1, g.EnergyJoules) {
				fail(i, "unsampled %g J + unattributed %g J > idle %g J", g.UnsampledEnergyJoules, g.UnattributedEnergyJoules, g.IdleEnergyJoules)
			}
			if math.Abs(cost-g.EnergyJoules*3.6/3.6e6) > 1e-9*max(1, cost) {
				fail(i, "energy cost %g, the GPU's energy at the price %g", cost, g.EnergyJoules*3.6/3.6e6)
			}
			if math.Abs(timeCost-metered*3.6/3600) > 1e-9*max(1, timeCost) {
				fail(i, "gpu_time cost %g, %g s metered at the price %g", timeCost, metered, metered*3.6/3600)
			}
		}
	}
}
