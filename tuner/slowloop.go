package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The slow loop: a planner's rebalancing plans (moves of tenants between
// GPUs, MIG relayouts) run through the same guard chain and executor as
// every action.

// RebalancePlanner plans the slow loop's changes (package rebalance): it
// tells which tenants miss their SLO or are squeezed, for the engine to
// track since when, and plans from that memory (RebalanceInput) every
// Period. The engine runs a plan through the guard chain and executor.
type RebalancePlanner interface {
	// Period is how often it plans.
	Period() time.Duration
	// MoveHold is how long after a move PlanRebalance heeds it
	// (RebalanceInput.Moved): a tenant moved longer ago and gone from
	// every GPU is left out of Moved.
	MoveHold() time.Duration
	// Missing returns the latency tenants missing their SLO now.
	Missing(s *State) map[string]bool
	// Squeezed returns the batch and best-effort tenants squeezed now.
	Squeezed(s *State) map[string]float64
	// PlanRebalance returns a plan, or false.
	PlanRebalance(s *State, in RebalanceInput) (gpu.Plan, bool)
}

// RebalanceInput is what PlanRebalance decides from, besides the state.
type RebalanceInput struct {
	// MissingSince is when each latency tenant began missing its SLO
	// without a break.
	MissingSince map[string]time.Time
	// LastPlan is when the last plan was made (zero: never).
	LastPlan time.Time
	// Moved is when each tenant was last moved (within MoveHold, or
	// still on a GPU: forgetMoved).
	Moved map[string]time.Time
	// SqueezedSince is when each batch or best-effort tenant began to be
	// squeezed (Squeezed) without a break.
	SqueezedSince map[string]time.Time
	// Relayouts is when each GPU (UUID) last had its MIG layout changed;
	// one is not changed again for Hold.
	Relayouts map[string]time.Time
}

// rebalanceMemory is what the slow loop remembers between rounds.
type rebalanceMemory struct {
	lastRun, lastPlan time.Time
	missing           map[string]time.Time // latency tenant -> missing its SLO since
	squeezed          map[string]time.Time // batch tenant -> squeezed since
	moved             map[string]time.Time // tenant -> last moved
	relayouts         map[string]time.Time // GPU UUID -> last MIG relayout
}

// track keeps since[name] for every name in on and drops the others:
// since when each has held without a break.
func track[V any](since map[string]time.Time, on map[string]V, at time.Time) {
	for name := range since {
		if _, ok := on[name]; !ok {
			delete(since, name)
		}
	}
	for name := range on {
		if _, ok := since[name]; !ok {
			since[name] = at
		}
	}
}

// rebalance runs the slow loop once Every has passed: it tracks who
// misses an SLO, plans, and hands the plan to the executor as one action,
// guarded, journaled and applied as every other.
func (t *Tuner) rebalance(ctx context.Context, st *State, now time.Time) []Decision {
	r := t.o.Rebalance
	if r == nil || (t.o.Mode == ModeOff && len(t.o.GPUModes) == 0) {
		return nil
	}
	m := &t.reb
	if m.missing == nil {
		m.missing, m.squeezed = map[string]time.Time{}, map[string]time.Time{}
	}
	if m.moved == nil {
		m.moved, m.relayouts = map[string]time.Time{}, map[string]time.Time{}
	}
	track(m.missing, r.Missing(st), now)
	track(m.squeezed, r.Squeezed(st), now)
	t.forgetMoved(st, now, r.MoveHold())
	if len(t.relayouts) > 0 || t.planInFlight() {
		return nil // one change of the slow loop at a time (RunOnce carries it on, or its hook runs)
	}
	if !m.lastRun.IsZero() && now.Sub(m.lastRun) < r.Period() {
		return nil
	}
	m.lastRun = now
	plan, ok := r.PlanRebalance(st, RebalanceInput{MissingSince: m.missing, LastPlan: m.lastPlan, Moved: m.moved, SqueezedSince: m.squeezed, Relayouts: m.relayouts})
	if !ok || t.switchedOff(plan) {
		return nil
	}
	a := planAction(st, plan) // (its planned record starts the cool-down: journalPlanned)
	out, applied := t.execute(ctx, st, a, now, map[string][]Action{}, nil)
	if _, started := t.hooks[a.Target.String()]; applied && !started {
		t.notePlanApplied(plan, now)
	}
	return out
}

// forgetMoved drops when a tenant was moved (reb.moved) once it can
// change no decision, so that a host whose batch jobs come and go as
// tenants of their own keeps no move of every tenant the slow loop ever
// moved: the move is hold or more old, the tenant has no usage on any GPU
// the snapshot lists, and no pause original names it. The planner heeds
// a move only within hold of it (MoveHold), an age that only grows; left
// reads it only for a pause original of its tenant, set before the move
// (a pause set after, as every pause set from now on is, reads the same
// with the move or without it).
func (t *Tuner) forgetMoved(st *State, now time.Time, hold time.Duration) {
	m := &t.reb
	if len(m.moved) == 0 || st.Snapshot == nil {
		return
	}
	used := map[string]bool{}
	for _, u := range st.Snapshot.Usage {
		used[u.Tenant] = true
	}
	for _, name := range pausedTenants(slices.Collect(maps.Values(t.originals))) {
		used[name] = true
	}
	maps.DeleteFunc(m.moved, func(name string, at time.Time) bool { return !used[name] && now.Sub(at) >= hold })
}

// notePlanApplied remembers the tenants a plan moved, or the GPU it
// relaid out, for the planner (RebalanceInput): a plan whose hook runs
// off the round is remembered at its outcome, once applied (collectHooks);
// a plan applied in part, by the moves made (settle, movesMade).
func (t *Tuner) notePlanApplied(plan gpu.Plan, now time.Time) {
	m := &t.reb
	if m.moved == nil {
		m.moved, m.relayouts = map[string]time.Time{}, map[string]time.Time{}
	}
	if len(plan.MIG) > 0 {
		m.relayouts[plan.MIG[0].UUID] = now
		return
	}
	for _, mv := range plan.Moves {
		m.moved[mv.Tenant] = now
	}
}

// resumeSlowLoop sets the slow loop's memory, at start, from what the
// journal j says of the plans of the runs before (journalslow.go): when
// the last plan was made, whatever its outcome (the cool-down), and when
// each tenant was moved and each GPU relaid out (the holds), those hold
// or more old, or dated after now (a clock set back), left out. A
// restart (a rollout, a crash) so neither plans again before the
// cool-down nor moves again a tenant it has just moved. What it resumes
// is logged.
func (t *Tuner) resumeSlowLoop(j *Journal, now time.Time) {
	hold := t.o.Rebalance.MoveHold()
	j.holdSlowLoop(hold, t.o.Clock.Now)
	mem := j.slowLoop()
	stale := func(_ string, at time.Time) bool { return at.After(now) || now.Sub(at) >= hold }
	maps.DeleteFunc(mem.moved, stale)
	maps.DeleteFunc(mem.relayouts, stale)
	m := &t.reb
	m.moved, m.relayouts = mem.moved, mem.relayouts
	if !mem.lastPlan.After(now) {
		m.lastPlan = mem.lastPlan
	}
	if m.lastPlan.IsZero() && len(m.moved) == 0 && len(m.relayouts) == 0 {
		return
	}
	kv := []any{"msg", "tuner slow loop resumes its cool-down and holds from the journal", "hold", hold}
	if !m.lastPlan.IsZero() {
		kv = append(kv, "last_plan", m.lastPlan.UTC().Format(time.RFC3339))
	}
	if len(m.moved) > 0 {
		kv = append(kv, "moved", strings.Join(slices.Sorted(maps.Keys(m.moved)), " "))
	}
	if len(m.relayouts) > 0 {
		kv = append(kv, "relaid_out", strings.Join(slices.Sorted(maps.Keys(m.relayouts)), " "))
	}
	level.Info(t.o.Logger).Log(kv...)
}

// movedTenants are the tenants the outcome record of a, d, names as moved
// (Record.Moved): those of every move of a plan applied, of the moves
// made of one applied in part (err: movesMade); none for another action.
func movedTenants(a Action, d Decision, err error) []string {
	if a.Plan == nil {
		return nil
	}
	moves := movesMade(a, err)
	if d.Applied {
		moves = a.Plan.Moves
	}
	names := slices.DeleteFunc(tenantsOf(moves), func(name string) bool { return name == "" || len(name) > maxJournalText })
	return names[:min(len(names), maxJournalMoved)]
}

// tenantsOf are the tenants of moves, each once, in the moves' order.
func tenantsOf(moves []gpu.Move) []string {
	var names []string
	for _, mv := range moves {
		if !slices.Contains(names, mv.Tenant) {
			names = append(names, mv.Tenant)
		}
	}
	return names
}

// movesMade returns the moves of a's plan that err, a *gpu.PartialError,
// says were made (a plan applied in part: an eviction made, the next one
// refused by a PodDisruptionBudget); none for another error or action.
func movesMade(a Action, err error) []gpu.Move {
	var partial *gpu.PartialError
	if a.Plan == nil || !errors.As(err, &partial) {
		return nil
	}
	var out []gpu.Move
	for _, i := range partial.Applied {
		if i >= 0 && i < len(a.Plan.Moves) {
			out = append(out, a.Plan.Moves[i])
		}
	}
	return out
}

// partText says, in a failed plan's reason, which of its moves were made
// (movesMade) and that their tenants count as moved.
func partText(a Action, made []gpu.Move) string {
	names := tenantsOf(made)
	moves := fmt.Sprintf("%d of its %d moves made", len(made), len(a.Plan.Moves))
	if len(made) == len(a.Plan.Moves) {
		// each made, or begun: the error says what failed after
		moves = "every move made or begun"
	}
	return fmt.Sprintf("applied in part (%s; %s counted as moved, not moved again for the hold)", moves, strings.Join(names, ", "))
}

// planAction is the action that carries a plan through the executor and
// stands for it in decisions, the journal and the status: its first move,
// else its first MIG layout.
func planAction(st *State, plan gpu.Plan) Action {
	index := func(uuid string) int {
		for _, d := range st.Snapshot.Readings.Devices {
			if d.UUID == uuid {
				return d.Index
			}
		}
		return 0
	}
	if len(plan.Moves) > 0 {
		mv := plan.Moves[0]
		return Action{Target: Target{GPU: mv.FromUUID, Knob: gpu.KnobPlacement, PID: mv.PID}, GPUIndex: index(mv.FromUUID), Tenant: mv.Tenant,
			Current: Placement(mv.FromUUID), Want: Placement(mv.ToUUID), Reason: plan.Reason, Plan: &plan}
	}
	l := plan.MIG[0]
	var cur []string
	for _, d := range st.Snapshot.Readings.Devices {
		if d.UUID == l.UUID {
			for _, m := range d.MIG {
				cur = append(cur, m.Profile)
			}
		}
	}
	return Action{Target: Target{GPU: l.UUID, Knob: gpu.KnobMIGLayout}, GPUIndex: index(l.UUID),
		Current: LayoutOf(cur), Want: LayoutOf(l.Profiles), Reason: plan.Reason, Plan: &plan}
}

// switchedOff says whether a plan changes a knob the operator switched off
// (Options.Disabled): a move, placement; a relayout, mig_layout. The tuner
// never changes such a knob, whichever planner asks (the built-in one
// plans none: State.Available).
func (t *Tuner) switchedOff(plan gpu.Plan) bool {
	return len(plan.Moves) > 0 && slices.Contains(t.o.Disabled, gpu.KnobPlacement) ||
		len(plan.MIG) > 0 && slices.Contains(t.o.Disabled, gpu.KnobMIGLayout)
}

// journalPlanned journals a as planned at now. A slow loop's plan's
// cool-down starts there (reb.lastPlan), not before: an action mode off,
// held by a hook or a restore, or a guard's quiet writes no planned record,
// from which a restart resumes it (resumeSlowLoop), and starts none; nor
// does a record the journal did not take.
func (t *Tuner) journalPlanned(a Action, now time.Time) error {
	jerr := t.journal(Record{Time: now, Event: string(OutcomePlanned), Target: a.Target, Tenant: a.Tenant,
		From: encodeValue(a.Current), To: encodeValue(a.Want), Reason: a.Reason})
	if jerr == nil && isPlanKnob(a.Target.Knob) {
		t.reb.lastPlan = now
	}
	return jerr
}
