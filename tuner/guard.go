package tuner

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Outcome is what became of an action.
type Outcome string

// Outcomes, as journaled and counted in vgpu_tuner_actions_total.
const (
	OutcomePlanned     Outcome = "planned"     // the policy wants it
	OutcomeGuarded     Outcome = "guarded"     // a guard refused it
	OutcomeRecommended Outcome = "recommended" // admitted, but the mode does not act
	OutcomeApplied     Outcome = "applied"     // the actuator accepted it
	OutcomeRefused     Outcome = "refused"     // the actuator refused it (not supported, busy)
	OutcomeFailed      Outcome = "failed"      // the actuator failed
	OutcomeRolledBack  Outcome = "rolled_back" // undone after a failure part way
	// OutcomeRestored: an original set back (at exit, after a crash) or a
	// pause thawed, not the policy's action: counted by Counts.Restores,
	// never by Counts.Actions.
	OutcomeRestored Outcome = "restored"
)

// Guard judges one action before it is acted on. Admit must not do I/O but
// may read the clock it is given; why names what refused the action.
type Guard interface {
	Name() string
	Admit(s *State, a Action, now time.Time) (ok bool, why string)
}

// Learner is a guard that learns from outcomes (dwell, back-off, retry);
// err is the actuator's error, if any.
type Learner interface {
	Record(a Action, o Outcome, err error, now time.Time)
}

// Interval is a guard with a per-interval budget; Begin starts an interval.
type Interval interface {
	Begin(now time.Time)
}

// Quiet is a guard whose refusals are no decisions: what it refuses was
// asked for already and is waiting (Retry). Nothing is journaled, counted
// or reported for them.
type Quiet interface {
	Quiet()
}

// Stopper is a guard that can stop the tuner as a whole (the kill
// switch); Stopped reports whether it does now.
type Stopper interface {
	Stopped() bool
}

// Pacer is a guard that, after a change of a GPU's knob, refuses the next
// change of it (a revert excepted) for a while: the dwell. The engine
// hands its waits to the policies (State.Waits), so that a policy holds,
// and says why, instead of proposing what the guard would refuse.
type Pacer interface {
	// Waits returns, by Target.DomainKey, the knobs whose change it
	// refuses at now, and until when.
	Waits(now time.Time) map[string]Wait
}

// Budget is a guard that spends a budget of changes as it admits one
// (Rate, Cap): the executor asks the budgets after every other guard, and
// only for an action the journal has taken (Chain.Judge, Chain.Spend), so
// that a change not made because the journal cannot be written spends
// none.
type Budget interface {
	Budget()
}

// Chain is the guard chain every action passes, whatever made it: a
// policy, a revert, a rebalancing plan or a MIG relayout. It offers the
// hooks the guards take: Begin starts an interval for every Interval,
// Judge asks each guard but the budgets in order and Spend the budgets
// (after the journal took the action: the executor), Record teaches
// every Learner an outcome.
type Chain []Guard

// Begin starts an interval.
func (c Chain) Begin(now time.Time) {
	for _, g := range c {
		if iv, ok := g.(Interval); ok {
			iv.Begin(now)
		}
	}
}

// Judge runs every guard but the budgets, in order; on a refusal it
// names the guard, says why and whether the refusal is quiet.
func (c Chain) Judge(s *State, a Action, now time.Time) (ok bool, guard, why string, quiet bool) {
	return c.admit(s, a, now, false)
}

// Spend runs the budgets alone, in order, as Judge the others: each
// admitted action spends them.
func (c Chain) Spend(s *State, a Action, now time.Time) (ok bool, guard, why string, quiet bool) {
	return c.admit(s, a, now, true)
}

// admit runs the budgets (budgets) or every other guard, in order.
func (c Chain) admit(s *State, a Action, now time.Time, budgets bool) (ok bool, guard, why string, quiet bool) {
	for _, g := range c {
		if _, b := g.(Budget); b != budgets {
			continue
		}
		if ok, why := g.Admit(s, a, now); !ok {
			_, quiet := g.(Quiet)
			return false, g.Name(), why, quiet
		}
	}
	return true, "", "", false
}

// Stopped reports whether a Stopper of the chain stops the tuner now.
func (c Chain) Stopped() bool {
	for _, g := range c {
		if st, ok := g.(Stopper); ok && st.Stopped() {
			return true
		}
	}
	return false
}

// Waits merges the waits of every Pacer of the chain: of two on one
// knob, the one that ends later.
func (c Chain) Waits(now time.Time) map[string]Wait {
	out := map[string]Wait{}
	for _, g := range c {
		p, ok := g.(Pacer)
		if !ok {
			continue
		}
		for k, w := range p.Waits(now) {
			if o, ok := out[k]; !ok || w.Running || !o.Running && w.Until.After(o.Until) {
				out[k] = w
			}
		}
	}
	return out
}

// Record teaches every guard that learns the outcome of a.
func (c Chain) Record(a Action, o Outcome, err error, now time.Time) {
	for _, g := range c {
		if l, ok := g.(Learner); ok {
			l.Record(a, o, err, now)
		}
	}
}

// Guard names, as in vgpu_tuner_guard_refusals_total{guard}.
const (
	GuardBounds     = "bounds"
	GuardDeadBand   = "dead_band"
	GuardDwell      = "dwell"
	GuardHysteresis = "hysteresis"
	GuardBackoff    = "backoff"
	GuardRate       = "rate"
	GuardCap        = "cap_per_interval"
	GuardRevert     = "revert_hold"
	GuardKillSwitch = "kill_switch"
	GuardRetry      = "retry" // quiet: never counted
)

// GuardNames lists every built-in guard, for metrics that start at 0.
var GuardNames = []string{GuardBounds, GuardDeadBand, GuardDwell, GuardHysteresis, GuardBackoff, GuardRate, GuardCap, GuardRevert, GuardKillSwitch}

// Bounds refuses values outside what the knob and the tenant allow: an MPS
// fraction in (0,1] and within the tenant's share.min/share.max, a clock
// range with min <= max, a non-negative power limit.
type Bounds struct{}

// Name returns "bounds".
func (Bounds) Name() string { return GuardBounds }

// Admit checks the action's value.
func (Bounds) Admit(s *State, a Action, _ time.Time) (bool, string) {
	switch v := a.Want.(type) {
	case Fraction:
		if !(v > 0 && v <= 1) {
			return false, fmt.Sprintf("fraction %v outside (0, 1]", float64(v))
		}
		if lo, hi, ok := shareBounds(s, a.Tenant); ok && !a.Revert {
			// A tenant's share is split over its clients: compare the sum.
			n := float64(max(1, clientsOf(s, a.GPU, a.Tenant)))
			share := float64(v) * n
			if share < lo-1e-9 || share > hi+1e-9 {
				return false, fmt.Sprintf("share %.3f of %s outside share.min %.3g / share.max %.3g", share, a.Tenant, lo, hi)
			}
		}
	case Duty:
		if ok, why := admitDuty(s, a, v); !ok {
			return false, why
		}
	case ClockRange:
		if v.MinMHz > v.MaxMHz {
			return false, fmt.Sprintf("clock range %v: min above max", v)
		}
	case Watts:
		if v < 0 || math.IsNaN(float64(v)) {
			return false, fmt.Sprintf("power limit %v", v)
		}
	case nil:
		return false, "no target value"
	}
	return true, ""
}

// MaxPauseDuty is the ceiling on a tenant's pause duty: a tenant is never
// paused for more than this fraction of a period.
const MaxPauseDuty = 0.9

// admitDuty refuses a pause duty outside [0, MaxPauseDuty], and any pause
// of a latency tenant (by the action's class, or the snapshot's); a duty
// of 0 (a thaw) is always admitted.
func admitDuty(s *State, a Action, v Duty) (bool, string) {
	if v == 0 {
		return true, ""
	}
	if !(v > 0 && v <= MaxPauseDuty) {
		return false, fmt.Sprintf("pause duty %v outside [0, %v]", float64(v), MaxPauseDuty)
	}
	class := a.Class
	if s != nil && s.Snapshot != nil {
		if t, ok := InfoByName(s.Snapshot)[a.Tenant]; ok && t.Class != "" {
			class = t.Class
		}
	}
	if class == gpu.ClassLatency {
		return false, "a latency tenant is never paused"
	}
	if a.Tenant == "" || len(a.PIDs) == 0 && a.PID == 0 {
		return false, "a pause names a tenant and its processes"
	}
	return true, ""
}

// DeadBand refuses changes smaller than Min (a Value distance): not worth
// a restart or a journal line.
type DeadBand struct{ Min float64 }

// Name returns "dead_band".
func (DeadBand) Name() string { return GuardDeadBand }

// Admit refuses a change below the dead band.
func (d DeadBand) Admit(_ *State, a Action, _ time.Time) (bool, string) {
	if a.Size() < d.Min && !a.Revert {
		return false, fmt.Sprintf("change %.3f below the dead band %.3f", a.Size(), d.Min)
	}
	return true, ""
}

// history is what the per-target guards remember of applied changes.
type history struct {
	mu   sync.Mutex
	last map[string]applied // by Target.DomainKey
}

type applied struct {
	at     time.Time
	knob   gpu.Knob
	sign   float64 // direction of the change: +1 up, -1 down, 0 unknown
	domain string  // Target.DomainKey (of a change still running)
}

func (h *history) get(k string) (applied, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.last[k]
	return a, ok
}

func (h *history) Record(a Action, o Outcome, _ error, now time.Time) {
	if o != OutcomeApplied {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last = map[string]applied{}
	}
	h.last[a.DomainKey()] = applied{at: now, knob: a.Knob, sign: Direction(a)}
}

// Direction is +1 when an action raises a value, -1 when it lowers it.
func Direction(a Action) float64 {
	num := func(v Value) (float64, bool) {
		switch x := v.(type) {
		case Fraction:
			return float64(x), true
		case Duty:
			return float64(x), true
		case Watts:
			return float64(x), x != 0
		case ClockRange:
			return float64(x.MaxMHz), x.MaxMHz != 0
		case Level:
			return float64(x.Order()), true
		}
		return 0, false
	}
	c, ok1 := num(a.Current)
	w, ok2 := num(a.Want)
	if !ok1 || !ok2 || c == w {
		return 0
	}
	if w > c {
		return 1
	}
	return -1
}

// Dwell refuses a change to a GPU's knob sooner than For after the last
// change of it: a setting must stay long enough for its effect to be seen
// (a cool-down), whatever the policy wants.
type Dwell struct {
	For time.Duration
	// Fast is the dwell of the fast knobs (pause_duty), changed in
	// milliseconds and without a restart; 0: For.
	Fast time.Duration
	history
	// running are the changes started off the round whose outcome is
	// not recorded yet (Started, hooks.go), by Target.String; under mu
	running map[string]applied
}

// fastKnob reports whether a knob is set in milliseconds with nothing
// restarted, so that its guards may let it follow the load closely.
func fastKnob(k gpu.Knob) bool { return k == gpu.KnobPauseDuty }

// Name returns "dwell".
func (*Dwell) Name() string { return GuardDwell }

// knobWait is a knob's wait: fast for the fast knobs when set, else slow.
func knobWait(k gpu.Knob, slow, fast time.Duration) time.Duration {
	if fastKnob(k) && fast > 0 {
		return fast
	}
	return slow
}

// dwell is a knob's dwell.
func (d *Dwell) dwell(k gpu.Knob) time.Duration { return knobWait(k, d.For, d.Fast) }

// Admit refuses during the dwell.
func (d *Dwell) Admit(_ *State, a Action, now time.Time) (bool, string) {
	dwell := d.dwell(a.Knob)
	if r, ok := d.runningOn(a.DomainKey()); ok && !a.Revert {
		return false, fmt.Sprintf("changed %v ago and its hook still runs; dwell %v from its outcome", now.Sub(r.at).Round(time.Second), dwell)
	}
	if l, ok := d.get(a.DomainKey()); ok && now.Sub(l.at) < dwell && !a.Revert {
		return false, fmt.Sprintf("changed %v ago; dwell %v", now.Sub(l.at).Round(time.Second), dwell)
	}
	return true, ""
}

// Waits returns the knobs in their dwell at now (Pacer): Admit refuses
// their change until the dwell has passed.
func (d *Dwell) Waits(now time.Time) map[string]Wait {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Wait{}
	for k, l := range d.last {
		if until := l.at.Add(d.dwell(l.knob)); now.Before(until) {
			out[k] = Wait{Guard: GuardDwell, Knob: l.knob, Since: l.at, Until: until}
		}
	}
	for _, r := range d.running {
		out[r.domain] = Wait{Guard: GuardDwell, Knob: r.knob, Since: r.at, Running: true}
	}
	return out
}

// Hysteresis refuses a change that reverses the direction of the last one
// on the same GPU and knob sooner than For after it: going back and forth
// needs a longer wait than going on.
type Hysteresis struct {
	For time.Duration
	// Fast is the wait of the fast knobs (see Dwell.Fast); 0: For.
	Fast time.Duration
	history
}

// Name returns "hysteresis".
func (*Hysteresis) Name() string { return GuardHysteresis }

// Admit refuses a quick reversal.
func (h *Hysteresis) Admit(_ *State, a Action, now time.Time) (bool, string) {
	l, ok := h.get(a.DomainKey())
	if !ok || a.Revert {
		return true, ""
	}
	wait := knobWait(a.Knob, h.For, h.Fast)
	if d := Direction(a); d != 0 && l.sign != 0 && d != l.sign && now.Sub(l.at) < wait {
		return false, fmt.Sprintf("reverses the change of %v ago, within the hysteresis of %v (%v left)", now.Sub(l.at).Round(time.Second), wait, (wait - now.Sub(l.at)).Round(time.Second))
	}
	return true, ""
}

// Backoff refuses a change to a target for a while after the actuator
// refused or failed one: Base after the first, doubling to Max; a success
// resets it. A revert passes a back-off left by a change: it sets back
// what the tuner changed, and a refused change of the same setting must
// not keep the one before it; a back-off left by a revert holds a revert
// as any change (one failing at every try is not tried at every round).
type Backoff struct {
	Base, Max time.Duration
	mu        sync.Mutex
	state     map[string]backoffState
}

type backoffState struct {
	until time.Time
	next  time.Duration
	// revert: the back-off was left by a revert's refusal or failure.
	revert bool
}

// Name returns "backoff".
func (*Backoff) Name() string { return GuardBackoff }

// Admit refuses during a back-off.
func (b *Backoff) Admit(_ *State, a Action, now time.Time) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.state[a.Target.String()]; ok && now.Before(s.until) && (!a.Revert || s.revert) {
		return false, fmt.Sprintf("backing off after a refusal or failure: %v left", s.until.Sub(now).Round(time.Second))
	}
	return true, ""
}

// Record extends or resets the back-off.
func (b *Backoff) Record(a Action, o Outcome, _ error, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == nil {
		b.state = map[string]backoffState{}
	}
	k := a.Target.String()
	switch o {
	case OutcomeApplied:
		delete(b.state, k)
	case OutcomeRefused, OutcomeFailed:
		s := b.state[k]
		if s.next == 0 {
			s.next = b.Base
		}
		s.until = now.Add(s.next)
		s.next = min(2*s.next, b.Max)
		s.revert = a.Revert
		b.state[k] = s
	}
}

// Rate limits the fast loop's changes (Action.Budgeted) over the whole host with a token bucket on
// the tuner's clock (rate.Limiter with explicit times), so that virtual
// time drives it as real time does.
type Rate struct{ L *rate.Limiter }

// NewRate allows every changes per interval on average, with burst.
func NewRate(every time.Duration, burst int) *Rate {
	return &Rate{L: rate.NewLimiter(rate.Every(every), burst)}
}

// Name returns "rate".
func (*Rate) Name() string { return GuardRate }

// Budget marks the rate as a budget.
func (*Rate) Budget() {}

// Admit takes a token, or refuses.
func (r *Rate) Admit(_ *State, a Action, now time.Time) (bool, string) {
	if !a.Budgeted() {
		return true, ""
	}
	if !r.L.AllowN(now, 1) {
		return false, fmt.Sprintf("over the rate limit of %.3g changes/s (burst %d)", float64(r.L.Limit()), r.L.Burst())
	}
	return true, ""
}

// Cap admits at most Max of the fast loop's actions (Action.Budgeted) per
// tuner interval.
type Cap struct {
	Max  int
	used atomic.Int64
}

// Name returns "cap_per_interval".
func (*Cap) Name() string { return GuardCap }

// Budget marks the cap as a budget.
func (*Cap) Budget() {}

// Begin starts a new interval.
func (c *Cap) Begin(time.Time) { c.used.Store(0) }

// Admit counts the action against the interval's budget.
func (c *Cap) Admit(_ *State, a Action, _ time.Time) (bool, string) {
	if !a.Budgeted() {
		return true, ""
	}
	if c.used.Add(1) > int64(c.Max) {
		return false, fmt.Sprintf("already %d actions this interval", c.Max)
	}
	return true, ""
}

// RevertHold refuses, for Hold, a value that was reverted because it made
// the objective worse.
type RevertHold struct {
	Hold time.Duration
	mu   sync.Mutex
	bad  map[string]held
}

type held struct {
	v     Value
	until time.Time
}

// Name returns "revert_hold".
func (*RevertHold) Name() string { return GuardRevert }

// Block marks v as bad for target t until now+Hold.
func (r *RevertHold) Block(t Target, v Value, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad == nil {
		r.bad = map[string]held{}
	}
	r.bad[t.String()] = held{v: v, until: now.Add(r.Hold)}
}

// Admit refuses a move towards a held value.
func (r *RevertHold) Admit(_ *State, a Action, now time.Time) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.bad[a.Target.String()]
	if !ok || a.Revert || !now.Before(h.until) {
		return true, ""
	}
	// Refuse the bad value and anything beyond it in the same direction.
	beyond := func() bool {
		if a.Current == nil {
			return false
		}
		d := Direction(Action{Current: a.Current, Want: a.Want})
		return d != 0 && d == Direction(Action{Current: a.Current, Want: h.v}) && a.Want.Distance(a.Current) >= h.v.Distance(a.Current)
	}
	if a.Want.Distance(h.v) < 1e-9 || beyond() {
		return false, fmt.Sprintf("%v made things worse and was reverted; held for %v", h.v, h.until.Sub(now).Round(time.Second))
	}
	return true, ""
}

// KillSwitch refuses every action while File exists or Engaged is set. A
// File that cannot be checked (its directory not searchable by the
// exporter's user, an I/O error, a directory there, which is always
// there and no switch one could remove) counts as existing: a switch
// created where the exporter cannot see it stops the tuner, not nothing.
type KillSwitch struct {
	File    string
	Engaged atomic.Bool
	// stat is os.Stat (tests replace it).
	stat func(string) (os.FileInfo, error)
}

// Name returns "kill_switch".
func (*KillSwitch) Name() string { return GuardKillSwitch }

// On reports whether the kill switch is engaged.
func (k *KillSwitch) On() bool {
	on, _ := k.check()
	return on
}

// check reports whether the kill switch is engaged, and why.
func (k *KillSwitch) check() (bool, string) {
	if k.Engaged.Load() {
		return true, "kill switch engaged"
	}
	if k.File == "" {
		return false, ""
	}
	stat := k.stat
	if stat == nil {
		stat = os.Stat
	}
	fi, err := stat(k.File)
	switch {
	case err == nil && fi.IsDir():
		return true, "kill switch file " + k.File + " cannot be checked, taken as engaged: it is a directory"
	case err == nil:
		return true, "kill switch file " + k.File + " exists"
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, ""
	}
	return true, fmt.Sprintf("kill switch file %s cannot be checked, taken as engaged: %v", k.File, err)
}

// Stopped reports whether the kill switch is on (Stopper).
func (k *KillSwitch) Stopped() bool { return k.On() }

// Admit refuses everything but reverts while engaged.
func (k *KillSwitch) Admit(_ *State, a Action, _ time.Time) (bool, string) {
	if on, why := k.check(); on && !a.Revert {
		return false, why
	}
	return true, ""
}

// Retry is the baselines' memory of what they asked for: it refuses,
// quietly, an action asked for already (the same target and value) until
// After has passed since, as a change may take effect later (an MPS client
// restart) or be refused while busy; one refused as not supported is
// never asked for again.
type Retry struct {
	After time.Duration
	mu    sync.Mutex
	asked map[string]retryState
}

type retryState struct {
	at    time.Time
	never bool
}

// Name returns "retry".
func (*Retry) Name() string { return GuardRetry }

// Quiet marks the refusals as no decisions.
func (*Retry) Quiet() {}

func retryKey(a Action) string { return a.Target.String() + "=" + a.Want.String() }

// Admit refuses an action asked for less than After ago, or refused as not
// supported.
func (r *Retry) Admit(_ *State, a Action, now time.Time) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.asked[retryKey(a)]
	switch {
	case !ok:
		return true, ""
	case s.never:
		return false, "refused as not supported"
	case now.Sub(s.at) < r.After:
		return false, fmt.Sprintf("asked for %v ago; asked again after %v", now.Sub(s.at).Round(time.Second), r.After)
	}
	return true, ""
}

// Record remembers an action the actuator was asked for, or a guard after
// Retry refused (the kill switch, a budget): asked for again after After,
// not at every snapshot, so that a refusal is counted once a wait and not
// once a round.
func (r *Retry) Record(a Action, o Outcome, err error, now time.Time) {
	switch o {
	case OutcomeApplied, OutcomeRefused, OutcomeFailed, OutcomeGuarded:
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asked == nil {
		r.asked = map[string]retryState{}
	}
	// what refuses nothing any more is dropped: the values a target was
	// asked for would otherwise pile up, one for each ever asked
	for k, s := range r.asked {
		if !s.never && now.Sub(s.at) >= r.After {
			delete(r.asked, k)
		}
	}
	r.asked[retryKey(a)] = retryState{at: now, never: errors.Is(err, gpu.ErrNotSupported)}
}
