package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// oracleName is the policy that searches, by replaying the scenario, for
// the best static setting of each phase and then runs it.
const oracleName = "oracle"

// The oracle's search space, kept coarse so that a search replays a
// scenario at most a few dozen times per phase: MPS active-thread caps
// per tenant on a grid (every combination with two tenants or fewer per
// GPU; with more, one tenant at a time, each given the best caps found
// for those before it), every compute time-slice level, every vGPU
// scheduler policy, on a MIG GPU every order of its instances' profiles
// in which each tenant's memory fits (a relayout at the start of a phase:
// drain every instance, ConfigureMIG, start the tenants again, each in
// its instance of the new layout), the SM clock locked at its maximum or
// not, and moving one tenant off an MPS or time-sliced GPU that misses an
// SLO or caps a tenant without one to the GPU of the same sharing mode
// with the most memory to spare.
var (
	capGridFew  = []float64{0.1, 0.2, 0.3, 0.5, 0.75, 1} // two tenants or fewer
	capGridMany = []float64{0.1, 0.25, 0.5, 1}
	timeSlices  = []gpu.TimeSliceLevel{gpu.TimeSliceDefault, gpu.TimeSliceShort, gpu.TimeSliceMedium, gpu.TimeSliceLong}
	vgpuPolicys = []gpu.VGPUPolicy{gpu.VGPUPolicyBestEffort, gpu.VGPUPolicyEqualShare, gpu.VGPUPolicyFixedShare}
)

// gpuSetting is one GPU's static setting over a phase; zero fields leave
// the GPU as it is.
type gpuSetting struct {
	Caps      map[uint32]float64 // MPS active-thread fraction by client PID
	TimeSlice gpu.TimeSliceLevel
	VGPU      gpu.VGPUPolicy // first phase only: the scheduler is fixed once VMs run
	Lock      bool           // SM clock locked at its maximum
	Layout    []string       // MIG profiles by instance; nil keeps the layout
}

// move is a placement: the tenant with this index runs on GPU To from the
// start.
type move struct{ Tenant, To int }

// phase is a stretch of the scenario between two of its events.
type phase struct {
	Start, End time.Duration
	GPUs       []gpuSetting
}

// plan is what the oracle found.
type plan struct {
	Phases []phase
	Moves  []move
	maxMHz []uint32 // by GPU: the clock a lock holds
	// Replays is how many replays the search ran.
	Replays int
}

// score ranks a setting of one GPU (or the host) over a phase: SLOs met
// first, then the goodput of the tenants without an SLO (their work in the
// minutes in which every SLO on their GPU held, as the run report counts
// it; each relative to the best any candidate gave it), then the SLO
// tenants' attainment, then the same tenants' work in every minute (which
// tells candidates apart where no minute holds).
type score struct {
	met        int
	goodput    float64
	attainment float64
	work       float64
}

func (a score) better(b score) bool {
	if a.met != b.met {
		return a.met > b.met
	}
	if d := a.goodput - b.goodput; d > 1e-9 || d < -1e-9 {
		return d > 0
	}
	if d := a.attainment - b.attainment; d > 1e-9 || d < -1e-9 {
		return d > 0
	}
	return a.work > b.work+1e-9
}

// oracleSearch is one search over replays of a scenario.
type oracleSearch struct {
	sc     *sim.Scenario
	seed   int64
	dur    time.Duration
	phases []phase
	maxMHz []uint32 // by GPU; 0: no clock lock
	// Replays counts the replays the search ran.
	Replays int
}

// phaseBounds cuts [0, dur) at the scenario's tenant events.
func phaseBounds(sc *sim.Scenario, dur time.Duration) []phase {
	cuts := []time.Duration{0}
	for _, e := range sc.Events {
		at := time.Duration(e.At)
		if at > 0 && at < dur && (e.Action == "rate" || e.Action == "start" || e.Action == "stop") {
			cuts = append(cuts, at)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	ps := make([]phase, len(cuts))
	for i, c := range cuts {
		ps[i] = phase{Start: c, End: dur, GPUs: make([]gpuSetting, len(sc.GPUs))}
		if i+1 < len(cuts) {
			ps[i].End = cuts[i+1]
		}
	}
	return ps
}

// findPlan searches for the best static setting per phase and GPU,
// phase by phase (each given the settings chosen before it), knob by knob.
func findPlan(ctx context.Context, sc *sim.Scenario, seed int64, dur time.Duration) (*plan, int, error) {
	o := &oracleSearch{sc: sc, seed: seed, dur: dur, phases: phaseBounds(sc, dur)}
	if err := o.probe(ctx); err != nil {
		return nil, 0, err
	}
	p := &plan{Phases: o.phases, maxMHz: o.maxMHz}
	for pi := range p.Phases {
		for stage := 0; ; stage++ {
			c := o.primaryCandidates(p, pi, stage)
			if c == nil {
				break
			}
			if err := o.searchKnob(ctx, p, pi, c); err != nil {
				return nil, o.Replays, err
			}
		}
		if err := o.searchKnob(ctx, p, pi, o.clockCandidates(p, pi)); err != nil {
			return nil, o.Replays, err
		}
	}
	if err := o.searchMoves(ctx, p); err != nil {
		return nil, o.Replays, err
	}
	p.Replays = o.Replays
	return p, o.Replays, nil
}

// probe reads each GPU's maximum SM clock.
func (o *oracleSearch) probe(ctx context.Context) error {
	s, err := sim.New(o.sc, sim.Options{Seed: o.seed, Start: simStart})
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := s.Sample(ctx)
	if err != nil {
		return err
	}
	o.maxMHz = make([]uint32, len(o.sc.GPUs))
	for _, d := range r.Devices {
		if d.Index < len(o.maxMHz) && d.SMClockMaxHz != nil {
			o.maxMHz[d.Index] = uint32(*d.SMClockMaxHz / 1e6)
		}
	}
	return nil
}

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
func (o *oracleSearch) primaryCandidates(p *plan, pi, stage int) candidates {
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
			c[g] = capStage(p.Phases[pi].GPUs[g].Caps, pids[stage-1], capGridMany)
			continue
		}
		if stage > 0 {
			continue
		}
		more = true
		switch mode {
		case gpu.SharingMPS:
			c[g] = capGrid(pids, capGridFew)
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
func (o *oracleSearch) layoutCandidates(p *plan, pi, g int) []gpuSetting {
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
func (o *oracleSearch) layoutAt(p *plan, pi, g int) []string {
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

// capStage is cur with pid's cap set to each grid value in turn, from 1.
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

// capGrid is every combination of grid values over pids, all at 1 first.
func capGrid(pids []uint32, grid []float64) []gpuSetting {
	out := []gpuSetting{{Caps: map[uint32]float64{}}}
	for _, pid := range pids {
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
func (o *oracleSearch) clockCandidates(p *plan, pi int) candidates {
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

// searchKnob replays phases up to pi with candidate k on every GPU at once
// (the GPUs are independent) and keeps each GPU's best.
func (o *oracleSearch) searchKnob(ctx context.Context, p *plan, pi int, c candidates) error {
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
func (o *oracleSearch) searchMoves(ctx context.Context, p *plan) error {
	base, err := o.replayAll(ctx, p)
	o.Replays++
	if err != nil {
		return err
	}
	var trials []*plan
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
			for pi := range t.Phases {
				delete(t.Phases[pi].GPUs[g].Caps, o.sc.Tenants[ti].Process.PID)
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
	held := map[string]float64{}
	for i, ph := range phases {
		ws[i] = &ph.WindowStats
		for t, v := range ph.heldWork {
			held[t] += v
		}
	}
	return &phaseRun{WindowStats: *merged(ws), heldWork: held}
}

// merged sums windows' request counts and work into one per tenant (its
// GPU and overdue requests at the end of the last; the GPU figures of the
// first), what the oracle's scores read.
func merged(phases []*sim.WindowStats) *sim.WindowStats {
	out := &sim.WindowStats{GPUs: phases[0].GPUs}
	at := map[string]int{}
	for _, w := range phases {
		for _, tw := range w.Tenants {
			i, ok := at[tw.Tenant]
			if !ok {
				i = len(out.Tenants)
				at[tw.Tenant] = i
				out.Tenants = append(out.Tenants, sim.TenantWindow{Tenant: tw.Tenant, SLOQuantile: tw.SLOQuantile, SLOTarget: tw.SLOTarget})
			}
			m := &out.Tenants[i]
			m.GPU = tw.GPU
			m.Completed += tw.Completed
			m.Good += tw.Good
			m.Dropped += tw.Dropped
			m.Work += tw.Work
			m.Overdue = tw.Overdue
		}
	}
	return out
}

// capsBatch tells whether the plan caps a tenant without an SLO on GPU g
// in some phase.
func (o *oracleSearch) capsBatch(p *plan, g int) bool {
	for _, ti := range tenantsOn(o.sc, p.Moves, g) {
		t := o.sc.Tenants[ti]
		for _, ph := range p.Phases {
			if f, ok := ph.GPUs[g].Caps[t.Process.PID]; ok && f < 1 && t.SLO == nil {
				return true
			}
		}
	}
	return false
}

func missesSLO(phases []*phaseRun, uuid string) bool {
	for _, w := range phases {
		for _, tw := range w.Tenants {
			if tw.GPU == uuid && tw.SLOTarget > 0 && !sloMet(tw) {
				return true
			}
		}
	}
	return false
}

// roomiest is the GPU other than g, sharing the same way, with the most
// memory to spare; -1 when there is none.
func (o *oracleSearch) roomiest(p *plan, g int, sharing string) int {
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
func (o *oracleSearch) free(p *plan, g int) uint64 {
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

func sloMet(tw sim.TenantWindow) bool {
	ended := tw.Completed + tw.Dropped + tw.Overdue
	return ended == 0 || float64(tw.Good)/float64(ended) >= tw.SLOQuantile
}

// scoreAll scores the tenants keep selects in each run; goodput (work) is
// each tenant's held (all) work relative to the most any run gave it.
func scoreAll(ws []*phaseRun, keep func(sim.TenantWindow) bool) []score {
	mostHeld, most := map[string]float64{}, map[string]float64{}
	for _, w := range ws {
		for _, tw := range w.Tenants {
			if keep(tw) && tw.SLOTarget == 0 {
				mostHeld[tw.Tenant] = max(mostHeld[tw.Tenant], w.heldWork[tw.Tenant])
				most[tw.Tenant] = max(most[tw.Tenant], tw.Work)
			}
		}
	}
	out := make([]score, len(ws))
	for k, w := range ws {
		for _, tw := range w.Tenants {
			if !keep(tw) {
				continue
			}
			if tw.SLOTarget == 0 {
				if m := mostHeld[tw.Tenant]; m > 0 {
					out[k].goodput += w.heldWork[tw.Tenant] / m
				}
				if m := most[tw.Tenant]; m > 0 {
					out[k].work += tw.Work / m
				}
				continue
			}
			if sloMet(tw) {
				out[k].met++
			}
			if ended := tw.Completed + tw.Dropped + tw.Overdue; ended > 0 {
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

func clonePlan(p *plan) *plan {
	q := &plan{Moves: slices.Clone(p.Moves), Phases: slices.Clone(p.Phases), maxMHz: p.maxMHz}
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

// placed returns a copy of sc with the plan's first-phase spec settings:
// the moves and the vGPU scheduler policies.
func placed(sc *sim.Scenario, p *plan) *sim.Scenario {
	c := *sc
	c.GPUs = slices.Clone(sc.GPUs)
	c.Tenants = slices.Clone(sc.Tenants)
	for _, m := range p.Moves {
		c.Tenants[m.Tenant].GPU = m.To
	}
	if len(p.Phases) > 0 {
		for g, s := range p.Phases[0].GPUs {
			if s.VGPU != "" {
				c.GPUs[g].VGPU.Policy = s.VGPU
			}
		}
	}
	return &c
}

// replay runs the plan up to the end of phase last and returns that
// phase's window.
func (o *oracleSearch) replay(ctx context.Context, p *plan, last int) (*phaseRun, error) {
	ws, err := o.run(ctx, p, last)
	if err != nil {
		return nil, err
	}
	return ws[last], nil
}

// replayAll runs the whole plan and returns one window per phase.
func (o *oracleSearch) replayAll(ctx context.Context, p *plan) ([]*phaseRun, error) {
	return o.run(ctx, p, len(p.Phases)-1)
}

// phaseRun is one phase of a replay: its window, and each tenant's work in
// the goodput windows (report.GoodputWindow, on the run's minute grid) in
// which every SLO on its GPU held, judged as the run report judges them.
type phaseRun struct {
	sim.WindowStats
	heldWork map[string]float64
}

// fragment is the part of one goodput window that falls in one phase (a
// phase that ends between minutes splits the minute; the minute is judged
// whole).
type fragment struct {
	minute, phase int
	w             *sim.WindowStats
}

func (o *oracleSearch) run(ctx context.Context, p *plan, last int) ([]*phaseRun, error) {
	s, err := sim.New(placed(o.sc, p), sim.Options{Seed: o.seed, Start: simStart})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ap := newApplier(s, o.maxMHz)
	var frags []fragment
	// advance runs the replay to `to`, cutting a fragment at every minute
	// of the grid, and at `to` when cut is set (a phase's end).
	advance := func(to time.Time, pi int, cut bool) {
		for s.Now().Before(to) {
			minute := int(s.Now().Sub(simStart) / report.GoodputWindow)
			next := simStart.Add(time.Duration(minute+1) * report.GoodputWindow)
			onGrid := !next.After(to)
			if !onGrid {
				next = to
			}
			s.AdvanceTo(next)
			if onGrid || cut {
				w := s.Window()
				frags = append(frags, fragment{minute: minute, phase: pi, w: &w})
			}
		}
	}
	for pi := 0; pi <= last; pi++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ph := p.Phases[pi]
		end := simStart.Add(ph.End)
		ap.apply(ctx, s.Now(), ph)
		for ap.pending() && s.Now().Before(end) {
			// Step as the run does until the drained instances are
			// empty and the relayout done.
			advance(s.Now().Add(time.Second), pi, false)
			ap.progress(ctx, s.Now())
		}
		advance(end, pi, true)
	}
	return phaseRuns(frags, last+1), nil
}

// phaseRuns sums the fragments into phases, each tenant's held work judged
// over the whole of each minute.
func phaseRuns(frags []fragment, phases int) []*phaseRun {
	byMinute := map[int][]*sim.WindowStats{}
	for _, f := range frags {
		byMinute[f.minute] = append(byMinute[f.minute], f.w)
	}
	broken := map[int]map[string]bool{}
	for m, ws := range byMinute {
		broken[m] = brokenGPUs(merged(ws))
	}
	out := make([]*phaseRun, phases)
	for pi := range out {
		var ws []*sim.WindowStats
		held := map[string]float64{}
		for _, f := range frags {
			if f.phase != pi {
				continue
			}
			ws = append(ws, f.w)
			for _, tw := range f.w.Tenants {
				if !broken[f.minute][tw.GPU] {
					held[tw.Tenant] += tw.Work
				}
			}
		}
		if len(ws) == 0 {
			ws = []*sim.WindowStats{{}}
		}
		out[pi] = &phaseRun{WindowStats: *merged(ws), heldWork: held}
	}
	return out
}

// brokenGPUs are the GPUs on which an SLO did not hold over a goodput
// window, judged as the run report judges it (report.WindowHeld).
func brokenGPUs(w *sim.WindowStats) map[string]bool {
	out := map[string]bool{}
	for _, tw := range w.Tenants {
		if tw.SLOTarget > 0 && !report.WindowHeld(tw.Good, tw.Completed+tw.Dropped, tw.SLOQuantile) {
			out[tw.GPU] = true
		}
	}
	return out
}

// applier brings GPUs to a phase's settings through the actuators,
// changing only what differs from what it applied before.
type applier struct {
	mps    tuner.MPSClients
	ts     gpu.TimeSliceActuator
	clocks gpu.ClockPowerActuator
	mig    gpu.MIGActuator
	drain  gpu.MIGDrainActuator
	life   gpu.TenantLifecycleActuator
	sample func(context.Context) (*gpu.Readings, error)
	// relayout is, by GPU, the MIG layout waiting for its instances to
	// drain; pids, by GPU UUID, the processes placed there.
	relayout map[int][]string
	pids     map[string][]uint32
	uuids    []string
	maxMHz   []uint32
	caps     map[uint32]float64
	slices   []gpu.TimeSliceLevel
	locked   []bool
	// where each PID's GPU is, by UUID
	gpuOf func(pid uint32) string
}

func newApplier(s *sim.Simulator, maxMHz []uint32) *applier {
	act := guardedActuators(s)
	ap := &applier{mps: act.MPS, ts: act.TimeSlice, clocks: act.ClockPower,
		mig: act.MIG, drain: act.MIGDrain, life: act.Lifecycle,
		maxMHz: maxMHz, caps: map[uint32]float64{}, sample: s.Sample,
		slices: make([]gpu.TimeSliceLevel, len(maxMHz)), locked: make([]bool, len(maxMHz)),
		relayout: map[int][]string{}, pids: map[string][]uint32{}}
	r, err := s.Sample(context.Background())
	if err == nil {
		ap.uuids = make([]string, len(maxMHz))
		pidGPU := map[uint32]string{}
		for _, d := range r.Devices {
			if d.Index < len(ap.uuids) {
				ap.uuids[d.Index] = d.UUID
			}
			for _, pr := range d.Processes {
				pidGPU[pr.PID] = d.UUID
				ap.pids[d.UUID] = append(ap.pids[d.UUID], pr.PID)
			}
		}
		ap.gpuOf = func(pid uint32) string { return pidGPU[pid] }
	}
	return ap
}

// apply brings every GPU to ph's settings; a refused change is skipped
// (it then shows in the replay's figures). It returns the decisions.
func (a *applier) apply(ctx context.Context, now time.Time, ph phase) []tuner.Decision {
	var out []tuner.Decision
	note := func(g int, who string, k gpu.Knob, from, to string, err error) {
		d := tuner.Decision{Time: now, GPU: a.uuids[g], Tenant: who, Knob: k, From: from, To: to, Applied: err == nil, Reason: "oracle: best static setting of this phase"}
		if err != nil {
			d.Reason = err.Error()
		}
		out = append(out, d)
	}
	if a.uuids == nil {
		return nil
	}
	for g, s := range ph.GPUs {
		uuid := a.uuids[g]
		pids := make([]uint32, 0, len(s.Caps))
		for pid := range s.Caps {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		for _, pid := range pids {
			f := s.Caps[pid]
			cur, ok := a.caps[pid]
			if !ok {
				cur = 1
			}
			if f == cur || a.mps == nil {
				continue
			}
			at := cmpStr(a.gpuOf(pid), uuid)
			err := a.mps.SetMPSActiveThreads(ctx, at, pid, f)
			if err == nil {
				err = a.mps.RestartClient(ctx, at, pid)
			}
			if err == nil {
				a.caps[pid] = f
			}
			note(g, strconv.FormatUint(uint64(pid), 10), gpu.KnobMPSActiveThreads, fmtFrac(cur), fmtFrac(f), err)
		}
		if s.TimeSlice != "" && s.TimeSlice != cmpLevel(a.slices[g]) && a.ts != nil {
			err := a.ts.SetComputeTimeSlice(ctx, uuid, s.TimeSlice)
			if err == nil {
				note(g, "", gpu.KnobComputeTimeSlice, string(cmpLevel(a.slices[g])), string(s.TimeSlice), nil)
				a.slices[g] = s.TimeSlice
			}
		}
		if s.Layout != nil {
			out = append(out, a.startRelayout(ctx, now, g, s.Layout)...)
		}
		if s.Lock != a.locked[g] && a.clocks != nil && a.maxMHz[g] > 0 {
			l := gpu.ClockLock{}
			if s.Lock {
				l = gpu.ClockLock{MinMHz: a.maxMHz[g], MaxMHz: a.maxMHz[g]}
			}
			err := a.clocks.LockClocks(ctx, uuid, l)
			if err == nil {
				a.locked[g] = s.Lock
			}
			note(g, "", gpu.KnobLockedClocks, lockText(!s.Lock, a.maxMHz[g]), lockText(s.Lock, a.maxMHz[g]), err)
		}
	}
	return out
}

// startRelayout drains every MIG instance of GPU g so that progress can
// set layout once they are empty.
func (a *applier) startRelayout(ctx context.Context, now time.Time, g int, layout []string) []tuner.Decision {
	d := tuner.Decision{Time: now, GPU: a.uuids[g], Knob: gpu.KnobMIGDrain, To: "every instance",
		Reason: "oracle: relayout to [" + strings.Join(layout, ", ") + "]"}
	err := notDriven(a.mig != nil && a.drain != nil && a.life != nil, "MIG relayout")
	var r *gpu.Readings
	if err == nil {
		r, err = a.sample(ctx)
	}
	for _, dev := range readingsDevices(r) {
		if dev.Index != g {
			continue
		}
		for _, inst := range dev.MIG {
			err = cmp(err, a.drain.DrainMIGInstance(ctx, dev.UUID, inst.UUID))
		}
	}
	d.Applied = err == nil
	if err != nil {
		d.Reason = err.Error()
		return []tuner.Decision{d}
	}
	a.relayout[g] = layout
	return append([]tuner.Decision{d}, a.progress(ctx, now)...)
}

// pending tells whether a relayout waits for its instances to drain.
func (a *applier) pending() bool { return len(a.relayout) > 0 }

// progress sets each waiting layout whose instances are empty and starts
// the GPU's processes again in it.
func (a *applier) progress(ctx context.Context, now time.Time) []tuner.Decision {
	var out []tuner.Decision
	for g, layout := range a.relayout {
		uuid := a.uuids[g]
		err := a.mig.ConfigureMIG(ctx, uuid, layout)
		if errors.Is(err, gpu.ErrBusy) {
			continue
		}
		delete(a.relayout, g)
		d := tuner.Decision{Time: now, GPU: uuid, Knob: gpu.KnobMIGLayout, To: "[" + strings.Join(layout, ", ") + "]",
			Applied: err == nil, Reason: "oracle: best static setting of this phase"}
		if err != nil {
			d.Reason = err.Error()
		}
		out = append(out, d)
		for _, pid := range a.pids[uuid] {
			err := a.life.StartProcess(ctx, pid)
			out = append(out, tuner.Decision{Time: now, GPU: uuid, Tenant: strconv.FormatUint(uint64(pid), 10),
				Knob: gpu.KnobProcessLifecycle, To: "started", Applied: err == nil, Reason: "oracle: after the relayout"})
		}
	}
	return out
}

func readingsDevices(r *gpu.Readings) []gpu.Device {
	if r == nil {
		return nil
	}
	return r.Devices
}

func notDriven(ok bool, what string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("%s: %w", what, gpu.ErrNotSupported)
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cmpLevel(l gpu.TimeSliceLevel) gpu.TimeSliceLevel {
	if l == "" {
		return gpu.TimeSliceDefault
	}
	return l
}

func fmtFrac(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func lockText(locked bool, mhz uint32) string {
	if !locked {
		return "dvfs"
	}
	return fmt.Sprintf("%d MHz", mhz)
}

// oraclePolicy runs a plan: the first phase's settings at Init, each
// later phase's at its first observation.
type oraclePolicy struct {
	plan  *plan
	ap    *applier
	start time.Time
	next  int
	init  []tuner.Decision
}

func (*oraclePolicy) Name() string { return oracleName }

func (o *oraclePolicy) Init(ctx context.Context, _ tuner.Actuators, snap *tenant.Snapshot) error {
	o.start = snap.Time
	o.init = o.ap.apply(ctx, snap.Time, o.plan.Phases[0])
	o.next = 1
	return ctx.Err()
}

func (o *oraclePolicy) Observe(ctx context.Context, _ tuner.Actuators, snap *tenant.Snapshot) ([]tuner.Decision, error) {
	out := o.init
	o.init = nil
	out = append(out, o.ap.progress(ctx, snap.Time)...)
	for o.next < len(o.plan.Phases) && !snap.Time.Before(o.start.Add(o.plan.Phases[o.next].Start)) {
		out = append(out, o.ap.apply(ctx, snap.Time, o.plan.Phases[o.next])...)
		o.next++
	}
	return out, ctx.Err()
}

// writePlan prints what the oracle found.
func writePlan(w io.Writer, sc *sim.Scenario, p *plan) {
	fmt.Fprintf(w, "oracle: best static settings found in %d replays\n", p.Replays)
	for _, m := range p.Moves {
		fmt.Fprintf(w, "  placement: %s on GPU %d (from GPU %d)\n", sc.Tenants[m.Tenant].Name, m.To, sc.Tenants[m.Tenant].GPU)
	}
	name := map[uint32]string{}
	for _, t := range sc.Tenants {
		name[t.Process.PID] = t.Name
	}
	for _, ph := range p.Phases {
		fmt.Fprintf(w, "  phase %s-%s:", fmtDur(ph.Start), fmtDur(ph.End))
		for g, s := range ph.GPUs {
			var parts []string
			pids := make([]uint32, 0, len(s.Caps))
			for pid := range s.Caps {
				pids = append(pids, pid)
			}
			sort.Slice(pids, func(i, j int) bool { return name[pids[i]] < name[pids[j]] })
			for _, pid := range pids {
				parts = append(parts, fmt.Sprintf("%s=%s", name[pid], fmtFrac(s.Caps[pid])))
			}
			if s.TimeSlice != "" {
				parts = append(parts, "timeslice="+string(s.TimeSlice))
			}
			if s.VGPU != "" {
				parts = append(parts, "vgpu="+string(s.VGPU))
			}
			if s.Layout != nil {
				parts = append(parts, "mig=["+strings.Join(s.Layout, " ")+"]")
			}
			if s.Lock {
				parts = append(parts, "clock=locked")
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, " gpu%d[%s]", g, strings.Join(parts, " "))
			}
		}
		fmt.Fprintln(w)
	}
}

func fmtDur(d time.Duration) string { return d.String() }
