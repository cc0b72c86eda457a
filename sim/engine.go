package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Engine constants. Each cites the FACTS.md line it comes from or says it
// is a lead (a modelling choice to calibrate).
const (
	stepNs = int64(time.Millisecond) // the fluid model never integrates over more than 1 ms

	// Context switch cost between time-sliced contexts. FACTS.md line 32-34:
	// two saturating tenants each get 0.459 of solo (8% lost), three get
	// 0.305; a switch costs 50-200 us; overhead grows to ~15% at 8 tenants.
	// With a 1024 us slice, switchBase gives 8% at two contexts, and each
	// further busy context adds switchPerCtx (15% at eight).
	switchBaseNs   = 89_000
	switchPerCtxNs = 15_300

	// minJobS is the shortest any job takes: a kernel launch and a
	// synchronisation (lead).
	minJobS = 10e-6

	// bwSaturation is the fraction of a domain's SMs a kernel needs to reach
	// its full HBM bandwidth; fewer SMs get proportionally less (lead).
	bwSaturation = 0.5

	// DVFS. FACTS.md line 15-16: idle 345 MHz, 1980 MHz under load; line
	// 60-61: +12% latency for a 22.9 ms kernel after 100 ms idle. A linear
	// ramp from idle to max over rampNs costs 0.41*rampNs of compute time,
	// which is 2.7 ms (12% of 22.9 ms) at rampNs = 6.5 ms. After the last
	// kernel the clock holds for holdNs, then decays to idle over decayNs,
	// reaching it after 100 ms of idleness (the split is a lead).
	rampNs  = 6_500_000
	holdNs  = 50_000_000
	decayNs = 50_000_000
	// Sustained load droop. FACTS.md line 62: back-to-back kernels on B200
	// dropped the SM clock 19%; here (lead) up to maxDroop as the GPU heats
	// from droopStartC to droopFullC.
	maxDroop    = 0.08
	droopStartC = 70.0
	droopFullC  = 85.0
	thermalTauS = 30.0
	ambientC    = 30.0
	cPerWatt    = 0.08
	// jitterAmp is the unlocked clock's random variation, redrawn every
	// jitterPeriodNs (lead); locked clocks have none.
	jitterAmp      = 0.02
	jitterPeriodNs = 10_000_000
)

// vGPU adaptive round robin parameters: 0 selects the default, and values
// outside [1, max] are refused, as NVML checks them against the GPU's
// nvmlVgpuSchedulerCapabilities_t. The driver's defaults and bounds are not
// published (lead).
const (
	arrDefaultAvgFactor = 1
	arrMaxAvgFactor     = 60
	arrDefaultFrequency = 1000 // Hz: the backlog is observed every 1 ms
	arrMaxFrequency     = 1000
)

// vgpuPolicies are the vGPU scheduler policies a scenario or
// SetVGPUScheduler may choose.
var vgpuPolicies = []gpu.VGPUPolicy{gpu.VGPUPolicyBestEffort, gpu.VGPUPolicyEqualShare, gpu.VGPUPolicyFixedShare}

// checkARR fills in the default average factor and frequency and, with
// ARR on (NVML checks them only then), checks them; it returns what is
// wrong or "".
func checkARR(v *VGPUSpec) string {
	if v.AvgFactor == 0 {
		v.AvgFactor = arrDefaultAvgFactor
	}
	if v.Frequency == 0 {
		v.Frequency = arrDefaultFrequency
	}
	if !v.ARR {
		return ""
	}
	if v.AvgFactor > arrMaxAvgFactor {
		return fmt.Sprintf("adaptive round robin average factor %d outside [1, %d]", v.AvgFactor, arrMaxAvgFactor)
	}
	if v.Frequency > arrMaxFrequency {
		return fmt.Sprintf("adaptive round robin frequency %d Hz outside [1, %d]", v.Frequency, arrMaxFrequency)
	}
	if v.Policy != gpu.VGPUPolicyBestEffort {
		return "adaptive round robin needs the best-effort policy"
	}
	return ""
}

// schedLogMax is how many vGPU scheduler log entries a sample reports (the
// newest), as NVML's log holds a bounded number of entries.
const schedLogMax = 200

// NVML clock event reasons (nvmlClocksEventReason*).
const (
	reasonIdle      = 0x1
	reasonAppClocks = 0x2
	reasonPowerCap  = 0x4
	reasonThermal   = 0x20
)

type schedKind int

const (
	schedTimeSlice schedKind = iota
	schedMPS
	schedVGPU
)

// domainTotals accumulates a domain's activity.
type domainTotals struct {
	busy    float64 // ns with any kernel resident
	sm      float64 // ns x fraction of the domain's SMs active
	occ     float64 // ns x fraction of warp slots occupied
	bytes   float64
	flops   float64
	switch_ float64 // ns spent switching contexts
}

func (a *domainTotals) add(b domainTotals) {
	a.busy += b.busy
	a.sm += b.sm
	a.occ += b.occ
	a.bytes += b.bytes
	a.flops += b.flops
	a.switch_ += b.switch_
}

// migInst is a MIG GPU instance.
type migInst struct {
	profile *migProfile
	uuid    string
	gi      int
	mps     bool // MPS inside the instance
}

// domain is a scheduling domain: a whole GPU, or one MIG instance.
type domain struct {
	g        *gpuState
	inst     int // MIG instance index, -1 for the whole GPU
	kind     schedKind
	smFrac   float64 // fraction of the device's SMs
	bwFrac   float64 // fraction of the device's HBM bandwidth
	memBytes uint64
	members  []*tenant

	// time-slice / vGPU state
	cur        int // index in members of the resident context; -1 none
	sliceEnd   int64
	switchEnd  int64
	slotStart  int64
	slotRun    int64
	slotTarget int64
	arrNext    int64 // vGPU ARR: when the scheduler next observes the VMs' backlogs

	acc  [2]domainTotals
	step domainTotals
}

// gpuState is a GPU's runtime state.
type gpuState struct {
	idx  int
	spec *GPUSpec
	m    *gpuModel
	uuid string
	bus  string
	mode gpu.SharingMode

	migs    []migInst
	migGen  int
	domains []*domain
	drainTo int64 // MIG reconfiguration: nothing runs before this
	lost    bool  // fallen off the bus: reads as down, nothing runs

	level gpu.TimeSliceLevel // compute time-slice level
	slice int64

	// clocks and power
	clock      float64 // MHz: the clock of the last step (its mean)
	clk        float64 // MHz: the clock at the end of the last step
	idleFor    int64   // ns since the last kernel
	lockMin    float64
	lockMax    float64
	memLock    float64
	powerLimit float64
	temp       float64
	power      float64
	energy     float64
	actPrev    float64 // activity of the previous step for the power model
	throttle   uint64

	ctxSwitches uint64
	switchNs    float64

	// vGPU scheduler
	vgpu     VGPUSpec
	schedLog []gpu.VGPUSchedulerLogEntry

	// MPS
	mpsDefault    float64
	pinnedDefault uint64

	acc    [2]deviceTotals
	events []gpu.Event
}

// deviceTotals accumulates device-level figures.
type deviceTotals struct {
	ns      float64
	sm      float64 // ns x fraction of the device's SMs active
	occ     float64
	bytes   float64
	flops   float64
	busy    float64 // ns with any kernel resident anywhere
	energy  float64 // J
	clockNs float64 // MHz x ns
}

func (g *gpuState) peakFLOPS() float64 { return g.m.PeakFLOPS * g.m.ComputeEff }

func (g *gpuState) peakBW() float64 {
	bw := g.m.BandwidthBS * g.m.BandwidthEff
	if g.memLock > 0 {
		bw *= g.memLock / g.m.MemClockMHz
	}
	return bw
}

func switchCost(busy int) int64 {
	return switchBaseNs + int64(max(busy, 2)-2)*switchPerCtxNs
}

// wants says whether t would run if scheduled now (no side effects).
func (t *tenant) wants(now int64) bool {
	if !t.alive || now < t.pause {
		return false
	}
	return t.job.active || t.queued() > 0 || t.w.Type == "training" || (t.w.Type == "llm" && len(t.seqs) > 0)
}

// boundary delivers arrivals up to now and returns the next time a member's
// state changes by itself (arrival, end of a pause), at most limit.
func (d *domain) boundary(now, limit int64) int64 {
	next := limit
	for _, m := range d.members {
		if !m.alive {
			continue
		}
		if m.nextArr <= now {
			m.arrive(now)
		}
		if m.nextArr < next {
			next = m.nextArr
		}
		if m.pause > now && m.pause < next {
			next = m.pause
		}
	}
	return next
}

// run advances the domain over [t0, t1) with the SM clock at clockFactor of
// its maximum.
func (d *domain) run(s *Simulator, t0, t1 int64, clockFactor float64) {
	d.step = domainTotals{}
	if t0 < d.g.drainTo {
		// MIG reconfiguration in progress: nothing runs.
		t0 = min(d.g.drainTo, t1)
	}
	switch d.kind {
	case schedMPS:
		d.runMPS(s, t0, t1, clockFactor)
	default:
		d.runSliced(s, t0, t1, clockFactor)
	}
	d.acc[0].add(d.step)
	d.acc[1].add(d.step)
}

// capacity returns the FLOP/s and bytes/s a kernel filling share of the
// domain's SMs gets when alone.
func (d *domain) capacity(share, clockFactor float64) (c, w float64) {
	c = d.g.peakFLOPS() * clockFactor * d.smFrac * share
	w = d.g.peakBW() * d.bwFrac * min(1, share/bwSaturation)
	return
}

func jobTime(j *job, c, w float64) float64 {
	jobSeconds := j.floor
	if j.flops > 0 {
		jobSeconds = max(jobSeconds, j.flops/c)
	}
	if j.bytes > 0 {
		jobSeconds = max(jobSeconds, j.bytes/w)
	}
	return max(jobSeconds, minJobS)
}

// progress moves t's job forward by dt ns, the whole job taking jobSeconds
// at SM share share, accounting it; it completes the job when done.
func (d *domain) progress(s *Simulator, t *tenant, dt int64, jobSeconds, share float64, done bool, end int64) {
	frac := float64(dt) / (jobSeconds * 1e9)
	if done || frac > t.job.rem {
		frac = t.job.rem
	}
	b := t.job.bytes * frac
	f := t.job.flops * frac
	fdt := float64(dt)
	for k := range t.acc {
		a := &t.acc[k]
		a.busy += fdt
		if b > 0 {
			a.memBusy += fdt
		}
		a.sm += fdt * share
		a.bytes += b
		a.flops += f
	}
	d.step.sm += fdt * share
	d.step.occ += fdt * share * t.w.Occupancy
	d.step.bytes += b
	d.step.flops += f
	t.job.rem -= frac
	if done {
		t.finishJob(s, end)
	}
}

// runSliced is time-slicing (and the vGPU scheduler): one context at a time
// owns the domain for a slice; switching costs switchCost.
func (d *domain) runSliced(s *Simulator, t, t1 int64, clockFactor float64) {
	n := len(d.members)
	g := d.g
	for t < t1 {
		next := d.boundary(t, t1)
		if d.switchEnd > t {
			e := min(next, d.switchEnd)
			d.step.switch_ += float64(e - t)
			d.step.busy += float64(e - t)
			t = e
			continue
		}
		busy := 0
		for _, m := range d.members {
			if m.wants(t) {
				busy++
			}
		}
		var cur *tenant
		if d.cur >= 0 && d.cur < n {
			cur = d.members[d.cur]
		}
		curWants := cur != nil && cur.wants(t)
		others := busy
		if curWants {
			others--
		}
		// Time-slicing and best-effort vGPU are work conserving: an idle
		// context yields at once. Equal- and fixed-share vGPU hold a VM's
		// slot for its whole length even when the VM is idle.
		strict := d.kind == schedVGPU && g.vgpu.Policy != gpu.VGPUPolicyBestEffort
		repick := !curWants || (others > 0 && t >= d.sliceEnd)
		if d.kind == schedVGPU && t >= d.sliceEnd {
			repick = true // a new slot (logged) even for a lone VM
		}
		if strict {
			repick = cur == nil || t >= d.sliceEnd
		}
		if repick {
			nx, slot := d.pick(t)
			if nx < 0 {
				t = next
				continue
			}
			if d.kind == schedVGPU {
				d.logSlot(s, t)
				d.slotStart, d.slotTarget, d.slotRun = t, slot, 0
			}
			if nx != d.cur {
				d.cur = nx
				d.switchEnd = t + switchCost(busy)
				d.sliceEnd = d.switchEnd + slot
				g.ctxSwitches++
				continue
			}
			d.sliceEnd = t + slot
		}
		cur = d.members[d.cur]
		end := next
		if (others > 0 || d.kind == schedVGPU) && d.sliceEnd < end {
			end = d.sliceEnd
		}
		if !cur.wants(t) {
			t = end // an idle VM's slot
			continue
		}
		if !cur.job.active && !cur.startJob(t) {
			t = end
			continue
		}
		share := cur.w.SMFraction
		c, w := d.capacity(share, clockFactor)
		jobSeconds := jobTime(&cur.job, c, w)
		ttc := int64(math.Ceil(cur.job.rem * jobSeconds * 1e9))
		done := false
		if t+ttc <= end {
			end, done = t+ttc, true
		}
		dt := end - t
		d.step.busy += float64(dt)
		d.slotRun += dt
		if d.kind == schedVGPU {
			for i, m := range d.members {
				if i != d.cur && m.wants(t) {
					m.preempt += dt
				}
			}
		}
		d.progress(s, cur, dt, jobSeconds, share, done, end)
		t = end
	}
}

// pick chooses the next context round robin after the resident one and
// the length of its slot; -1 when nothing wants to run.
func (d *domain) pick(t int64) (int, int64) {
	n := len(d.members)
	g := d.g
	if d.kind != schedVGPU {
		for k := 1; k <= n; k++ {
			i := (d.cur + k + n) % n
			if d.cur < 0 {
				i = k - 1
			}
			if d.members[i].wants(t) {
				return i, g.slice
			}
		}
		return -1, 0
	}
	v := &g.vgpu
	if v.Policy == gpu.VGPUPolicyBestEffort && v.ARR && t >= d.arrNext {
		// Adaptive round robin observes the VMs' backlogs at its frequency;
		// between observations the slices follow the last one.
		for _, m := range d.members {
			m.arrBacklog = m.queued()
		}
		d.arrNext = t + int64(1e9/float64(v.Frequency))
	}
	any := false
	for _, m := range d.members {
		if m.wants(t) {
			any = true
		}
	}
	if !any {
		return -1, 0
	}
	for k := 1; k <= n; k++ {
		i := (d.cur + k + n) % n
		if d.cur < 0 {
			i = k - 1
		}
		m := d.members[i]
		slot := int64(v.TimeSlice)
		switch v.Policy {
		case gpu.VGPUPolicyBestEffort:
			if !m.wants(t) {
				continue
			}
			if v.ARR {
				// Adaptive round robin: a VM that keeps a backlog gets a
				// longer slice, within [min, max].
				f := 1 + float64(m.arrBacklog)/float64(v.AvgFactor)
				slot = int64(float64(slot) * f)
			}
		case gpu.VGPUPolicyEqualShare:
			if !m.alive {
				continue
			}
		case gpu.VGPUPolicyFixedShare:
			slot = int64(v.TimeSlice) * int64(m.spec.VM.Weight)
		}
		// Slices stay within [min, max]; only fixed share's weighted slots
		// (weight x time slice) may go beyond max, weight times at most.
		hi := int64(v.MaxTimeSlice)
		if v.Policy == gpu.VGPUPolicyFixedShare {
			hi *= int64(max(1, m.spec.VM.Weight))
		}
		slot = min(max(slot, int64(v.MinTimeSlice)), hi)
		return i, slot
	}
	return -1, 0
}

// logSlot appends the finished slot to the vGPU scheduler log.
func (d *domain) logSlot(s *Simulator, t int64) {
	if d.slotTarget == 0 || d.cur < 0 || d.cur >= len(d.members) {
		return
	}
	m := d.members[d.cur]
	g := d.g
	if len(g.schedLog) >= 2*schedLogMax {
		// keep the newest entries; compacting in bulk keeps this amortized O(1)
		n := copy(g.schedLog, g.schedLog[len(g.schedLog)-schedLogMax+1:])
		g.schedLog = g.schedLog[:n]
	}
	g.schedLog = append(g.schedLog, gpu.VGPUSchedulerLogEntry{
		Timestamp:        s.at(d.slotStart),
		RunTime:          time.Duration(d.slotRun),
		TargetTimeSlice:  time.Duration(d.slotTarget),
		CumulativePreemp: time.Duration(m.preempt),
		Weight:           m.spec.VM.Weight,
	})
}

// runMPS runs every client concurrently, each capped at its active-thread
// fraction; SM oversubscription and HBM bandwidth are shared in proportion
// to demand.
func (d *domain) runMPS(s *Simulator, t, t1 int64, clockFactor float64) {
	for t < t1 {
		end := d.boundary(t, t1)
		capSum := 0.0
		nact := 0
		for _, m := range d.members {
			m.jobSeconds = 0
			if !m.wants(t) || (!m.job.active && !m.startJob(t)) {
				continue
			}
			nact++
			m.share = min(m.w.SMFraction, m.mpsEff)
			capSum += m.share
		}
		if nact == 0 {
			t = end
			continue
		}
		scale := 1.0
		if capSum > 1 {
			scale = 1 / capSum
		}
		demand := 0.0
		for _, m := range d.members {
			if !m.job.active || !m.wants(t) {
				continue
			}
			m.share *= scale
			c, w := d.capacity(m.share, clockFactor)
			m.jobSeconds = jobTime(&m.job, c, w)
			m.bw = m.job.bytes / m.jobSeconds
			demand += m.bw
		}
		if peak := d.g.peakBW() * d.bwFrac; demand > peak {
			for _, m := range d.members {
				if m.jobSeconds == 0 {
					continue
				}
				c, _ := d.capacity(m.share, clockFactor)
				m.jobSeconds = jobTime(&m.job, c, peak*m.bw/demand)
			}
		}
		for _, m := range d.members {
			if m.jobSeconds == 0 {
				continue
			}
			if e := t + int64(math.Ceil(m.job.rem*m.jobSeconds*1e9)); e < end {
				end = e
			}
		}
		dt := end - t
		d.step.busy += float64(dt)
		for _, m := range d.members {
			if m.jobSeconds == 0 {
				continue
			}
			done := t+int64(math.Ceil(m.job.rem*m.jobSeconds*1e9)) <= end
			d.progress(s, m, dt, m.jobSeconds, m.share, done, end)
		}
		t = end
	}
}

// step runs the GPU over [t0, t1).
func (g *gpuState) step(s *Simulator, t0, t1 int64) {
	g.updateClock(s, t0, t1-t0, g.demand(t0))
	clockFactor := g.clock / g.m.MaxClockMHz
	var devSM, devOcc, bytes, flops, busy float64
	for _, d := range g.domains {
		d.run(s, t0, t1, clockFactor)
		devSM += d.step.sm * d.smFrac
		devOcc += d.step.occ * d.smFrac
		bytes += d.step.bytes
		flops += d.step.flops
		busy = max(busy, d.step.busy)
		g.switchNs += d.step.switch_
	}
	dt := float64(t1 - t0)
	if busy > 0 {
		g.idleFor = 0
	}
	smA := devSM / dt
	dram := bytes / (g.m.BandwidthBS * dt / 1e9)
	tensor := flops / (g.m.PeakFLOPS * dt / 1e9)
	g.actPrev = 0.35*smA + 0.45*tensor + 0.2*dram
	g.power = g.powerAt(g.clock, g.actPrev)
	g.energy += g.power * dt / 1e9
	g.heat(dt)
	for k := range g.acc {
		a := &g.acc[k]
		a.ns += dt
		a.sm += devSM
		a.occ += devOcc
		a.bytes += bytes
		a.flops += flops
		a.busy += busy
		a.energy += g.power * dt / 1e9
		a.clockNs += g.clock * dt
	}
}

// demand says whether anything on g can run at t (the DVFS governor sees
// work queued).
func (g *gpuState) demand(t int64) bool {
	for _, d := range g.domains {
		if d.switchEnd > t {
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
	if g.lockMax == 0 {
		g.decay(dt)
	} else {
		g.clk = g.lockMin
	}
	g.clock = g.clk
	g.actPrev = 0
	g.power = g.powerAt(g.clock, 0)
	g.throttle = reasonIdle
	fdt := float64(dt)
	g.energy += g.power * fdt / 1e9
	g.heat(fdt)
	for k := range g.acc {
		a := &g.acc[k]
		a.ns += fdt
		a.energy += g.power * fdt / 1e9
		a.clockNs += g.clock * fdt
	}
}

// powerAt is the board power at clock f (MHz) and activity act (a weighted
// mix of SM, tensor and DRAM activity): idle power, clock-dependent static
// power and dynamic power growing with the cube of the clock (lead).
func (g *gpuState) powerAt(f, act float64) float64 {
	x := f / g.m.MaxClockMHz
	static := g.m.IdleW * (1 + 0.3*(f-g.m.IdleClockMHz)/(g.m.MaxClockMHz-g.m.IdleClockMHz))
	return static + (g.m.TDPW-1.3*g.m.IdleW)*act*x*x*x
}

func (g *gpuState) heat(dtNs float64) {
	ss := ambientC + cPerWatt*g.power
	x := dtNs / 1e9 / thermalTauS
	f := x - x*x/2 // 1 - exp(-x) for the 1 ms steps
	if x > 1e-3 {
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

// updateClock sets the SM clock for a step of dt ns starting at t.
func (g *gpuState) updateClock(s *Simulator, t, dt int64, busy bool) {
	m := g.m
	g.throttle = 0
	target := m.MaxClockMHz
	if g.lockMax > 0 {
		target = g.lockMax
		g.throttle |= reasonAppClocks
	} else {
		if g.temp > droopStartC {
			target *= 1 - maxDroop*min(1, (g.temp-droopStartC)/(droopFullC-droopStartC))
			g.throttle |= reasonThermal
		}
		target *= 1 + jitterAmp*s.jitter(g.idx, t/jitterPeriodNs)
		target = min(target, m.MaxClockMHz)
	}
	// power cap (the previous step's activity is the estimate)
	if g.actPrev > 0 {
		lim := g.limit()
		base := g.powerAt(target, 0)
		if g.powerAt(target, g.actPrev) > lim {
			x := math.Cbrt(math.Max(lim-base, 1) / ((m.TDPW - 1.3*m.IdleW) * g.actPrev))
			target = max(m.IdleClockMHz, min(target, x*m.MaxClockMHz))
			g.throttle |= reasonPowerCap
		}
	}
	if g.lockMax > 0 {
		// locked clocks: no ramp (FACTS.md line 60-61)
		g.clock = g.lockMin
		if busy {
			g.clock = target
		}
		g.clk = g.clock
		return
	}
	if busy {
		g.idleFor = 0
		from := g.clk
		g.clk = min(target, g.clk+float64(dt)*(m.MaxClockMHz-m.IdleClockMHz)/rampNs)
		// the step runs at the mean of a linear ramp
		g.clock = (from + g.clk) / 2
		if from >= target {
			g.clock = target
		}
	} else {
		g.decay(dt)
		g.clock = g.clk
		g.throttle |= reasonIdle
	}
}

// decay lowers the clock of a GPU idle for another dt ns.
func (g *gpuState) decay(dt int64) {
	from := max(g.idleFor, holdNs)
	g.idleFor += dt
	if g.idleFor > from {
		g.clk = max(g.m.IdleClockMHz, g.clk-float64(g.idleFor-from)*(g.m.MaxClockMHz-g.m.IdleClockMHz)/decayNs)
	}
}
