package oracle

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// candidates holds, by GPU, the settings to try; a GPU with none keeps
// its current one.
type candidates [][]gpuSetting

func (c candidates) most() int {
	n := 0
	for _, g := range c {
		n = max(n, len(g))
	}
	return n
}

// tenantsOn returns the indices of the tenants on GPU g under the plan's
// moves.
func tenantsOn(sc *sim.Scenario, moves []move, g int) []int {
	var out []int
	for i, t := range sc.Tenants {
		at := t.GPU
		for _, m := range moves {
			if m.Tenant == i {
				at = m.To
			}
		}
		if at == g {
			out = append(out, i)
		}
	}
	return out
}

// primaryCandidates are the settings of each GPU's sharing mechanism to
// try at a stage of phase pi's search; nil when the stage is past the
// last. Stage 0 tries every setting but the caps of GPUs with more than
// two MPS tenants; stage k tries the caps of those GPUs' kth tenant over
// the best caps found so far.
func (o *oracleSearch) primaryCandidates(p *Plan, pi, stage int) candidates {
	c := make(candidates, len(o.sc.GPUs))
	more := false
	for g, spec := range o.sc.GPUs {
		// Tenants without an SLO first: capping them is what can make
		// room for the others.
		on := tenantsOn(o.sc, nil, g)
		slices.SortStableFunc(on, func(a, b int) int {
			return cmpBool(o.sc.Tenants[a].SLO != nil, o.sc.Tenants[b].SLO != nil)
		})
		var pids []uint32
		for _, ti := range on {
			pids = append(pids, o.sc.Tenants[ti].Process.PID)
		}
		mode := gpu.SharingMode(spec.Sharing)
		if mode == gpu.SharingMPS && len(pids) > 2 {
			if stage == 0 || stage > len(pids) {
				more = more || stage == 0
				continue
			}
			more = true
			pid := pids[stage-1]
			c[g] = capStage(o.atBounds(p, pi, g, pids), pid, o.capsWithin(nil, g, pid, capGridMany))
			continue
		}
		if stage > 0 {
			continue
		}
		more = true
		switch mode {
		case gpu.SharingMPS:
			grids := make([][]float64, len(pids))
			for i, pid := range pids {
				grids[i] = o.capsWithin(nil, g, pid, capGridFew)
			}
			c[g] = capGrid(pids, grids)
		case gpu.SharingTimeSlice:
			for _, l := range timeSlices {
				c[g] = append(c[g], gpuSetting{TimeSlice: l})
			}
		case gpu.SharingVGPU:
			if pi == 0 {
				for _, v := range vgpuPolicys {
					c[g] = append(c[g], gpuSetting{VGPU: v})
				}
			}
		case gpu.SharingMIG:
			c[g] = o.layoutCandidates(p, pi, g)
		}
	}
	if !more {
		return nil
	}
	return c
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// layoutCandidates are, for the MIG GPU g at phase pi, the layout it
// has (kept) and every other order of its profiles in which the tenants
// of each instance fit its memory; none when there is no other.
func (o *oracleSearch) layoutCandidates(p *Plan, pi, g int) []gpuSetting {
	cur := o.layoutAt(p, pi, g)
	need := make([]uint64, len(cur))
	for _, ti := range tenantsOn(o.sc, p.Moves, g) {
		if i := o.sc.Tenants[ti].MIGInstance; i >= 0 && i < len(need) {
			need[i] += uint64(o.sc.Tenants[ti].Memory)
		}
	}
	out := []gpuSetting{{}}
	for _, l := range permutations(cur) {
		fits := !slices.Equal(l, cur)
		for i, prof := range l {
			fits = fits && profileMemory(prof) >= need[i]
		}
		if fits {
			out = append(out, gpuSetting{Layout: l})
		}
	}
	if len(out) == 1 {
		return nil
	}
	return out
}

// layoutAt is GPU g's MIG layout during phase pi before its own setting:
// the last relayout of an earlier phase, else the scenario's.
func (o *oracleSearch) layoutAt(p *Plan, pi, g int) []string {
	for i := pi - 1; i >= 0; i-- {
		if l := p.Phases[i].GPUs[g].Layout; l != nil {
			return l
		}
	}
	var out []string
	for _, m := range o.sc.GPUs[g].MIG {
		out = append(out, m.Profile)
	}
	return out
}

// permutations returns every distinct order of xs.
func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{slices.Clone(xs)}
	}
	var out [][]string
	seen := map[string]bool{}
	for i := range xs {
		if seen[xs[i]] {
			continue
		}
		seen[xs[i]] = true
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, r := range permutations(rest) {
			out = append(out, append([]string{xs[i]}, r...))
		}
	}
	return out
}

// profileMemory reads a MIG profile's memory from its name ("3g.40gb").
func profileMemory(profile string) uint64 {
	_, mem, ok := strings.Cut(profile, ".")
	if !ok || !strings.HasSuffix(mem, "gb") {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(mem, "gb"), 10, 64)
	if err != nil {
		return 0
	}
	return n * 1e9
}

// capStage is cur with pid's cap set to each grid value in turn, from the
// largest.
func capStage(cur map[uint32]float64, pid uint32, grid []float64) []gpuSetting {
	var out []gpuSetting
	for gi := len(grid) - 1; gi >= 0; gi-- {
		m := make(map[uint32]float64, len(cur)+1)
		for k, v := range cur {
			m[k] = v
		}
		m[pid] = grid[gi]
		out = append(out, gpuSetting{Caps: m})
	}
	return out
}

// capGrid is every combination of the values of grids (one for each of
// pids) over pids, all at their largest first.
func capGrid(pids []uint32, grids [][]float64) []gpuSetting {
	out := []gpuSetting{{Caps: map[uint32]float64{}}}
	for i, pid := range pids {
		grid := grids[i]
		var next []gpuSetting
		for _, s := range out {
			for gi := len(grid) - 1; gi >= 0; gi-- {
				m := make(map[uint32]float64, len(s.Caps)+1)
				for k, v := range s.Caps {
					m[k] = v
				}
				m[pid] = grid[gi]
				next = append(next, gpuSetting{Caps: m})
			}
		}
		out = next
	}
	if len(pids) == 0 {
		return nil
	}
	return out
}

// clockCandidates are each GPU's setting so far with the clock unlocked
// and locked.
func (o *oracleSearch) clockCandidates(p *Plan, pi int) candidates {
	c := make(candidates, len(o.sc.GPUs))
	for g := range o.sc.GPUs {
		if o.maxMHz[g] == 0 {
			continue
		}
		cur := p.Phases[pi].GPUs[g]
		locked := cur
		locked.Lock = true
		cur.Lock = false
		c[g] = []gpuSetting{cur, locked}
	}
	return c
}
