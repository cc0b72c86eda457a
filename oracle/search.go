package oracle

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
)

// searchKnob replays phases up to pi with candidate k on every GPU at once
// (the GPUs are independent) and keeps each GPU's best.
func (o *oracleSearch) searchKnob(ctx context.Context, p *Plan, pi int, c candidates) error {
	n := c.most()
	if n <= 1 {
		if n == 1 {
			for g := range c {
				if len(c[g]) == 1 {
					p.Phases[pi].GPUs[g] = c[g][0]
				}
			}
		}
		return nil
	}
	results := make([]*phaseRun, n)
	err := parallel(ctx, n, func(k int) error {
		trial := clonePlan(p)
		for g := range c {
			if len(c[g]) > 0 {
				trial.Phases[pi].GPUs[g] = c[g][min(k, len(c[g])-1)]
			}
		}
		w, err := o.replay(ctx, trial, pi)
		results[k] = w
		return err
	})
	o.Replays += n
	if err != nil {
		return err
	}
	for g := range c {
		if len(c[g]) == 0 {
			continue
		}
		uuid := gpuUUID(&results[0].WindowStats, g)
		ws := results[:len(c[g])]
		best := 0
		scores := scoreAll(ws, func(tw sim.TenantWindow) bool { return tw.GPU == uuid })
		for k := range scores {
			if scores[k].better(scores[best]) {
				best = k
			}
		}
		p.Phases[pi].GPUs[g] = c[g][best]
	}
	return nil
}

// searchMoves tries moving each tenant of a GPU that misses an SLO (in
// any phase) or caps a tenant without one to the GPU of the same sharing
// mode with the most memory to spare, and keeps the best move that
// improves the whole host.
func (o *oracleSearch) searchMoves(ctx context.Context, p *Plan) error {
	base, err := o.replayAll(ctx, p)
	o.Replays++
	if err != nil {
		return err
	}
	var trials []*Plan
	for g, spec := range o.sc.GPUs {
		if gpu.SharingMode(spec.Sharing) != gpu.SharingMPS && gpu.SharingMode(spec.Sharing) != gpu.SharingTimeSlice {
			continue
		}
		if !missesSLO(base, gpuUUID(&base[0].WindowStats, g)) && !o.capsBatch(p, g) {
			continue
		}
		to := o.roomiest(p, g, spec.Sharing)
		if to < 0 {
			continue
		}
		for _, ti := range tenantsOn(o.sc, p.Moves, g) {
			if o.free(p, to) < uint64(o.sc.Tenants[ti].Memory) {
				continue
			}
			t := clonePlan(p)
			t.Moves = append(t.Moves, move{Tenant: ti, To: to})
			pid := o.sc.Tenants[ti].Process.PID
			_, hi := o.capBounds(t.Moves, to, pid)
			for pi := range t.Phases {
				delete(t.Phases[pi].GPUs[g].Caps, pid)
				if hi < 1 && gpu.SharingMode(spec.Sharing) == gpu.SharingMPS {
					// uncapped there is more than its share bounds allow
					if t.Phases[pi].GPUs[to].Caps == nil {
						t.Phases[pi].GPUs[to].Caps = map[uint32]float64{}
					}
					t.Phases[pi].GPUs[to].Caps[pid] = hi
				}
			}
			trials = append(trials, t)
		}
	}
	if len(trials) == 0 {
		return nil
	}
	results := make([][]*phaseRun, len(trials))
	err = parallel(ctx, len(trials), func(k int) error {
		w, err := o.replayAll(ctx, trials[k])
		results[k] = w
		return err
	})
	o.Replays += len(trials)
	if err != nil {
		return err
	}
	runs := []*phaseRun{mergedRun(base)}
	for _, r := range results {
		runs = append(runs, mergedRun(r))
	}
	scores := scoreAll(runs, func(sim.TenantWindow) bool { return true })
	best := -1
	for k := range results {
		if scores[k+1].better(scores[max(best, -1)+1]) {
			best = k
		}
	}
	if best >= 0 {
		*p = *trials[best]
	}
	return nil
}

// mergedRun sums a run's phases into one.
func mergedRun(phases []*phaseRun) *phaseRun {
	ws := make([]*sim.WindowStats, len(phases))
	work, held := map[string]float64{}, map[string]float64{}
	for i, ph := range phases {
		ws[i] = &ph.WindowStats
		for t, v := range ph.work {
			work[t] += v
		}
		for t, v := range ph.heldWork {
			held[t] += v
		}
	}
	return &phaseRun{WindowStats: *merged(ws), work: work, heldWork: held}
}

// merged sums windows' request counts and work into one per tenant (its
// GPU, overdue requests and steps to redo at the end of the last; the GPU
// figures of the first), what the oracle's scores read.
func merged(phases []*sim.WindowStats) *sim.WindowStats {
	out := &sim.WindowStats{GPUs: phases[0].GPUs}
	at := map[string]int{}
	for _, w := range phases {
		for _, tw := range w.Tenants {
			i, ok := at[tw.Tenant]
			if !ok {
				i = len(out.Tenants)
				at[tw.Tenant] = i
				out.Tenants = append(out.Tenants, sim.TenantWindow{Tenant: tw.Tenant, SLOQuantile: tw.SLOQuantile, SLOTarget: tw.SLOTarget, SLOMetric: tw.SLOMetric})
			}
			m := &out.Tenants[i]
			m.GPU = tw.GPU
			m.Completed += tw.Completed
			m.Tokens += tw.Tokens
			m.Good += tw.Good
			m.Dropped += tw.Dropped
			m.DroppedTokens += tw.DroppedTokens
			m.Work += tw.Work
			m.Overdue = tw.Overdue
			m.Redo = tw.Redo
		}
	}
	return out
}

// capsBatch tells whether the plan caps a tenant without an SLO on GPU g
// in some phase below what its share bounds allow (capBounds: a cap at
// share.max is the tenant's bound, not room given to the others).
func (o *oracleSearch) capsBatch(p *Plan, g int) bool {
	for _, ti := range tenantsOn(o.sc, p.Moves, g) {
		t := o.sc.Tenants[ti]
		_, hi := o.capBounds(p.Moves, g, t.Process.PID)
		for _, ph := range p.Phases {
			if f, ok := ph.GPUs[g].Caps[t.Process.PID]; ok && f < hi && t.SLO == nil {
				return true
			}
		}
	}
	return false
}

// missesSLO says whether a tenant of GPU uuid misses its SLO in some
// phase, or over the run (one that never served met it in no phase but
// broke it in none either).
func missesSLO(phases []*phaseRun, uuid string) bool {
	for _, w := range phases {
		for _, tw := range w.Tenants {
			if tw.GPU == uuid && tw.SLOTarget > 0 && !report.Held(tw) {
				return true
			}
		}
	}
	for _, tw := range mergedRun(phases).Tenants {
		if tw.GPU == uuid && tw.SLOTarget > 0 && !report.RunMet(tw) {
			return true
		}
	}
	return false
}

// roomiest is the GPU other than g, sharing the same way, with the most
// memory to spare; -1 when there is none.
func (o *oracleSearch) roomiest(p *Plan, g int, sharing string) int {
	best, room := -1, uint64(0)
	for h, spec := range o.sc.GPUs {
		if h == g || spec.Sharing != sharing {
			continue
		}
		if f := o.free(p, h); f > room {
			best, room = h, f
		}
	}
	return best
}

// free is the memory of GPU g not held by its tenants or reserved.
func (o *oracleSearch) free(p *Plan, g int) uint64 {
	total := o.totalMemory(g)
	used := uint64(o.sc.GPUs[g].Reserved)
	for _, ti := range tenantsOn(o.sc, p.Moves, g) {
		used += uint64(o.sc.Tenants[ti].Memory)
	}
	if used >= total {
		return 0
	}
	return total - used
}

// totalMemory reads GPU g's memory from its model name ("...-80GB").
func (o *oracleSearch) totalMemory(g int) uint64 {
	m := o.sc.GPUs[g].Model
	i := strings.LastIndex(m, "-")
	if i < 0 {
		return 0
	}
	return profileMemory("." + strings.ToLower(m[i+1:]))
}

// scoreAll scores the tenants keep selects in each run; goodput (work) is
// each tenant's held (all) work, as the run report counts it (phaseRun),
// relative to the largest any run gave it (in size: a restart can leave a
// phase's work below nothing). The SLOs met over the run so far are
// judged on sofar as the run report's summary judges them (report.RunMet:
// a tenant with an SLO that has never served has not met it); those met
// inside the phase on the phase's window as a goodput window is judged
// (report.Held: a phase in which none of its requests ended holds), or
// where the window is the whole run as runMet.
func scoreAll(ws []*phaseRun, keep func(sim.TenantWindow) bool) []score {
	mostHeld, most := map[string]float64{}, map[string]float64{}
	for _, w := range ws {
		for _, tw := range w.Tenants {
			if keep(tw) && tw.SLOTarget == 0 {
				mostHeld[tw.Tenant] = max(mostHeld[tw.Tenant], math.Abs(w.heldWork[tw.Tenant]))
				most[tw.Tenant] = max(most[tw.Tenant], math.Abs(w.work[tw.Tenant]))
			}
		}
	}
	out := make([]score, len(ws))
	for k, w := range ws {
		run, inPhase := &w.WindowStats, report.RunMet
		if w.sofar != nil {
			run, inPhase = w.sofar, report.Held
		}
		for _, tw := range run.Tenants {
			if keep(tw) && report.RunMet(tw) {
				out[k].runMet++
			}
		}
		for _, tw := range w.Tenants {
			if !keep(tw) {
				continue
			}
			if tw.SLOTarget == 0 {
				if m := mostHeld[tw.Tenant]; m > 0 {
					out[k].goodput += w.heldWork[tw.Tenant] / m
				}
				if m := most[tw.Tenant]; m > 0 {
					out[k].work += w.work[tw.Tenant] / m
				}
				continue
			}
			if inPhase(tw) {
				out[k].met++
			}
			if ended := tw.Ended() + tw.Overdue; ended > 0 {
				out[k].attainment += float64(tw.Good) / float64(ended)
			}
		}
	}
	return out
}

func gpuUUID(w *sim.WindowStats, g int) string {
	for _, gw := range w.GPUs {
		if gw.Index == g {
			return gw.UUID
		}
	}
	return ""
}

func clonePlan(p *Plan) *Plan {
	q := &Plan{Moves: slices.Clone(p.Moves), Phases: slices.Clone(p.Phases), maxMHz: p.maxMHz}
	for i := range q.Phases {
		q.Phases[i].GPUs = slices.Clone(q.Phases[i].GPUs)
		for g := range q.Phases[i].GPUs {
			if c := q.Phases[i].GPUs[g].Caps; c != nil {
				m := make(map[uint32]float64, len(c))
				for k, v := range c {
					m[k] = v
				}
				q.Phases[i].GPUs[g].Caps = m
			}
		}
	}
	return q
}

// parallel runs f(0..n-1) on as many goroutines as there are CPUs.
func parallel(ctx context.Context, n int, f func(k int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	next := make(chan int)
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for k := range next {
				errs[k] = f(k)
			}
		})
	}
	for k := range n {
		if ctx.Err() != nil {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	return cmp(errors.Join(errs...), ctx.Err())
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
