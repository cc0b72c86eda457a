package oracle

import (
	"context"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// placed returns a copy of sc with the plan's first-phase spec settings:
// the moves and the vGPU scheduler policies.
func placed(sc *sim.Scenario, p *Plan) *sim.Scenario {
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
// phase's window, with the run so far (its phases summed) beside it.
func (o *oracleSearch) replay(ctx context.Context, p *Plan, last int) (*phaseRun, error) {
	ws, err := o.run(ctx, p, last)
	if err != nil {
		return nil, err
	}
	w := ws[last]
	w.sofar = &mergedRun(ws).WindowStats
	return w, nil
}

// replayAll runs the whole plan and returns one window per phase.
func (o *oracleSearch) replayAll(ctx context.Context, p *Plan) ([]*phaseRun, error) {
	return o.run(ctx, p, len(p.Phases)-1)
}

// phaseRun is one phase of a replay: its window, and each tenant's work
// over the phase and its work in the goodput windows (report.GoodputWindow,
// on the run's minute grid) in which every SLO on its GPU held, judged as
// the run report judges them. Both are the report's figures: the steps a
// training job lost to a restart and has not redone by the phase's end
// are not work (report.Unredone), and steps lost before the phase that it
// redoes in the phase are (the job's progress, which the report counts at
// the run's end): the phases' figures sum to the run's.
type phaseRun struct {
	sim.WindowStats
	work, heldWork map[string]float64
	// sofar is the run up to the end of this phase, its phases summed;
	// nil where the window is the whole run.
	sofar *sim.WindowStats
}

// fragment is the part of one goodput window that falls in one phase (a
// phase that ends between minutes splits the minute; the minute is judged
// whole).
type fragment struct {
	minute, phase int
	w             *sim.WindowStats
}

// runStep is the step of the run a replay mirrors: the run's policy
// observes at the end of each, on a grid from the start.
const runStep = simrun.DefaultStep

// run replays the plan up to the end of phase last as the run does: the
// plan's schedule on the tuner's engine (policy), which decides each
// phase's settings at its start and whose executor applies them, and,
// while a MIG relayout waits for its instances to drain, one observation
// a step.
func (o *oracleSearch) run(ctx context.Context, p *Plan, last int) ([]*phaseRun, error) {
	h, err := simrun.NewHost(placed(o.sc, p), nil, o.seed)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	s := h.Sim
	act := o.actuators(s)
	snaps := simrun.NewSnapshots(h, runStep)
	pol := policy(p)
	var frags []fragment
	// observe lets the policy act now. Its actions take virtual time,
	// which the run's step ending now takes in: the report counts that
	// step in the goodput window of its end, after them, and so does the
	// replay with the fragment that ends now (cut one step long, upTo).
	observe := func() error {
		at := s.Now()
		snap, err := snaps.Take(ctx)
		if err == nil {
			_, err = pol.Observe(ctx, act, snap)
		}
		if n := len(frags); n > 0 && s.Now().After(at) && frags[n-1].w.End.Equal(at) {
			frags[n-1].minute = minuteAt(s.Now())
		}
		return err
	}
	// advance runs the replay to `to`, cutting a fragment at every minute
	// of the grid, and at `to` when cut is set (a phase's end).
	advance := func(to time.Time, pi int, cut bool) {
		// an interrupt ends the replay within a minute of virtual time,
		// not at its phase's end (the run returns the context's error)
		for s.Now().Before(to) && ctx.Err() == nil {
			minute := minuteAt(s.Now())
			next := simrun.Start.Add(time.Duration(minute+1) * report.GoodputWindow)
			onGrid := !next.After(to)
			if !onGrid {
				next = to
			}
			h.AdvanceTo(next)
			if onGrid || cut {
				frags = append(frags, cutFragment(s, minute, pi))
			}
		}
	}
	// upTo runs the replay to `to`, where the policy observes next, the
	// run's step that ends there cut on its own.
	upTo := func(to time.Time, pi int) {
		advance(to.Add(-runStep), pi, true)
		advance(to, pi, true)
	}
	for pi := 0; pi <= last; pi++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := simrun.Start.Add(p.Phases[pi].End)
		if pi == 0 {
			snap, err := snaps.Take(ctx)
			if err != nil {
				return nil, err
			}
			err = pol.Init(ctx, act, snap)
			if err != nil {
				return nil, err
			}
		} else if err := observe(); err != nil {
			return nil, err
		}
		for pol.Tuner().Underway() && s.Now().Before(end) {
			// Step as the run does until the drained instances are
			// empty and the relayout done.
			upTo(nextStep(s.Now(), end), pi)
			if err := observe(); err != nil {
				return nil, err
			}
		}
		if pi < last {
			upTo(end, pi)
		}
		advance(end, pi, true)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // its fragments cut short
	}
	return phaseRuns(frags, last+1), nil
}

// minuteAt is the goodput window of the run's minute grid that t is in.
func minuteAt(t time.Time) int { return int(t.Sub(simrun.Start) / report.GoodputWindow) }

// nextStep is the end of the run's step that t is in (or starts), end at
// the latest.
func nextStep(t, end time.Time) time.Time {
	next := simrun.Start.Add((t.Sub(simrun.Start)/runStep + 1) * runStep)
	if next.After(end) {
		return end
	}
	return next
}

// cutFragment ends the simulator's window as the fragment of the minute
// and phase given. The scores read counts, never latencies: a fragment
// keeps none (a replay kept up to 2^20 a tenant for every minute of the
// run), and they are not sorted.
func cutFragment(s *sim.Simulator, minute, phase int) fragment {
	w := s.WindowUnsorted()
	s.ReuseLatencies(&w)
	for i := range w.Tenants {
		w.Tenants[i].Latencies = nil
	}
	return fragment{minute: minute, phase: phase, w: &w}
}

// phaseRuns sums the fragments (in time order) into phases, each tenant's
// held work judged over the whole of each minute, and its work and held
// work less the steps it has to redo at the phase's end, plus those it
// had to redo at the previous phase's end.
func phaseRuns(frags []fragment, phases int) []*phaseRun {
	byMinute := map[int][]*sim.WindowStats{}
	byPhase := make([][]fragment, phases)
	for _, f := range frags {
		byMinute[f.minute] = append(byMinute[f.minute], f.w)
		byPhase[f.phase] = append(byPhase[f.phase], f)
	}
	broken := map[int]map[string]bool{}
	for m, ws := range byMinute {
		broken[m] = brokenGPUs(merged(ws))
	}
	// each tenant's work by goodput window so far, and what was not yet
	// redone at the previous phase's end
	minutes := map[string][]report.MinuteWork{}
	type loss struct{ work, good float64 }
	before := map[string]loss{}
	out := make([]*phaseRun, phases)
	for pi := range out {
		ws := []*sim.WindowStats{}
		work, held := map[string]float64{}, map[string]float64{}
		for _, f := range byPhase[pi] {
			ws = append(ws, f.w)
			for _, tw := range f.w.Tenants {
				m := minutes[tw.Tenant]
				for len(m) <= f.minute {
					m = append(m, report.MinuteWork{})
				}
				m[f.minute].Work += tw.Work
				work[tw.Tenant] += tw.Work
				if !broken[f.minute][tw.GPU] {
					m[f.minute].Good += tw.Work
					held[tw.Tenant] += tw.Work
				}
				minutes[tw.Tenant] = m
			}
		}
		if len(ws) == 0 {
			ws = []*sim.WindowStats{{}}
		}
		w := merged(ws)
		for _, tw := range w.Tenants {
			lost, lostGood := report.Unredone(tw.Redo, minutes[tw.Tenant])
			b := before[tw.Tenant]
			work[tw.Tenant] += b.work - lost
			held[tw.Tenant] += b.good - lostGood
			before[tw.Tenant] = loss{lost, lostGood}
		}
		out[pi] = &phaseRun{WindowStats: *w, work: work, heldWork: held}
	}
	return out
}

// brokenGPUs are the GPUs on which an SLO did not hold over a goodput
// window, judged as the run report judges it (report.Held).
func brokenGPUs(w *sim.WindowStats) map[string]bool {
	out := map[string]bool{}
	for _, tw := range w.Tenants {
		if !report.Held(tw) {
			out[tw.GPU] = true
		}
	}
	return out
}
