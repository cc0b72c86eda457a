package tuner

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// ActionKey counts actions by knob and outcome.
type ActionKey struct {
	Knob    gpu.Knob
	Outcome Outcome
}

// Counts are the tuner's cumulative counters since start.
type Counts struct {
	Actions         map[ActionKey]uint64
	Refusals        map[string]uint64 // by guard name
	Reverts         uint64
	Restores        uint64
	RestoreFailures uint64
	JournalErrors   uint64
}

// CountedOutcomes are the outcomes whose action counters start at 0.
var CountedOutcomes = []Outcome{OutcomeGuarded, OutcomeRecommended, OutcomeApplied, OutcomeRefused, OutcomeFailed, OutcomeRolledBack}

func newCounts() Counts {
	c := Counts{Actions: map[ActionKey]uint64{}, Refusals: map[string]uint64{}}
	for _, k := range CountedKnobs {
		for _, o := range CountedOutcomes {
			c.Actions[ActionKey{k, o}] = 0
		}
	}
	for _, g := range GuardNames {
		c.Refusals[g] = 0
	}
	return c
}

func (c Counts) clone() Counts {
	c.Actions = maps.Clone(c.Actions)
	c.Refusals = maps.Clone(c.Refusals)
	return c
}

// Setting is one knob's target, and the value in effect as last seen. The
// target is the value the tuner last set (applied, rolled back to, or
// thawed to: a thawed pause's target is 0), or, with Mode recommend, the
// value it last recommended and did not set. A change a guard or the
// actuator refused, or that failed, leaves the target as it was: it is a
// decision, not a target.
type Setting struct {
	GPU      string // UUID
	GPUIndex int
	Tenant   string
	Knob     gpu.Knob
	PID      uint32
	// Mode is enforce where the tuner set Target, recommend where it only
	// recommends it (its GPU's mode is recommend, or, in enforce mode,
	// nothing could set it: no rebalancing hook, the journal unwritable).
	Mode   Mode
	Target Value
	// Effective is the value in effect as the latest snapshot shows it
	// (nil when the snapshot does not say).
	Effective Value
	At        time.Time
}

// Status is what the tuner exports: immutable once published, read by
// the collector through Tuner.Status without any call into the tuner's
// I/O.
type Status struct {
	Policy     string
	Mode       Mode
	GPUModes   map[string]Mode
	KillSwitch bool
	LastRun    time.Time
	// Interval is the time from one round's start to the next's as the
	// Runner runs them (--tuner.interval); 0 where no Runner runs the
	// tuner on a clock (Tuner.Status itself, a policy run offline).
	Interval time.Duration
	Settings []Setting // sorted by GPU, tenant, knob, PID
	Counts   Counts
	// Unrestored is the number of originals changed and not yet restored;
	// Exit says what the exit does with them.
	Unrestored int
	Exit       ExitRestores
	// Recent are the latest decisions, oldest first.
	Recent []Decision
	// Actuators says which backend drives each knob on this host.
	Actuators []ActuatorInfo
	// SwitchedOff are the knobs the tuner never changes, whatever a GPU
	// has: those --tuner.disable-knob names and the opt-in ones
	// --tuner.enable-knob does not (Options.Disabled), sorted.
	SwitchedOff []gpu.Knob
	// FastWindow is the span of the SLO signal the policies act on.
	FastWindow time.Duration
	// Burns are the latency tenants' SLO over the fast window in the
	// latest round, by tenant.
	Burns []TenantBurn
	// GPUs say what the latest round did on each GPU, or why it held, and
	// the knobs the host's backends can turn there, by index.
	GPUs []GPURound
	// History are the latest rounds' burns and knob values, oldest first
	// (at most HistoryPoints).
	History []RoundPoint
	// PauseFreezeFailures are, per tenant, the pause periods whose
	// freeze failed since start (each thawed once its freeze did not settle); nil
	// where the pause actuator does not report them.
	PauseFreezeFailures map[string]uint64
	// PausePeriod is the pause actuator's pulse period (a failure above
	// counts at most once each); 0 where it does not report them.
	PausePeriod time.Duration
	// Hooks are the actuator calls running a hook that the tuner started
	// off its round and has not settled, oldest first.
	Hooks []HookRun
	// HookWaits are the reverts due and the restores of a successor that
	// wait for one of those calls (HookWait), reverts first.
	HookWaits []HookWait
	// Journal is what the journal's recovery, compaction and writes did;
	// nil without a journal. While its WriteError is set the tuner makes
	// no change.
	Journal *JournalStats
	// NodeLock is the node lock this tuner holds, or why it holds none.
	NodeLock NodeLockState
}

// ModeOf is the mode the tuner applies to one GPU (by UUID, then index,
// then the host's mode), as it resolves it itself.
func (s *Status) ModeOf(uuid string, index int) Mode {
	if s == nil {
		return ModeOff
	}
	return modeOf(s.Mode, s.GPUModes, uuid, index)
}

// Status returns the latest published status (never nil).
func (t *Tuner) Status() *Status { return t.status.Load() }

func (t *Tuner) publish(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.publishLocked(now)
}

func (t *Tuner) publishLocked(now time.Time) {
	if t.o.Unwatched && t.status.Load() != nil {
		return
	}
	s := &Status{
		Policy: t.o.Policy.Name(), Mode: t.o.Mode, GPUModes: maps.Clone(t.o.GPUModes),
		LastRun: now, Counts: t.counts.clone(), Unrestored: len(t.originals),
		Recent: slices.Clone(t.recent), Actuators: slices.Clone(t.o.Actuated), SwitchedOff: slices.Sorted(slices.Values(t.o.Disabled)),
		FastWindow: t.o.FastWindow, Burns: slices.Clone(t.burns), GPUs: slices.Clone(t.rounds), History: t.hist.points(),
		NodeLock: t.o.NodeLock,
	}
	s.KillSwitch = t.chain().Stopped()
	if t.o.Journal != nil {
		js := t.o.Journal.Stats()
		s.Journal = &js
	}
	t.syncPauses()
	s.Settings = t.settings()
	s.PauseFreezeFailures = t.pauseFailures
	if t.o.Pauses != nil {
		s.PausePeriod = t.o.Pauses.PausePeriod()
	}
	s.Exit = t.exitRestores()
	s.Hooks = t.hookRuns()
	s.HookWaits = t.hookWaits(now)
	t.status.Store(s)
}

// noteRound keeps what the status tells of a round on st: the burns, each
// GPU's line, and the history's point.
func (t *Tuner) noteRound(st *State, actions, held []Action, out []Decision, stale time.Duration) {
	if t.o.Unwatched {
		return
	}
	t.burns = tenantBurns(st.Snapshot, st.Fast)
	t.rounds = gpuRounds(roundInput{snap: st.Snapshot, burns: t.burns, modeOf: t.modeOf, killed: t.chain().Stopped(), stale: stale, actions: actions, held: held, out: out,
		hooks: t.hookRuns(), waits: t.hookWaits(st.Now), holder: t.holderRun, journalHeld: t.journalHeldOn, now: st.Now})
	t.noteKnobs(st.Snapshot, st.Knobs)
	t.syncPauses()
	t.noteUnmatchedModes(st.Snapshot)
	t.hist.add(roundPoint(st.Now, st.Snapshot, t.burns, t.settings()))
}

// settings are the latest targets with the values in effect, sorted by
// GPU, tenant, knob and PID. An MPS client's setting names the tenant the
// latest snapshot gives its process (a reload may have given it to
// another), as the client's row on /tuner and the tenant metrics do, and
// as the history's point names it (pidTenants).
func (t *Tuner) settings() []Setting {
	var out []Setting
	var owners map[pidKey]string // of the latest snapshot, made once
	for _, st := range t.targets {
		st.Effective = t.effective(st)
		if st.Knob == gpu.KnobMPSActiveThreads && t.last != nil {
			if owners == nil {
				owners = pidTenants(t.last)
			}
			if owner := owners[pidKey{st.GPU, st.PID}]; owner != "" {
				st.Tenant = owner
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Setting) int {
		return cmp.Or(cmp.Compare(a.GPUIndex, b.GPUIndex), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Knob, b.Knob), cmp.Compare(a.PID, b.PID))
	})
	return out
}

// setTarget remembers the latest target of a knob: a.Want, set (mode
// enforce) or recommended (mode recommend). A value only recommended
// leaves a target set before as it is: that one is in force, and the
// target gauges serve what the tuner set (the decision says what it
// recommended).
func (t *Tuner) setTarget(a Action, mode Mode) {
	now := t.o.Clock.Now()
	if old, ok := t.targets[a.Target.String()]; ok && mode == ModeRecommend && old.Mode == ModeEnforce {
		t.trackProc(a.Target, now)
		return
	}
	t.targets[a.Target.String()] = Setting{GPU: a.GPU, GPUIndex: a.GPUIndex, Tenant: a.Tenant, Knob: a.Knob, PID: a.PID,
		Mode: mode, Target: a.Want, At: now}
	t.trackProc(a.Target, now)
}

// effective reads a setting's value in effect from the latest snapshot,
// a pause's from the pause actuator.
func (t *Tuner) effective(st Setting) Value {
	if st.Knob == gpu.KnobPauseDuty && t.pausesInForce != nil {
		return t.pausesInForce[PauseKey(st.GPU, st.Tenant)] // 0: not paused
	}
	if t.last == nil || t.last.Readings == nil {
		return nil
	}
	for i := range t.last.Readings.Devices {
		d := &t.last.Readings.Devices[i]
		if d.UUID == st.GPU {
			if v := currentValue(d, st.Knob, st.PID); v != nil {
				return v
			}
		}
	}
	if f, ok := t.effectiveMPS[Target{GPU: st.GPU, Knob: st.Knob, PID: st.PID}.String()]; ok && st.Knob == gpu.KnobMPSActiveThreads {
		return f
	}
	return nil
}

// currentValue is a knob's value on a device as read (nil when unknown).
func currentValue(d *gpu.Device, k gpu.Knob, pid uint32) Value {
	switch k {
	case gpu.KnobMPSActiveThreads:
		for _, p := range d.Processes {
			if p.PID == pid && p.MPSActiveThreads != nil {
				return Fraction(*p.MPSActiveThreads)
			}
		}
	case gpu.KnobComputeTimeSlice:
		if d.ComputeTimeSlice != "" {
			return Level(d.ComputeTimeSlice)
		}
	case gpu.KnobVGPUScheduler:
		if d.Scheduler != nil {
			return SchedulerOf(d.Scheduler)
		}
	case gpu.KnobPowerLimit:
		if d.PowerLimitW != nil {
			return Watts(*d.PowerLimitW)
		}
	case gpu.KnobLockedClocks:
		if d.ClocksLocked != nil && !*d.ClocksLocked {
			return ClockRange{}
		}
	}
	return nil
}

// syncPauses takes the pauses in force and the failed freezes from the
// pause actuator, when it reports them.
func (t *Tuner) syncPauses() {
	if t.o.Pauses == nil {
		return
	}
	t.pausesInForce = map[string]Duty{}
	if t.pausedTenants == nil {
		t.pausedTenants = map[string]bool{}
	}
	for _, p := range t.o.Pauses.PausesInForce() {
		t.pausesInForce[PauseKey(p.UUID, p.Tenant)] = Duty(p.Duty)
		t.pausedTenants[p.Tenant] = true
	}
	// served from 0 from a tenant's first pause, so that increase()
	// counts its first failed freeze
	failures := make(map[string]uint64, len(t.pausedTenants))
	for name := range t.pausedTenants {
		failures[name] = 0
	}
	maps.Copy(failures, t.o.Pauses.PauseFreezeFailures())
	if len(failures) == 0 {
		failures = nil // none paused, none failed: no series
	}
	t.pauseFailures = failures
}
