package tenant

import (
	"maps"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// owedEnergy is what samples of a GPU read without its energy counter are
// owed of its next increase: seconds metered, and the seconds weighted by
// each tenant's part of the energy, by the idle part and by its
// unattributed part (the weights add up to the seconds). The tenants' and
// the idle weights are kept by the prices in force at the samples owed
// (parts), each part charged at its own prices when the increase is
// paid: a reload to other prices while the counter is not read (a page's
// copies between two collections, an outage) charges the energy drawn
// before it at the prices of then.
type owedEnergy struct {
	sec, unattributed float64
	parts             []*owedPart
}

// owedPart is the weights of the samples owed under one set of prices.
type owedPart struct {
	prices  *Prices // nil: none
	idle    float64
	tenants map[string]float64
}

// maxOwedParts bounds the sets of prices an owedEnergy keeps apart: the
// samples of a set past it are owed with the latest kept, and charged at
// its prices.
const maxOwedParts = 16

// at is the part of the samples owed under prices.
func (o *owedEnergy) at(prices *Prices) *owedPart {
	for _, p := range o.parts {
		if samePrices(p.prices, prices) {
			return p
		}
	}
	if len(o.parts) == maxOwedParts {
		return o.parts[len(o.parts)-1]
	}
	p := &owedPart{prices: prices, tenants: map[string]float64{}}
	o.parts = append(o.parts, p)
	return p
}

// samePrices says whether a and b charge alike (nil: nothing).
func samePrices(a, b *Prices) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := func(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.Currency == b.Currency && same(a.PerGPUHour, b.PerGPUHour) && same(a.PerKWh, b.PerKWh)
}

// payOwed splits owed joules of GPU d (meter g) among the samples that
// metered it without its energy counter (o), by their weights, each part
// at the prices in force at its samples. The part of a tenant forgotten
// since is idle.
func (m *meterState) payOwed(d *gpu.Device, g *GPUMeter, o *owedEnergy, owed float64) {
	perSec := owed / o.sec
	g.EnergyJoules += owed
	g.UnattributedEnergyJoules += perSec * o.unattributed
	for _, p := range o.parts {
		idle := perSec * p.idle
		for _, name := range slices.Sorted(maps.Keys(p.tenants)) {
			e := perSec * p.tenants[name]
			t := m.tenants[meterKey{d.UUID, name}]
			if t == nil {
				idle += e
				continue
			}
			t.EnergyJoules += e
			t.Costs = addCost(t.Costs, p.prices, 0, e)
		}
		g.IdleEnergyJoules += idle
		g.IdleCosts = addCost(g.IdleCosts, p.prices, 0, idle)
	}
}
