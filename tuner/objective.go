package tuner

import (
	"math"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A GPU's SLO error, which the engine judges a change by (a change that
// made it worse is reverted) and autotune steers: the priority-weighted
// error-budget burn of its latency tenants; and the share bounds the
// bounds guard keeps.

// Objective is a GPU's SLO error: the sum over its latency tenants of
// priority-weighted error-budget burn (capped at 10 each). Lower is better.
func Objective(s *State, uuid string) float64 {
	j := 0.0
	for _, lt := range LatencyTenantsOn(s, uuid) {
		att, ok := s.Fast[lt.Name].Attainment()
		if !ok {
			continue
		}
		j += WeightedBurn((1-att)/math.Max(1-lt.Quantile, 1e-3), lt.Priority)
	}
	return j
}

// shareBounds returns a tenant's share.min and share.max.
func shareBounds(s *State, name string) (lo, hi float64, ok bool) {
	if s == nil || s.Snapshot == nil || name == "" {
		return 0, 0, false
	}
	for _, t := range s.Snapshot.Tenants {
		if t.Name == name {
			hi = t.ShareMax
			if hi == 0 {
				hi = 1
			}
			return t.ShareMin, hi, true
		}
	}
	return 0, 0, false
}

// clientsOf counts a tenant's processes on a GPU (outside MIG instances).
func clientsOf(s *State, uuid, name string) int {
	if s == nil || s.Snapshot == nil {
		return 0
	}
	n := 0
	for _, u := range s.Snapshot.Usage {
		if u.UUID == uuid && u.Tenant == name && u.GPUInstance == "" {
			n += len(u.PIDs)
		}
	}
	return n
}

// WeightedBurn is one tenant's term of the SLO error: its burn, capped at
// 10, weighted by priority.
func WeightedBurn(burn float64, priority int) float64 {
	return math.Min(burn, 10) * (1 + float64(max(priority, 0))/10)
}

// LatencyTenant is a latency tenant on a GPU, with what the SLO error
// needs of it.
type LatencyTenant struct {
	Name     string
	Quantile float64
	Priority int
}

// LatencyTenantsOn returns the latency tenants with an SLO on a GPU.
func LatencyTenantsOn(s *State, uuid string) []LatencyTenant {
	if s == nil || s.Snapshot == nil {
		return nil
	}
	prio := map[string]int{}
	for _, t := range s.Snapshot.Tenants {
		prio[t.Name] = t.Priority
	}
	on := map[string]bool{}
	for _, u := range s.Snapshot.Usage {
		if u.UUID == uuid && u.Class == gpu.ClassLatency {
			on[u.Tenant] = true
		}
	}
	var out []LatencyTenant
	for _, slo := range s.Snapshot.SLOs {
		if on[slo.Tenant] {
			out = append(out, LatencyTenant{Name: slo.Tenant, Quantile: slo.Quantile, Priority: prio[slo.Tenant]})
		}
	}
	return out
}
