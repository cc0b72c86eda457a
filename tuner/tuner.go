package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Mode says what the tuner does with the actions its guards admit.
type Mode string

// Modes.
const (
	ModeOff       Mode = "off"       // decide nothing
	ModeRecommend Mode = "recommend" // decide, guard, journal and export; never act
	ModeEnforce   Mode = "enforce"   // act
)

// Modes lists the modes, for flags and metrics.
var Modes = []Mode{ModeOff, ModeRecommend, ModeEnforce}

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown tuner mode %q (want off, recommend or enforce)", s)
}

// Decider is a policy in the tuner's shape: pure, state in, actions out.
type Decider interface {
	Name() string
	Decide(s *State) []Action
}

// Options build a Tuner.
type Options struct {
	Policy    Decider
	Guards    []Guard
	Actuators Actuators
	Journal   *Journal // nil: originals are kept in memory only
	Clock     gpu.Clock
	Mode      Mode
	// GPUModes overrides Mode per GPU, by UUID or index ("0").
	GPUModes map[string]Mode
	// FastWindow is the span of the quick SLO signal (State.Fast).
	FastWindow time.Duration
	// RevertAfter is how long after a change that gives protection away
	// (a cap raised, a power limit lowered) its effect is judged; a change
	// that made the objective worse is reverted. 0 disables reverts.
	RevertAfter time.Duration
	// Hold keeps a reverted value from coming back (the revert_hold guard).
	Hold *RevertHold
	// MPSStates, when set, reports the MPS actuator's pending and
	// effective fractions each round (a real host's MPS controller; the
	// simulator's readings report effective fractions themselves).
	MPSStates MPSStateSource
	// Pauses, when set, reports the pause actuator's pauses in force, for
	// the status (the value of pause_duty in effect, the failed freezes).
	Pauses gpu.PauseReporter
	// Actuated says which backend drives each knob, for the status.
	Actuated []ActuatorInfo
	// NodeLock says whether the node lock is held, for the status.
	NodeLock NodeLockState
	// Rebalance is the slow loop's planner; nil: no rebalancing.
	Rebalance RebalancePlanner
	// Disabled knobs are never changed: the policy's actions on them are
	// dropped before the guards (an operator who wants no clock or power
	// control, or a comparison run without a knob), and State.Available
	// says no for them, so that a policy turns to another remedy.
	Disabled []gpu.Knob
	// Enabled are the knobs of OptInKnobs this tuner may change; the
	// others of that list are disabled.
	Enabled []gpu.Knob
	Logger  log.Logger
	// StaleAfter is the age past which a round's snapshot is stale: the
	// round decides nothing (see staleAge); 0: never.
	StaleAfter time.Duration
	// Unwatched: nobody reads this tuner's Status (a policy run offline,
	// TunerPolicy.Init), so the rounds keep none: Status stays the one
	// New published. Decisions are the same either way.
	Unwatched bool
}

// OptInKnobs are the knobs a tuner changes only where Options.Enabled
// names them. The pause duty is one: it is the knob that can hurt a batch
// tenant most: on the built-in scenarios it takes batch work where
// autotune without it does not, and it misses a seed autotune meets
// without it (docs/pause.md), so it waits for an operator to ask for it
// (--tuner.enable-knob, vgpusim --enable-knob).
var OptInKnobs = []gpu.Knob{gpu.KnobPauseDuty}

// OptInNames are the names of OptInKnobs, for flags.
func OptInNames() []string {
	out := make([]string, len(OptInKnobs))
	for i, k := range OptInKnobs {
		out[i] = string(k)
	}
	return out
}

// withOptIns returns disabled and every knob of OptInKnobs not enabled.
func withOptIns(disabled, enabled []gpu.Knob) []gpu.Knob {
	out := slices.Clone(disabled)
	for _, k := range OptInKnobs {
		if !slices.Contains(enabled, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// MPSStateSource reports the MPS actuator's pending and effective
// fractions of its clients: on a real host, the MPS control daemon's
// controller, which takes the effective fractions the readings report as
// a subscriber of the sampler.
type MPSStateSource interface {
	ClientStates() []gpu.MPSClientState
}

// MPSResolver is an MPSStateSource that holds a client's fraction at a
// resolution of its own (State.MPSHeld): HeldFraction is the fraction the
// client runs with once f is set for it and it is restarted (the MPS
// controller's: a whole percentage, at most the client's server's value).
type MPSResolver interface {
	HeldFraction(uuid string, pid uint32, f float64) float64
}

// MPSCachedResolver is an MPSResolver whose HeldFraction may call out (the
// MPS controller's reads its server's value again once a minute old, a
// daemon command): CachedHeldFraction holds f as HeldFraction does with
// what it last read, calling nothing. The tuner's set-back comparison
// (setsBackHeld), made under its lock and at exit outside any call's
// deadline, uses it; a resolver without it is taken to call nothing.
type MPSCachedResolver interface {
	CachedHeldFraction(uuid string, pid uint32, f float64) float64
}

// DefaultGuards returns the guard chain the exporter and vgpusim use.
func DefaultGuards(kill *KillSwitch, hold *RevertHold) []Guard {
	gs := []Guard{}
	if kill != nil {
		gs = append(gs, kill)
	}
	gs = append(gs,
		Bounds{},
		DeadBand{Min: 0.02},
		&Backoff{Base: 30 * time.Second, Max: 10 * time.Minute},
		&Dwell{For: 20 * time.Second, Fast: 5 * time.Second},
		&Hysteresis{For: 2 * time.Minute, Fast: 10 * time.Second},
	)
	if hold != nil {
		gs = append(gs, hold)
	}
	// Budgets last: a refused action does not spend them.
	return append(gs, budgets()...)
}

// budgets are the guards that bound how many changes get through: 8 a
// round, and a host-wide rate of one every 10 s with a burst of 6.
func budgets() []Guard { return []Guard{&Cap{Max: 8}, NewRate(10*time.Second, 6)} }

// Tuner is the observe -> decide -> guard -> act loop.
type Tuner struct {
	o    Options
	fast *fastTracker
	// call is the actuator call under way, and stallAfter how long a
	// round runs before it is logged with it (RoundStallAfter).
	call       callNote
	stallAfter time.Duration

	mu        sync.Mutex
	changes   map[string]Change
	history   map[string][]Change // by Target.DomainKey, see State.History
	pending   map[string]Fraction
	originals map[string]Original // in memory, journal or not
	targets   map[string]Setting  // last target decided, by Target.String
	// procs are the process targets kept above, forgotten once their
	// process is gone (forgetGone)
	procs map[string]procSeen
	// watches are the restarted MPS clients whose successor is looked
	// for, or told and not yet followed (the journal did not take its
	// original), by Target.String (successor.go)
	watches map[string]*successorWatch
	// restoreWaits are the restores at start deferred to a round: of a
	// successor found whose restart hook waits for another, of a client
	// no snapshot has listed yet (restorehook.go): why, by Target.String
	restoreWaits map[string]string
	// thawWaits are the MPS originals whose restore at start was not
	// tried because their tenant's pause was still open (its thaw
	// failed): why, by Target.String, deferred to a round once the
	// tenant is thawed (thawretry.go)
	thawWaits map[string]string
	// restoredNow are the targets a restore set back or tried to, by
	// Target.String, and when, till a snapshot sampled after it: the
	// rounds' policy actions on them are passed over (heldByRestore)
	restoredNow map[string]time.Time
	// onGPU are the processes the rounds saw on each GPU within
	// GoneAfter, what was there at an MPS client's restart (restartOf)
	onGPU map[pidKey]recentProc
	evals []evaluation
	// judged are the evaluations the round's reverts came from, by the
	// revert's Target.String (dueReverts): kept again by one that waits
	judged    map[string]evaluation
	recovered bool
	thawed    bool // the first round's thaw of journaled pauses is done
	// gone counts, per pause original (Target.String), the rounds in a
	// row its tenant has run on other GPUs and not on the pause's
	gone map[string]int
	// unseen is, per pause original, since when its tenant has had no
	// process on any GPU; followAt, when a failed follow of it (or of an
	// MPS original to its client's successor: followTold) is tried again
	unseen   Absent
	followAt map[string]followRetry
	// ending holds the pauses whose thaw the policy asked for and the
	// actuator refused: not followed (the actuator may have ended them)
	ending map[string]bool
	// endedUnseen is, per pause setting with no original open, since
	// when its tenant has had no process on any GPU (forgetEndedPauses)
	endedUnseen Absent
	// pauseMPS are the pause settings whose tenant's processes on the GPU
	// were, when last listed, MPS clients only: the MPS clients' list,
	// read, tells whether it still runs there (listsRead.holdsTenant)
	pauseMPS map[string]bool
	// sharedNow is, per paused tenant, why its pause in force reaches
	// another tenant's process this round ("" where it does not): checked
	// once a round (inForceShared), whatever the GPUs it is paused on
	sharedNow map[string]string

	last   *tenant.Snapshot
	counts Counts
	recent []Decision
	// effectiveMPS are the MPS actuator's effective fractions, last seen.
	effectiveMPS map[string]Fraction
	// pausesInForce are the pause duties in force by PauseKey, last seen
	// (nil without Options.Pauses); pauseFailures the freezes failed, by
	// tenant, 0 for each tenant that has had a pause in force
	// (pausedTenants) and none failed.
	pausesInForce map[string]Duty
	pauseFailures map[string]uint64
	pausedTenants map[string]bool
	// reb is the slow loop's memory (see Options.Rebalance); relayouts the MIG
	// relayouts under way, by GPU UUID.
	reb       rebalanceMemory
	relayouts map[string]*relayoutJob
	// stopped is whether the kill switch stopped the tuner last round,
	// staleHeld whether its snapshot was stale (noteStale); refused the
	// last refusal logged per target (see logRefusal).
	stopped, staleHeld bool
	refused            map[string]string
	// readBackLogged is, by target, the mismatch or read-back error
	// last logged (readBack).
	readBackLogged map[string]string
	// inForce are the device settings' values in force as the tuner's
	// own calls left them, by Target.String (inforce.go).
	inForce map[string]inForceValue
	// unidentified, unnamedCgroups and cgroupsLeftOut bound the warnings
	// that the pause actuator cannot tell processes apart now (identify),
	// or name the cgroups it freezes (cgroupsOf), or that a record cannot
	// hold them all (noteCgroupsLeftOut), or that the MPS actuator cannot
	// tell a client apart (clientIdentity): one line an hour each, on the
	// tuner's clock.
	unidentified, unnamedCgroups, cgroupsLeftOut, unidentifiedClients *ratelog.Log
	// burns, rounds and hist are the latest round as the status tells it
	// (see round.go, history.go).
	burns  []TenantBurn
	rounds []GPURound
	hist   *roundRing
	// knobsLogged is, by GPU UUID, the knobs last logged (noteKnobs);
	// modesUnmatched the per-GPU modes naming no GPU, and modesConflicting
	// the GPUs given two modes, as last logged (noteUnmatchedModes,
	// noteConflictingModes).
	knobsLogged                      map[string]string
	modesUnmatched, modesConflicting string
	// caps are the backends' lists of each GPU's knobs, asked once a
	// round (capCache).
	caps capCache
	// journalBroken is whether the last journal write failed;
	// journalHeldOn, by GPU UUID, whether the round's latest change
	// recommended there was held back by the journal (noteJournalHeld).
	journalBroken bool
	journalHeldOn map[string]bool
	// unwritten are the restored records the journal could not take, by
	// target (unwritten.go).
	unwritten map[string]Record
	// movedAtExit: the originals the exit moved to successors without a
	// record (followUnjournaled); restoredPending: the MPS restores settled
	// pending, till a reading confirms them (pendingcontradicted.go).
	movedAtExit     map[string]movedOriginal
	restoredPending map[string]restoredPending
	// compactErr is the journal's compaction error last logged.
	compactErr string
	// relinkErr is the journal's Relink error last logged.
	relinkErr string
	// exiting: the restore at exit has begun; originals adopted from a
	// journal put at the path since are kept for the next start.
	exiting bool
	// hooks are the actuator calls running off the round, by
	// Target.String (hooks.go); hookCtx is their parent, cancelled by
	// hookStop at the exit's restore.
	hooks    map[string]*hookCall
	hookCtx  context.Context
	hookStop context.CancelFunc
	// hookLive are the hooks' calls apart from mu, for an exit after a
	// stuck round, which holds mu.
	hookLive hookLive

	status atomic.Pointer[Status]
}

// evaluation is a change whose effect is judged later.
type evaluation struct {
	a      Action
	before float64
	due    time.Time
	// epochs are the trackers (latency.Status.Epoch) of the latency
	// tenants of the GPU that before counted: those with requests in
	// their fast window when the change was made
	epochs map[string]uint64
}

// New returns a Tuner. Policy and Clock are needed.
func New(o Options) (*Tuner, error) {
	if o.Policy == nil || o.Clock == nil {
		return nil, errors.New("tuner: a policy and a clock are needed")
	}
	if o.Mode == "" {
		o.Mode = ModeOff
	}
	o.Disabled = withOptIns(o.Disabled, o.Enabled)
	if o.FastWindow <= 0 {
		o.FastWindow = time.Minute
	}
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	t := &Tuner{
		o: o, fast: newFastTracker(o.FastWindow), stallAfter: RoundStallAfter,
		changes: map[string]Change{}, history: map[string][]Change{}, pending: map[string]Fraction{},
		originals: map[string]Original{}, targets: map[string]Setting{}, watches: map[string]*successorWatch{}, inForce: map[string]inForceValue{},
		counts: newCounts(), hist: newRoundRing(HistoryPoints), unidentified: ratelog.New(time.Hour, 1), unnamedCgroups: ratelog.New(time.Hour, 1), cgroupsLeftOut: ratelog.New(time.Hour, 1), unidentifiedClients: ratelog.New(time.Hour, 1),
	}
	if o.Journal != nil {
		for _, orig := range o.Journal.Originals() {
			t.adoptOriginal(orig, o.Clock.Now())
			warnPolicyOnly(o.Logger, orig)
		}
		if o.Rebalance != nil {
			t.resumeSlowLoop(o.Journal, o.Clock.Now())
		}
	}
	t.publish(time.Time{})
	return t, nil
}

// bind makes act the actuators the tuner acts through.
func (t *Tuner) bind(act Actuators) {
	t.mu.Lock()
	t.o.Actuators = act
	t.mu.Unlock()
}

// modeOf returns the mode of a GPU.
func (t *Tuner) modeOf(uuid string, index int) Mode {
	return modeOf(t.o.Mode, t.o.GPUModes, uuid, index)
}

// modeOf is a GPU's mode: its own (by UUID or by index), else the host's.
// A GPU given a mode both ways, two different ones, gets the safer of the
// two (saferMode): which flag was meant cannot be told, and acting on a
// GPU meant to be left alone is the worse mistake (noteConflictingModes
// logs it).
func modeOf(host Mode, gpus map[string]Mode, uuid string, index int) Mode {
	byUUID, u := gpus[uuid]
	byIndex, i := Mode(""), false
	if index >= 0 {
		byIndex, i = gpus[strconv.Itoa(index)]
	}
	switch {
	case u && i:
		return saferMode(byUUID, byIndex)
	case u:
		return byUUID
	case i:
		return byIndex
	}
	return host
}

// saferMode is the one of a and b that does less: off, then recommend,
// then enforce (Modes' order).
func saferMode(a, b Mode) Mode {
	if slices.Index(Modes, b) < slices.Index(Modes, a) {
		return b
	}
	return a
}

// AnyEnforce says whether a tuner with this mode and these per-GPU modes
// acts on any GPU.
func AnyEnforce(mode Mode, gpuModes map[string]Mode) bool {
	return mode == ModeEnforce || slices.Contains(slices.Collect(maps.Values(gpuModes)), ModeEnforce)
}

// RunOnce runs one observe -> decide -> guard -> act round on snap and
// returns the decisions made, with their outcomes. The first round in
// enforce mode first restores the originals an earlier run left in the
// journal (it crashed before restoring them), unless Recover did.
func (t *Tuner) RunOnce(ctx context.Context, snap *tenant.Snapshot) ([]Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer t.watchRound()()
	now := t.o.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.caps = capCache{}
	defer func() { t.caps = nil }()
	clear(t.journalHeldOn)
	t.endRestoreHolds(snap) // (those this snapshot was sampled after)
	var out []Decision
	var errs []error
	t.probeJournal() // (while its last write failed)
	if snap == nil {
		t.publishLocked(now)
		return nil, nil
	}
	age := t.staleAge(t.last, snap, now)
	t.last = snap
	t.noteRecent(snap, now)
	t.noteLostInForce(snap)
	t.noteStale(age, snap)
	t.noteConflictingModes(snap)
	if d, err := t.recoverLocked(ctx, now); err != nil || len(d) > 0 {
		out = append(out, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	t.cutHooks(now)
	if d, err := t.collectHooks(ctx, now); err != nil || len(d) > 0 {
		out = append(out, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	out = append(out, t.thawPauses(ctx, now, !t.thawed)...)
	t.thawed = true
	out = append(out, t.followPauses(ctx, now)...)
	if d, err := t.findSuccessors(ctx, snap, now); err != nil || len(d) > 0 {
		out = append(out, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	t.forgetGone(snap, now)
	t.forgetEndedPauses(snap, now)
	t.syncPending(snap)
	t.syncKept(snap)
	var fast map[string]FastSLO
	if age == 0 { // a stale snapshot's counters are not new points
		fast = t.fast.observe(now, snap)
	}
	st := &State{Now: now, Snapshot: snap, Changes: t.changes, Pending: t.pending, Effective: t.syncMPS(),
		Fast: fast, Originals: map[string]Value{}, History: t.history, Drives: t.drives(),
		Knobs: t.gpuKnobs(snap), Waits: t.chain().Waits(now), Modes: t.gpuModes(snap)}
	st.MPSResolver, _ = t.o.MPSStates.(MPSResolver)
	for k, o := range t.originals {
		st.Originals[k] = o.Value
		if o.Target.Knob == gpu.KnobPauseDuty && o.Tenant != "" {
			if st.Paused == nil {
				st.Paused = map[string]Target{}
			}
			st.Paused[PauseKey(o.Target.GPU, o.Tenant)] = o.Target
		}
	}
	t.chain().Begin(now)
	t.noteKillSwitch()
	var actions, held []Action
	if age == 0 && (t.o.Mode != ModeOff || len(t.o.GPUModes) > 0) {
		actions = append(t.dueReverts(st, now), t.o.Policy.Decide(st)...)
		actions = slices.DeleteFunc(actions, func(a Action) bool { return slices.Contains(t.o.Disabled, a.Target.Knob) })
		actions, held = t.splitHeld(actions)
	}
	out = append(out, t.handle(ctx, st, actions, now)...)
	if age == 0 {
		out = append(out, t.rebalance(ctx, st, now)...)
	}
	// a relayout under way goes on (or is given up at the kill switch)
	// whatever the round decided, with or without a slow loop (one started
	// this round had its look as it started: one an instant)
	out = append(out, t.progressRelayouts(ctx, now)...)
	t.remember(out)
	t.noteRound(st, actions, held, out, age)
	t.publishLocked(now)
	return out, errors.Join(errs...)
}

// splitHeld parts the actions the policy holds back (Action.Held) from
// the others, and logs the held ones at debug level: a hold is no
// decision.
func (t *Tuner) splitHeld(actions []Action) (act, held []Action) {
	for _, a := range actions {
		if a.Held == "" {
			act = append(act, a)
			continue
		}
		held = append(held, a)
		level.Debug(t.o.Logger).Log("msg", "tuner holding", "gpu", a.GPU, "knob", a.Knob, "to", a.Want, "held", a.Held, "reason", a.Reason)
	}
	return act, held
}

// noteKillSwitch logs the kill switch engaged or released, once a change.
func (t *Tuner) noteKillSwitch() {
	on := t.chain().Stopped()
	if on == t.stopped {
		return
	}
	t.stopped = on
	if on {
		level.Warn(t.o.Logger).Log("msg", "tuner kill switch engaged: the tuner changes nothing (reverts excepted) until it is released")
		return
	}
	level.Info(t.o.Logger).Log("msg", "tuner kill switch released: the tuner acts again")
}

// remember keeps the latest decisions for the status (none where nobody
// reads it, Options.Unwatched).
func (t *Tuner) remember(out []Decision) {
	if t.o.Unwatched {
		return
	}
	t.recent = append(t.recent, out...)
	if n := len(t.recent); n > maxRecent {
		t.recent = append([]Decision(nil), t.recent[n-maxRecent:]...)
	}
}

// maxRecent is how many decisions the status keeps.
const maxRecent = 50

// noteApplied updates the tuner's memory after a change took (with st
// nil, the change keeps no SLO error or request counters to be judged by).
func (t *Tuner) noteApplied(st *State, a Action, now time.Time) {
	c := Change{At: now, From: a.Current, To: a.Want, Revert: a.Revert}
	if st != nil {
		c.Error, c.Counters = Objective(st, a.GPU), RequestCounts(st.Snapshot)
	}
	t.changes[a.DomainKey()] = c
	t.changes[a.Target.String()] = c
	t.trackProc(a.Target, now)
	t.observeProc(a.Target, now)
	delete(t.ending, a.Target.String())
	h := append(t.history[a.DomainKey()], c)
	if len(h) > maxHistory {
		h = append([]Change(nil), h[len(h)-maxHistory:]...)
	}
	t.history[a.DomainKey()] = h
	t.thawedByChange(a) // (a pause given back to 0: thawretry.go)
	if f, ok := a.Want.(Fraction); ok && !a.Restart {
		t.pending[a.Target.String()] = f
	} else {
		delete(t.pending, a.Target.String())
	}
	// a change supersedes the pending judgement of the one before it on
	// the same target: reverting that one would undo this one
	t.evals = slices.DeleteFunc(t.evals, func(e evaluation) bool { return e.a.Target == a.Target })
	if st != nil && a.Relax && !a.Revert && t.o.RevertAfter > 0 {
		t.evals = append(t.evals, evaluation{a: a, before: Objective(st, a.GPU), due: now.Add(t.o.RevertAfter), epochs: measuredEpochs(st, a.GPU)})
	}
}

// syncMPS takes the MPS actuator's pending and effective fractions, when
// it reports them: a pending fraction the actuator knows replaces the
// tuner's own, one it no longer holds is dropped. It returns the effective
// fractions by Target.String.
func (t *Tuner) syncMPS() map[string]Fraction {
	eff := map[string]Fraction{}
	if t.o.MPSStates == nil {
		return eff
	}
	for _, c := range t.o.MPSStates.ClientStates() {
		tg := Target{GPU: c.UUID, Knob: gpu.KnobMPSActiveThreads, PID: c.PID}
		k := tg.String()
		if c.Pending != nil {
			t.pending[k] = Fraction(*c.Pending)
			t.trackProc(tg, t.o.Clock.Now())
		} else {
			delete(t.pending, k)
		}
		if c.Effective != nil {
			eff[k] = Fraction(*c.Effective)
		}
	}
	t.effectiveMPS = eff
	return eff
}

// dueReverts judges the changes whose evaluation is due: one that made the
// GPU's objective worse is reverted and its value held.
func (t *Tuner) dueReverts(st *State, now time.Time) []Action {
	var out, keep = []Action{}, t.evals[:0]
	var hooked []Action // (the reverts out whose change will run a hook)
	t.judged = map[string]evaluation{}
	for _, e := range t.evals {
		back := revertOf(e.a)
		// a restarted client's is judged on its successor, once told;
		// one whose revert waits for a hook (its target's, another
		// restart hook of its tenant, or a plan moving it: inFlight, or
		// the hook of a revert out before it in this round), once that
		// is settled, judged then
		// and one a tenant of before is missing from, its counters
		// restarted since (a reload: another tracker) and none of its
		// requests in its new fast window yet, once it has some: without
		// it, the error after would be compared with one that had it
		if now.Before(e.due) || t.watches[e.a.Target.String()] != nil || t.inFlight(back) ||
			slices.ContainsFunc(hooked, func(h Action) bool { return waitsFor(back, h) }) || restartedUnmeasured(st, e.epochs) {
			keep = append(keep, e)
			continue
		}
		after := Objective(st, e.a.GPU)
		if after <= e.before+RevertMargin {
			continue
		}
		back.Reason = fmt.Sprintf("revert: the SLO error on this GPU rose from %.2f to %.2f after %v", e.before, after, e.a.Want)
		out = append(out, back)
		t.judged[back.Target.String()] = e
		if t.modeOf(back.GPU, back.GPUIndex) == ModeEnforce && t.hooked(back) {
			hooked = append(hooked, back)
		}
		if t.o.Hold != nil {
			t.o.Hold.Block(e.a.Target, e.a.Want, now)
		}
	}
	t.evals = keep
	return out
}

// measuredEpochs are the trackers of the latency tenants on a GPU that
// Objective counts (those with requests in their fast window).
func measuredEpochs(st *State, uuid string) map[string]uint64 {
	counts := RequestCounts(st.Snapshot)
	out := map[string]uint64{}
	for _, lt := range LatencyTenantsOn(st, uuid) {
		if _, ok := st.Fast[lt.Name].Attainment(); ok {
			out[lt.Name] = counts[lt.Name].Epoch
		}
	}
	return out
}

// restartedUnmeasured reports whether a tenant of epochs now counts under
// another tracker with no request in its fast window (which starts over
// with the tracker): Objective leaves it out.
func restartedUnmeasured(st *State, epochs map[string]uint64) bool {
	counts := RequestCounts(st.Snapshot)
	for name, epoch := range epochs {
		c, ok := counts[name]
		if _, measured := st.Fast[name].Attainment(); ok && c.Epoch != epoch && !measured {
			return true
		}
	}
	return false
}

// revertOf is the action that sets a's change back.
func revertOf(a Action) Action {
	a.Current, a.Want, a.Revert = a.Want, a.Current, true
	return a
}

// RevertMargin is the rise of the objective that counts as worse.
const RevertMargin = 0.5
