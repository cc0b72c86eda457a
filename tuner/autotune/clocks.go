package autotune

import (
	"fmt"
	"math"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Clocks and power: the SM clock locked against DVFS on a violation, or
// lowered for energy (the power limit where it cannot be locked) while
// every SLO has deep slack and no batch work runs, and given back.

// clocks locks the SM clock when a violation comes with latency variance
// on a GPU whose clock is moving; when every SLO on a GPU without batch
// work has deep slack it lowers the clock for energy (or, where the clock
// cannot be set, the power limit), and gives the speed back as soon as
// slack is lost. With no latency tenant left on the GPU, the clock and
// the power limit it lowered are given back (gone).
func (p *Autotune) clocks(s *tuner.State, d *gpu.Device, ds domainSignals) []tuner.Action {
	if len(ds.latency) == 0 {
		return p.gone(s, d) // (held while one is away: Decide)
	}
	clockT := tuner.Target{GPU: d.UUID, Knob: gpu.KnobLockedClocks}
	locked := d.ClocksLocked != nil && *d.ClocksLocked
	maxHz := 0.0
	if d.SMClockMaxHz != nil {
		maxHz = *d.SMClockMaxHz
	}
	_, kept := s.Originals[clockT.String()]
	// ours is the energy lock the tuner set (below the maximum clock), in
	// force where the readings say the clock is locked, or say nothing and
	// the tuner keeps the lock's original (NVML from R535 after a restart
	// of the exporter: its own lock is then given back, not locked over).
	var ours tuner.ClockRange
	if c, ok := s.LastChange(clockT); ok && (locked || d.ClocksLocked == nil && kept) {
		if r, ok := c.To.(tuner.ClockRange); ok && r.MaxMHz > 0 && float64(r.MaxMHz) < maxHz/1e6-0.5 {
			ours = r
		}
	}
	clockDwell := quiet(s, d.UUID, gpu.KnobLockedClocks, p.P.SlackDwell)
	lowered := p.lows.lowered(d, s.Now)
	// a GPU whose clock cannot be locked is left to the other remedies
	// (and to the power limit), as one that reports no maximum clock
	lockable := maxHz > 0 && s.Changeable(clockT)
	// lockKnown: the readings say whether the clock is locked, or the
	// tuner keeps an original of the lock (its own, this run's or the
	// journal's). Else (NVML from R535 reports no lock it did not set
	// itself) a lock in force may be an operator's: no lock is set over
	// it (the DVFS lock is held back, saying so, unknownLock), and energy
	// is saved through the power limit instead, whose value is read
	// (given back first on a violation).
	lockKnown := d.ClocksLocked != nil || kept
	// A power limit the tuner lowered (while the lock was not known) is
	// given back first on a violation, whatever the readings say of the
	// lock now, and no clock is locked for energy on top of it: one knob
	// at a time saves the energy.
	powerDown := powerLowered(s, d)
	if !lockKnown || (ds.anyViolating || !ds.alone()) && powerDown {
		if acts := p.power(s, d, ds); len(acts) > 0 {
			return acts
		}
	}
	switch {
	case ours != (tuner.ClockRange{}) && ds.anyViolating:
		orig, _ := s.Originals[clockT.String()].(tuner.ClockRange)
		return []tuner.Action{{Target: clockT, GPUIndex: d.Index, Current: ours, Want: orig, Revert: true, HoldLeft: true,
			Reason: ds.worst.name + " violates its SLO: give the SM clock back (" + orig.String() + ")"}}
	case ours != (tuner.ClockRange{}) && !ds.alone():
		// the lock was set with the latency tenants alone; what joined
		// them would run slower under it
		orig, _ := s.Originals[clockT.String()].(tuner.ClockRange)
		return []tuner.Action{{Target: clockT, GPUIndex: d.Index, Current: ours, Want: orig, Revert: true,
			Reason: besideWhy(ds) + ": give the SM clock back (" + orig.String() + ")"}}
	case ours != (tuner.ClockRange{}) && !ds.allSlack && p.stepUpDue(s, d, ds):
		// one step back up, and the step that lost the slack is held
		up := float64(ours.MaxMHz) + p.P.EnergyStep*maxHz/1e6
		want, _ := s.Originals[clockT.String()].(tuner.ClockRange)
		if up < maxHz/1e6-0.5 {
			want = tuner.ClockRange{MinMHz: uint32(math.Round(up)), MaxMHz: uint32(math.Round(up))}
		}
		return []tuner.Action{{Target: clockT, GPUIndex: d.Index, Current: ours, Want: want, HoldLeft: true,
			Reason: "an SLO on this GPU has lost its slack at " + ours.String() + ": one step back (" + want.String() + "), and " + ours.String() + " is held"}}
	case ds.anyViolating && !locked && d.SMClockHz != nil && lockable && lowered && variance(ds.worst) > p.P.VarianceRatio:
		mhz := uint32(maxHz / 1e6)
		a := tuner.Action{Target: clockT, GPUIndex: d.Index, Current: tuner.ClockRange{}, Want: tuner.ClockRange{MinMHz: mhz, MaxMHz: mhz},
			Reason: fmt.Sprintf("%s violates its SLO with p99/p50 %.2f while the SM clock runs below %.0f%% of its maximum between requests (%.0f%% now, lowered within the last %v): lock the clock so that requests stop paying for the ramp",
				ds.worst.name, variance(ds.worst), 100*dvfsLow, 100**d.SMClockHz/maxHz, dvfsMemory)}
		if !lockKnown {
			a.Current, a.Held = nil, unknownLock
		}
		return []tuner.Action{a}
	case ds.allDeep && measured(ds.latency) && ds.alone() && lockable && lockKnown && !powerDown && (!locked || ours != (tuner.ClockRange{})) && clockDwell:
		maxMHz := maxHz / 1e6
		cur := maxMHz
		if ours.MaxMHz > 0 {
			cur = float64(ours.MaxMHz)
		}
		next := math.Round(cur - p.P.EnergyStep*maxMHz)
		if next < p.P.EnergyFloor*maxMHz-0.5 {
			return nil
		}
		want := tuner.ClockRange{MinMHz: uint32(next), MaxMHz: uint32(next)}
		return []tuner.Action{{Target: clockT, GPUIndex: d.Index, Current: ours, Want: want, Relax: true,
			Reason: fmt.Sprintf("every SLO on this GPU has deep slack (quantile latency under %.0f%% of target) and no batch work runs: lock the SM clock at %s (%.0f%% of its maximum) for energy",
				100*p.P.DeepSlackRatio, want, 100*next/maxMHz)}}
	}
	if lockable && lockKnown {
		return nil
	}
	return p.power(s, d, ds)
}

// gone gives back, on a GPU whose last latency tenant left or lost its
// SLO, the energy lock and the lowered power limit the tuner set for it
// (whole: there is no SLO left to step by), once the knob has not
// changed for SlackDwell. A lock at the maximum clock, set against DVFS,
// is given back too: the tenant it was set for is gone.
func (p *Autotune) gone(s *tuner.State, d *gpu.Device) []tuner.Action {
	const why = "no latency tenant is left on this GPU (its last one lost its SLO, or has had no process on it for its SLO window): "
	clockT := tuner.Target{GPU: d.UUID, Knob: gpu.KnobLockedClocks}
	if orig, ok := s.Originals[clockT.String()].(tuner.ClockRange); ok && quiet(s, d.UUID, gpu.KnobLockedClocks, p.P.SlackDwell) {
		if c, ok := s.LastChange(clockT); ok && c.To != tuner.Value(orig) && s.Changeable(clockT) {
			return []tuner.Action{{Target: clockT, GPUIndex: d.Index, Current: c.To, Want: orig, Revert: true, Relax: true,
				Reason: why + "give the SM clock back (" + orig.String() + ")"}}
		}
	}
	powT := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPowerLimit}
	if orig, ok := s.Originals[powT.String()].(tuner.Watts); ok && powerLowered(s, d) && d.PowerLimitW != nil && quiet(s, d.UUID, gpu.KnobPowerLimit, p.P.SlackDwell) {
		return []tuner.Action{{Target: powT, GPUIndex: d.Index, Current: tuner.Watts(*d.PowerLimitW), Want: orig, Revert: true, Relax: true,
			Reason: why + "back to the original power limit"}}
	}
	return nil
}

// besideWhy says why no clock or power limit stays lowered for energy on
// a domain whose latency tenants are not alone.
func besideWhy(ds domainSignals) string {
	var m *member
	if len(ds.others) > 0 {
		m = ds.others[0]
	} else {
		m = ds.unjudged[0]
	}
	what := "batch or best-effort work"
	if m.class == gpu.ClassLatency {
		what = "a latency tenant whose latency is not measured"
	}
	return fmt.Sprintf("%s (%s) runs on this GPU, and no clock is lowered for energy beside %s", m.name, m.class, what)
}

// unknownLock is why a clock lock is held back where the readings do not
// say whether the clock is locked and the tuner keeps no original of it.
const unknownLock = "the SM clock's lock is not known (NVML from R535 reports no lock the exporter did not set): an operator's lock may be in force, which a lock would overwrite and its restore reset, so the clock is left alone (energy is saved through the power limit)"

// measured says whether every latency tenant's slack is known from
// requests (the fast window's and the SLO window's), not assumed from an
// idle window: the clock is lowered only on evidence.
func measured(ms []*member) bool {
	for _, m := range ms {
		if !m.hasBurn || !m.hasRatio {
			return false
		}
	}
	return true
}

// stepUpDue says whether an energy lock whose slack is lost may step up
// now: a minute after the last clock change when the fast window's burn
// shows the loss, otherwise only once the SLO window has turned over
// since that change (until then its quantiles still show the latency of
// the step before).
func (p *Autotune) stepUpDue(s *tuner.State, d *gpu.Device, ds domainSignals) bool {
	window := time.Duration(0)
	for _, m := range ds.latency {
		if m.hasBurn && m.burn > p.P.SlackBurn {
			return quiet(s, d.UUID, gpu.KnobLockedClocks, time.Minute)
		}
		window = max(window, m.slo.Window)
	}
	return quiet(s, d.UUID, gpu.KnobLockedClocks, max(window, time.Minute))
}

// power lowers the power limit for energy on a GPU whose clock cannot be
// set, while every SLO has deep slack, measured (not an idle window), and
// no batch work runs, and restores it on a violation: a revert, as the
// clock's, which the guards let through and whose lower limit is held.
// A limit given back already is not given back again where the readings'
// limit (the limit enforced) stays below it: another limiter (a BMC's or
// DCGM's cap) holds the GPU there, not the tuner.
func (p *Autotune) power(s *tuner.State, d *gpu.Device, ds domainSignals) []tuner.Action {
	powT := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPowerLimit}
	orig, changed := s.Originals[powT.String()].(tuner.Watts)
	switch {
	case ds.anyViolating && powerLowered(s, d) && d.PowerLimitW != nil:
		return []tuner.Action{{Target: powT, GPUIndex: d.Index, Current: tuner.Watts(*d.PowerLimitW), Want: orig, Revert: true, HoldLeft: true,
			Reason: ds.worst.name + " violates its SLO: back to the original power limit"}}
	case !ds.alone() && powerLowered(s, d) && d.PowerLimitW != nil:
		return []tuner.Action{{Target: powT, GPUIndex: d.Index, Current: tuner.Watts(*d.PowerLimitW), Want: orig, Revert: true,
			Reason: besideWhy(ds) + ": back to the original power limit"}}
	case ds.allDeep && measured(ds.latency) && ds.alone() && !changed && d.PowerLimitW != nil && *d.PowerLimitW > 0 && s.Changeable(powT) &&
		quiet(s, d.UUID, gpu.KnobLockedClocks, p.P.SlackDwell) && quiet(s, d.UUID, gpu.KnobPowerLimit, p.P.SlackDwell):
		w := tuner.Watts(math.Round(*d.PowerLimitW * p.P.PowerFraction))
		return []tuner.Action{{Target: powT, GPUIndex: d.Index, Current: tuner.Watts(*d.PowerLimitW), Want: w, Relax: true,
			Reason: fmt.Sprintf("every SLO on this GPU has deep slack (quantile latency under %.0f%% of target) and no batch work runs: lower the power limit to %.0f%% for energy",
				100*p.P.DeepSlackRatio, 100*p.P.PowerFraction)}}
	}
	return nil
}

// powerLowered says whether a power limit the tuner lowered may be in
// force on d: its original kept and not given back (a revert to it), and
// the limit read, where it is read, below that original.
func powerLowered(s *tuner.State, d *gpu.Device) bool {
	powT := tuner.Target{GPU: d.UUID, Knob: gpu.KnobPowerLimit}
	orig, changed := s.Originals[powT.String()].(tuner.Watts)
	last, _ := s.LastChange(powT)
	givenBack := last.Revert && last.To == tuner.Value(orig)
	return changed && !givenBack && (d.PowerLimitW == nil || tuner.Watts(*d.PowerLimitW) < orig)
}

// variance is a tenant's p99/p50 over the SLO window (0 when unknown).
func variance(m *member) float64 {
	if m == nil || m.slo == nil {
		return 0
	}
	p50, ok1 := m.slo.Quantiles[0.5]
	p99, ok2 := m.slo.Quantiles[0.99]
	if !ok1 || !ok2 || p50 <= 0 {
		return 0
	}
	return p99 / p50
}
