package tuner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The latest round as the status tells it: each latency tenant's burn over
// the fast window (the signal the policies act on), what the round did on
// each GPU or why it held, and a bounded history of the rounds' numbers.

// Burn is how fast a tenant's error budget burns at an attainment, for an
// SLO quantile: (1-attainment)/(1-quantile), the budget floored at 0.1%.
// 1 spends the budget exactly; above 1 the tenant misses its SLO.
func Burn(attainment, quantile float64) float64 {
	return (1 - attainment) / math.Max(1-quantile, 1e-3)
}

// TenantBurn is a latency tenant's SLO over the tuner's fast window in the
// latest round (State.Fast).
type TenantBurn struct {
	Tenant string
	// Window is the span the figures cover: Options.FastWindow, or less
	// just after start or a restart of the tenant's latency source.
	Window   time.Duration
	Requests float64
	Quantile float64
	// Attainment and Burn are known (Known) when a request ended in the
	// window and the tenant's latency source is up.
	Attainment, Burn float64
	Known            bool
	// SourceDown says the tenant's latency source is down: what the
	// window holds is from before it went, and is not a burn now (the
	// tuner holds on the tenant's GPU).
	SourceDown bool
	// SourceNotRead says the tenant's latency source has not been read
	// yet (SourceDown is then false): there is no burn yet, and the tuner
	// holds on the tenant's GPU as for a source down.
	SourceNotRead bool
}

// tenantBurns returns the fast-window figures of the snapshot's latency
// tenants, by tenant name.
func tenantBurns(snap *tenant.Snapshot, fast map[string]FastSLO) []TenantBurn {
	var out []TenantBurn
	if snap == nil {
		return out
	}
	for _, s := range snap.SLOs {
		f, ok := fast[s.Tenant]
		if !ok {
			continue
		}
		b := TenantBurn{Tenant: s.Tenant, Window: f.Over, Requests: f.Total, Quantile: s.Quantile,
			SourceDown: s.SourceRead && !s.SourceUp, SourceNotRead: !s.SourceRead}
		if att, ok := f.Attainment(); ok && s.SourceUp {
			b.Attainment, b.Burn, b.Known = att, Burn(att, s.Quantile), true
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b TenantBurn) int { return cmp.Compare(a.Tenant, b.Tenant) })
	return out
}

// RoundKind says what the latest round did on a GPU, or why it held.
type RoundKind string

// Round kinds. Every kind but RoundActing is a hold.
const (
	RoundActing       RoundKind = "acting"        // a change was applied
	RoundOff          RoundKind = "off"           // the GPU's mode is off
	RoundKillSwitch   RoundKind = "kill_switch"   // the kill switch is on
	RoundRecommend    RoundKind = "recommend"     // the GPU's mode is recommend
	RoundGuarded      RoundKind = "guarded"       // a guard refused the change
	RoundFailed       RoundKind = "failed"        // the actuator refused or failed it, or its knob is not available there
	RoundWaiting      RoundKind = "waiting"       // a change asked for already waits
	RoundHook         RoundKind = "hook_running"  // a hook the tuner started runs off the round
	RoundHeld         RoundKind = "held"          // the policy holds a change back (the knob's dwell)
	RoundWithinBudget RoundKind = "within_budget" // every SLO on the GPU within budget
	RoundNoChange     RoundKind = "no_change"     // an SLO over budget, no change proposed
	RoundNoSignal     RoundKind = "no_signal"     // no latency tenant with requests, or one whose SLO cannot be judged
	RoundDown         RoundKind = "down"          // the GPU could not be read
	RoundStale        RoundKind = "stale"         // no new sample: the tuner holds
)

// GPURound is what the latest round did on one GPU, or why it held.
type GPURound struct {
	GPU      string // UUID
	GPUIndex int
	Mode     Mode
	Kind     RoundKind
	// Why is a clause: what the round changed (RoundActing), else why it
	// held ("every SLO on this GPU is within budget ...").
	Why string
	// Guard is the guard that refused the round's last change (RoundGuarded;
	// in recommend mode too).
	Guard string
	// Knobs are the knobs of the tuner (CountedKnobs, in order), each with
	// whether the host's backends can turn it on this GPU as they listed it
	// this round; the executor does not try a change of one not available.
	Knobs []KnobAvailability
}

// Holding reports whether the round changed nothing on the GPU.
func (r GPURound) Holding() bool { return r.Kind != RoundActing }

// roundInput is what one round's GPU lines are made of.
type roundInput struct {
	snap    *tenant.Snapshot
	burns   []TenantBurn
	modeOf  func(uuid string, index int) Mode
	killed  bool
	stale   time.Duration // the snapshot's age, where it is stale
	actions []Action      // what the policy (and the reverts) asked for
	held    []Action      // what the policy held back (Action.Held)
	out     []Decision    // what became of them
	hooks   []HookRun     // the hooks running off the round
	waits   []HookWait    // the reverts and restores waiting for one
	// holder is the hook an action's change waits for (Tuner.holder), nil
	// for none; a nil holder holds nothing
	holder func(Action) *HookRun
	// journalHeld, by GPU UUID: the latest change recommended there was
	// held back by the journal (Tuner.noteJournalHeld)
	journalHeld map[string]bool
	now         time.Time
}

// gpuRounds says, per GPU of the snapshot, what the round did or why it
// held.
func gpuRounds(in roundInput) []GPURound {
	var out []GPURound
	if in.snap == nil || in.snap.Readings == nil {
		return out
	}
	for i := range in.snap.Readings.Devices {
		d := &in.snap.Readings.Devices[i]
		r := GPURound{GPU: d.UUID, GPUIndex: d.Index, Mode: in.modeOf(d.UUID, d.Index)}
		if r.Mode == ModeOff {
			r.Kind, r.Why = RoundOff, "the tuner is off on this GPU (--tuner.mode, --tuner.gpu-mode)"
		} else {
			r.Kind, r.Why, r.Guard = in.gpuRound(d)
			if r.Mode == ModeRecommend && r.Kind != RoundKillSwitch {
				r.Kind, r.Why = RoundRecommend, "the GPU is in recommend mode, the tuner changes nothing on it; "+r.Why
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b GPURound) int { return cmp.Compare(a.GPUIndex, b.GPUIndex) })
	return out
}

// gpuRound is one GPU's round whatever its mode: the decisions made on it
// first, then whether its tenants' SLOs needed any.
func (in roundInput) gpuRound(d *gpu.Device) (RoundKind, string, string) {
	var applied, guarded, failed, recommended []Decision
	for _, x := range in.out {
		if x.GPU != d.UUID {
			continue
		}
		switch x.Outcome {
		case OutcomeApplied, OutcomeRolledBack, OutcomeRestored:
			applied = append(applied, x)
		case OutcomeGuarded:
			guarded = append(guarded, x)
		case OutcomeFailed, OutcomeRefused:
			failed = append(failed, x)
		case OutcomeRecommended:
			recommended = append(recommended, x)
		}
	}
	asked := slices.ContainsFunc(in.actions, func(a Action) bool { return a.GPU == d.UUID })
	hook, wait := hookWhy(in.hooks, d.UUID, in.now), waitWhy(in.waits, d.UUID, in.now)
	var held *Action // the last action held back on the GPU
	for i := range in.held {
		if in.held[i].GPU == d.UUID {
			held = &in.held[i]
		}
	}
	switch {
	case len(applied) > 0:
		return RoundActing, "changed " + describeDecisions(applied), ""
	case !d.Up:
		return RoundDown, "the GPU could not be read: " + d.Err, ""
	case in.stale > 0:
		return RoundStale, staleWhy(in.stale, in.snap.Time), ""
	case in.killed:
		return RoundKillSwitch, "the kill switch is on: the tuner changes nothing (reverts excepted) until it is released", ""
	case hook != "" && len(failed)+len(guarded) == 0 && wait != "":
		return RoundHook, hook + "; " + wait, ""
	case hook != "" && len(failed)+len(guarded) == 0:
		return RoundHook, hook, ""
	case len(failed) > 0:
		x := failed[len(failed)-1]
		return RoundFailed, fmt.Sprintf("%s %s: %s", refusedOrFailed(x.Outcome), describeDecision(x), x.Reason), ""
	case len(guarded) > 0:
		x := guarded[len(guarded)-1]
		return RoundGuarded, fmt.Sprintf("the %s guard refused %s: %s", x.Guard, describeDecision(x), refusal(x)), x.Guard
	case len(recommended) > 0:
		why := "it recommends " + describeDecisions(recommended)
		if in.journalHeld[d.UUID] {
			why += " (" + journalHeld + ")" // not a guard's refusal: said so
		}
		return RoundRecommend, why, ""
	case wait != "":
		return RoundWaiting, wait, ""
	case held != nil:
		a := held
		return RoundHeld, fmt.Sprintf("%s (held back: %s)", a.Held, describeDecision(Decision{Knob: a.Knob, Tenant: a.Tenant, From: valueText(a.Current), To: a.Want.String()})), ""
	case asked:
		if wait := in.tenantHookWait(d.UUID); wait != "" {
			return RoundWaiting, wait, ""
		}
		return RoundWaiting, "the change the policy asks for was asked for already and is waiting to take effect (an MPS cap reaches a client's next context)", ""
	}
	return in.budget(d)
}

// budget says whether the GPU's latency tenants needed a change.
func (in roundInput) budget(d *gpu.Device) (RoundKind, string, string) {
	on, latency := map[string]bool{}, map[string]bool{}
	for _, u := range in.snap.Usage {
		if u.UUID == d.UUID {
			on[u.Tenant] = true
			latency[u.Tenant] = latency[u.Tenant] || u.Class == gpu.ClassLatency
		}
	}
	// A latency tenant whose SLO cannot be judged holds the GPU (the
	// policy neither gives back nor raises on it): that is the reason,
	// not the burn its dead source's last minute still shows.
	for i := range in.snap.SLOs {
		s := &in.snap.SLOs[i]
		switch {
		case !latency[s.Tenant]:
		case !s.SourceRead:
			return RoundNoSignal, s.Tenant + "'s latency source has not been read yet: holding (its SLO cannot be judged until it is, so nothing is given back, lowered or raised on it)", ""
		case !s.SourceUp:
			return RoundNoSignal, s.Tenant + "'s latency source is down: holding (its SLO cannot be judged, so nothing is given back, lowered or raised on it)", ""
		case !s.Measured:
			return RoundNoSignal, s.Tenant + "'s latency source has no window yet (its first read is the baseline its requests are counted from): holding (its SLO cannot be judged until the next read, so nothing is given back, lowered or raised on it)", ""
		case s.BelowFloor():
			return RoundNoSignal, fmt.Sprintf("%s's requests come below its SLO's min_throughput (%.2g/s over its %v window, floor %g/s): holding (too few to judge its SLO by)",
				s.Tenant, s.WindowRequests/s.Window.Seconds(), s.Window, s.MinThroughput), ""
		}
	}
	var worst *TenantBurn
	starting := false // a tenant's window has only its first reading
	for i := range in.burns {
		b := &in.burns[i]
		if on[b.Tenant] && b.Known && (worst == nil || b.Burn > worst.Burn) {
			worst = b
		}
		starting = starting || on[b.Tenant] && !b.Known && b.Window == 0
	}
	switch {
	case worst == nil && starting:
		return RoundNoSignal, "no SLO signal yet: the tuner's window starts at its first reading of the latency counters (after a start or a source's restart), and a burn needs two readings", ""
	case worst == nil:
		return RoundNoSignal, "no latency tenant on this GPU ended a request in the tuner's window: there is no SLO signal to act on", ""
	case worst.Burn <= 1:
		return RoundWithinBudget, fmt.Sprintf("every SLO on this GPU is within budget over the last %v (highest burn: %s %s)",
			worst.Window.Round(time.Second), worst.Tenant, BurnText(worst.Burn)), ""
	}
	return RoundNoChange, fmt.Sprintf("%s burns its error budget %s over the last %v, but the policy proposed no change this round",
		worst.Tenant, BurnText(worst.Burn), worst.Window.Round(time.Second)), ""
}

// BurnText renders a burn rate: "2.3x".
func BurnText(b float64) string {
	return strconv.FormatFloat(b, 'f', 2, 64) + "x"
}

// describeDecisions names the last of some decisions, and how many more.
func describeDecisions(ds []Decision) string {
	s := describeDecision(ds[len(ds)-1])
	if n := len(ds) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// describeDecision names a decision's change: "mps_active_threads of batch
// 40% → 25%".
func describeDecision(d Decision) string {
	s := string(d.Knob)
	if d.Tenant != "" {
		s += " of " + d.Tenant
	}
	from := d.From
	if from == "" {
		from = "unknown"
	}
	return s + " " + from + " → " + d.To
}

// refusal is the guard's own words in a guarded decision's reason.
func refusal(d Decision) string {
	mark := "refused by " + d.Guard + ": "
	if i := strings.LastIndex(d.Reason, mark); i >= 0 {
		return d.Reason[i+len(mark):]
	}
	return d.Reason
}

// refusedOrFailed says who stopped a change: the actuator failed it, or it
// was refused (by the actuator, or before it as not available on the GPU;
// the reason says which).
func refusedOrFailed(o Outcome) string {
	if o == OutcomeRefused {
		return "refused"
	}
	return "the actuator failed"
}

// tenantHookWait says why an MPS client restart the round was asked for
// on GPU uuid waits ("" for none): a hook under way on another GPU that
// holds it (Tuner.holder, inFlight's rule: one restart hook a tenant at a
// time, and none while a plan moves the tenant, by whichever of its moves).
func (in roundInput) tenantHookWait(uuid string) string {
	for _, a := range in.actions {
		if a.GPU != uuid || a.Knob != gpu.KnobMPSActiveThreads || !a.Restart || a.Revert || a.Tenant == "" || in.holder == nil {
			continue
		}
		r := in.holder(a)
		if r == nil || r.GPU == uuid {
			continue
		}
		ago := in.now.Sub(r.Since).Round(time.Second)
		if r.Plan {
			return fmt.Sprintf("the restart of %s's client %d waits for the rebalancing plan moving %s, started on GPU %d %v ago (no restart hook while a plan moves its tenant)",
				a.Tenant, a.PID, a.Tenant, r.GPUIndex, ago)
		}
		return fmt.Sprintf("the restart of %s's client %d waits for the hook under way for %s on GPU %d, started %v ago (one hook a tenant at a time)",
			a.Tenant, a.PID, r.Tenant, r.GPUIndex, ago)
	}
	return ""
}
