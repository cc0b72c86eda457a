package oracle

import (
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// share is the tenant of the tenants file a process is attributed to and
// that tenant's share bounds (share.min, share.max; a max of 1 where the
// file gives none).
type share struct {
	tenant   string
	min, max float64
}

// shares returns, by PID, the share bounds of the tenant of cfg each
// process of sc is attributed to (simrun.Attribution, as the tuner
// attributes it), for the processes whose tenant has bounds; none
// without a tenants file.
func shares(sc *sim.Scenario, cfg *tenant.Config) (map[uint32]share, error) {
	if cfg == nil || len(cfg.Tenants) == 0 {
		return nil, nil
	}
	by, err := simrun.Attribution(sc, cfg)
	if err != nil {
		return nil, err
	}
	out := map[uint32]share{}
	for pid, name := range by {
		t := cfg.TenantByName(name)
		if t == nil || t.Share == nil {
			continue
		}
		s := share{tenant: name, min: t.Share.Min, max: t.Share.Max}
		if s.max == 0 {
			s.max = 1
		}
		out[pid] = s
	}
	return out, nil
}

// capBounds is the range of MPS active-thread fractions the tuner's
// Bounds guard admits for process pid on GPU g under the moves given:
// its tenant's share bounds split over that tenant's clients on the GPU,
// as the guard splits them; (0, 1] where its tenant has none.
func (o *oracleSearch) capBounds(moves []move, g int, pid uint32) (lo, hi float64) {
	s, ok := o.shares[pid]
	if !ok {
		return 0, 1
	}
	n := 0
	for _, ti := range tenantsOn(o.sc, moves, g) {
		if t, ok := o.shares[o.sc.Tenants[ti].Process.PID]; ok && t.tenant == s.tenant {
			n++
		}
	}
	n = max(n, 1)
	lo, hi = s.min/float64(n), min(s.max/float64(n), 1)
	return min(lo, hi), hi
}

// capsWithin is grid clipped to the caps pid may be given on GPU g under
// the moves (capBounds): a value outside them is replaced by the bound
// it passes, "uncapped" (1) by share.max where that is below 1; each
// value once, ascending.
func (o *oracleSearch) capsWithin(moves []move, g int, pid uint32, grid []float64) []float64 {
	lo, hi := o.capBounds(moves, g, pid)
	out := make([]float64, 0, len(grid))
	for _, v := range grid {
		out = append(out, min(max(v, lo), hi))
	}
	return slices.Compact(out)
}

// atBounds returns the caps of GPU g in phase pi so far, with each of
// pids that no phase up to pi has capped (it runs uncapped) capped at its
// upper bound where that is below 1: a search stage that caps one tenant
// at a time replays the others at what the tuner may give them.
func (o *oracleSearch) atBounds(p *Plan, pi, g int, pids []uint32) map[uint32]float64 {
	out := map[uint32]float64{}
	for k, v := range p.Phases[pi].GPUs[g].Caps {
		out[k] = v
	}
	for _, pid := range pids {
		if _, hi := o.capBounds(nil, g, pid); hi < 1 && !o.capped(p, pi, g, pid) {
			out[pid] = hi
		}
	}
	return out
}

// capped says whether a phase up to pi caps pid on GPU g.
func (o *oracleSearch) capped(p *Plan, pi, g int, pid uint32) bool {
	for i := pi; i >= 0; i-- {
		if _, ok := p.Phases[i].GPUs[g].Caps[pid]; ok {
			return true
		}
	}
	return false
}
