package sim

import (
	"math"
)

// clockPlan is a GPU's clock for the next step, worked out before the
// step's length is chosen.
type clockPlan struct {
	busy          bool
	target, floor float64
	throttle      uint64
	until         int64 // the step may reach this far (steadyUntil)
}

// plan works out g's clock for a step starting at t0; busy is g.busy(t0)
// (which implies demand).
func (g *gpuState) plan(s *Simulator, t0 int64, busy bool) clockPlan {
	p := clockPlan{busy: busy || g.demand(t0)}
	p.target, p.floor, p.throttle = g.clockTarget(s, t0)
	p.until = g.steadyUntil(t0, p.busy, p.target, p.floor, p.throttle)
	return p
}

// step runs the GPU over [t0, t1) with the clock plan p.
func (g *gpuState) step(s *Simulator, t0, t1 int64, p *clockPlan) {
	g.updateClock(t1-t0, p.busy, p.target, p.floor, p.throttle)
	clockFactor := g.clock / g.m.MaxClockMHz
	var devSM, devOcc, bytes, flops, busy float64
	var busyEnd int64
	for _, d := range g.domains {
		d.run(s, t0, t1, clockFactor)
		devSM += d.step.sm * d.smFrac
		devOcc += d.step.occ * d.smFrac
		bytes += d.step.bytes
		flops += d.step.flops
		busy = max(busy, d.step.busy)
		busyEnd = max(busyEnd, d.busyEnd)
		g.switchNs += d.step.switch_
	}
	dt := float64(t1 - t0)
	if busy > 0 {
		// the clock holds from the last work of the step on (a step that
		// planned for work may end idle)
		g.idleFor = t1 - busyEnd
	}
	smA := devSM / dt
	dram := bytes / (g.m.BandwidthBS * dt / 1e9)
	tensor := flops / (g.m.PeakFLOPS * dt / 1e9)
	g.actC = powSM*smA + powTensor*tensor
	g.actM = powDRAM * dram
	g.power = g.powerAt(g.clock, g.actC, g.actM)
	g.energy += g.power * dt / 1e9
	g.heat(dt)
	a := &g.pending
	a.ns += dt
	a.sm += devSM
	a.occ += devOcc
	a.bytes += bytes
	a.flops += flops
	a.busy += busy
	a.energy += g.power * dt / 1e9
	a.clockNs += g.clock * dt
}

// demand says whether anything on g can run at t (the DVFS governor sees
// work queued).
func (g *gpuState) demand(t int64) bool {
	for _, d := range g.domains {
		if d.switchEnd > t || d.warming() {
			return true
		}
		for _, m := range d.members {
			if m.wants(t) || (m.alive && m.nextArr <= t && t >= m.pause) {
				return true
			}
		}
	}
	return false
}

// idle advances an idle GPU by dt ns in one go (nothing runs anywhere).
func (g *gpuState) idle(dt int64) {
	if g.fixedLock() {
		g.clk = g.lockMin
	} else {
		g.decay(dt, g.floor())
	}
	g.clock = g.clk
	g.actC, g.actM = 0, 0
	g.power = g.powerAt(g.clock, 0, 0)
	g.throttle = reasonIdle
	fdt := float64(dt)
	g.energy += g.power * fdt / 1e9
	g.heat(fdt)
	a := &g.pending
	a.ns += fdt
	a.energy += g.power * fdt / 1e9
	a.clockNs += g.clock * fdt
}

// fixedLock says whether the SM clock is locked to one value (no DVFS);
// a range lock keeps DVFS inside the range.
func (g *gpuState) fixedLock() bool { return g.lockMax > 0 && g.lockMin == g.lockMax }

// floor is the lowest clock DVFS goes to: the lock's minimum, else idle.
func (g *gpuState) floor() float64 {
	if g.lockMax > 0 {
		return g.lockMin
	}
	return g.m.IdleClockMHz
}

// dynW is the dynamic power at full activity and maximum clocks.
func (g *gpuState) dynW() float64 { return g.m.TDPW - 1.3*g.m.IdleW }

// memFactor is the memory clock over its maximum (HBM power scales with it).
func (g *gpuState) memFactor() float64 {
	if g.memLock > 0 {
		return g.memLock / g.m.MemClockMHz
	}
	return 1
}

// powerAt is the board power at SM clock f (MHz) with SM and tensor
// activity actC and HBM activity actM (weighted, see powSM): idle power,
// clock-dependent static power, dynamic SM power growing with the cube of
// the SM clock and HBM power growing with the memory clock only (lead).
func (g *gpuState) powerAt(f, actC, actM float64) float64 {
	x := f / g.m.MaxClockMHz
	static := g.m.IdleW * (1 + 0.3*(f-g.m.IdleClockMHz)/(g.m.MaxClockMHz-g.m.IdleClockMHz))
	return static + g.dynW()*(actC*x*x*x+actM*g.memFactor())
}

func (g *gpuState) heat(dtNs float64) {
	ss := ambientC + cPerWatt*g.power
	x := dtNs / 1e9 / thermalTauS
	f := x - x*x/2 // 1 - exp(-x) for steps of up to 60 ms (error below 2e-9)
	if x > 2e-3 {
		f = 1 - math.Exp(-x)
	}
	g.temp += (ss - g.temp) * f
}

func (g *gpuState) limit() float64 {
	if g.powerLimit > 0 {
		return g.powerLimit
	}
	return g.m.TDPW
}

// clockTarget is the SM clock DVFS heads for at t (MHz), the lowest it
// goes to, and the throttle reasons: the thermal droop and the power limit
// apply with clocks locked too (docs/calibration.md, clocks).
func (g *gpuState) clockTarget(s *Simulator, t int64) (target, floor float64, throttle uint64) {
	m := g.m
	target, floor = m.MaxClockMHz, g.floor()
	locked := g.lockMax > 0
	if locked {
		target = g.lockMax
		throttle |= reasonAppClocks
	}
	if g.temp > droopStartC {
		target *= 1 - maxDroop*min(1, (g.temp-droopStartC)/(droopFullC-droopStartC))
		throttle |= reasonThermal
	}
	if !locked {
		target *= 1 + jitterAmp*s.jitter(g.idx, t/jitterPeriodNs)
		target = min(target, m.MaxClockMHz)
	}
	// power cap (the previous step's activity is the estimate)
	if g.actC > 0 {
		lim := g.limit()
		if g.powerAt(target, g.actC, g.actM) > lim {
			base := g.powerAt(target, 0, g.actM)
			x := math.Cbrt(math.Max(lim-base, 1) / (g.dynW() * g.actC))
			target = max(m.IdleClockMHz, min(target, x*m.MaxClockMHz))
			throttle |= reasonPowerCap
		}
	}
	return target, floor, throttle
}

// steadyUntil is how far past t0 a step of g may reach with the clock the
// same throughout: a busy GPU whose clock has reached its target, or
// reaches it within stepNs (the clock noise's small steps up), not held
// down by the power limit and with an activity estimate for it, keeps it to the end of the clock-noise period
// (the power-cap estimate, the droop and the idle detection then move in
// steps of up to jitterPeriodNs; updateClock gives such a step the
// time-weighted mean of its ramp and the rest). Otherwise a step is stepNs
// long, as a longer ramp, the decay and the power cap are integrated in
// 1 ms steps.
func (g *gpuState) steadyUntil(t0 int64, busy bool, target, floor float64, throttle uint64) int64 {
	if !busy || throttle&reasonPowerCap != 0 || g.actC == 0 {
		// (no activity estimate yet, as after idleness: the power cap
		// has nothing to go by until a short step gives one)
		return t0 + stepNs
	}
	if !g.fixedLock() && g.rampTime(max(g.clk, min(floor, target)), target) > float64(stepNs) {
		return t0 + stepNs // ramping up
	}
	return max((t0/jitterPeriodNs+1)*jitterPeriodNs, t0+stepNs)
}

// rampTime is how long (ns) the clock takes to ramp from `from` up to
// target.
func (g *gpuState) rampTime(from, target float64) float64 {
	if from >= target {
		return 0
	}
	return (target - from) * rampNs / (g.m.MaxClockMHz - g.m.IdleClockMHz)
}

// updateClock sets the SM clock for a step of dt ns starting at t, given
// clockTarget's figures: a range lock keeps DVFS (ramp and decay) inside
// the range.
func (g *gpuState) updateClock(dt int64, busy bool, target, floor float64, throttle uint64) {
	m := g.m
	g.throttle = throttle
	if g.fixedLock() {
		// one locked value: no ramp
		g.clock = min(g.lockMin, target)
		if busy {
			g.clock = target
		}
		g.clk = g.clock
		return
	}
	if busy {
		g.idleFor = 0
		from := max(g.clk, min(floor, target))
		fdt := float64(dt)
		switch r := g.rampTime(from, target); {
		case r == 0:
			g.clk, g.clock = target, target
		case r >= fdt:
			// the step runs at the mean of a linear ramp
			g.clk = from + fdt*(m.MaxClockMHz-m.IdleClockMHz)/rampNs
			g.clock = (from + g.clk) / 2
		default:
			// the ramp ends inside the step: its mean for r, then target
			g.clk = target
			g.clock = target - (target-from)*r/(2*fdt)
		}
	} else {
		g.decay(dt, floor)
		g.clock = g.clk
		g.throttle |= reasonIdle
	}
}

// decay lowers the clock of a GPU idle for another dt ns, down to floor.
func (g *gpuState) decay(dt int64, floor float64) {
	from := max(g.idleFor, holdNs)
	g.idleFor += dt
	if g.idleFor > from {
		g.clk -= float64(g.idleFor-from) * (g.m.MaxClockMHz - g.m.IdleClockMHz) / decayNs
	}
	g.clk = max(g.clk, floor)
}
