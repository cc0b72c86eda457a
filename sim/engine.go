package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Engine constants. Each names its section of docs/calibration.md, which
// gives the source of the figure or says it is a lead (a modelling choice
// to calibrate).
const (
	stepNs = int64(time.Millisecond) // the fluid model never integrates over more than 1 ms

	// Context switch cost between time-sliced contexts (calibration.md,
	// time-slicing): two saturating tenants each get 0.459 of solo (8%
	// lost), three get 0.305; a switch costs 50-200 us; overhead grows to
	// ~15% at 8 tenants. With a 1024 us slice, switchBase gives 8% at two
	// contexts, and each further busy context adds switchPerCtx (15% at
	// eight).
	switchBaseNs   = 89_000
	switchPerCtxNs = 15_300

	// minJobS is the shortest any job takes: a kernel launch and a
	// synchronisation (lead).
	minJobS = 10e-6

	// bwKneeSMs is the fraction of the device's SMs whose outstanding
	// memory requests fill the HBM: by Little's law a kernel on fewer SMs
	// gets bandwidth in proportion to its SMs, each SM sustaining
	// 1/bwKneeSMs of its equal share of the peak (calibration.md,
	// bandwidth knee; a lead that test/device/mps measures).
	bwKneeSMs = 0.5

	// MPS memory contention (calibration.md, MPS): co-located clients whose
	// bandwidth demand reaches the peak lose mpsContention x c of it, where
	// c is the demand of all but the largest client over the total, capped
	// at mpsContentionCap; two equal bandwidth-bound clients then run at
	// 0.70 of what time-slicing gives them (about -30%).
	mpsContention    = 0.72
	mpsContentionCap = 0.5
	// mpsTailSigma widens a client's service-time noise with the
	// bandwidth its neighbours pull (fraction of the peak): sigma =
	// service_noise + mpsTailSigma x that fraction (calibration.md, MPS
	// tail; lead within LithOS' "up to 13x").
	mpsTailSigma = 0.5

	// DVFS (calibration.md, clocks): idle 345 MHz, 1980 MHz under load;
	// +12% latency for a 22.9 ms kernel after 100 ms idle. A linear ramp
	// from idle to max over rampNs costs 0.41*rampNs of compute time,
	// which is 2.7 ms (12% of 22.9 ms) at rampNs = 6.5 ms. After the last
	// kernel the clock holds for holdNs, then decays to idle over decayNs,
	// reaching it after 100 ms of idleness (the split is a lead).
	rampNs  = 6_500_000
	holdNs  = 50_000_000
	decayNs = 50_000_000
	// Sustained load droop (calibration.md, clocks: back-to-back kernels
	// on B200 dropped the SM clock 19%); here (lead) up to maxDroop as the
	// GPU heats from droopStartC to droopFullC, locked or not.
	maxDroop    = 0.08
	droopStartC = 70.0
	droopFullC  = 85.0
	thermalTauS = 30.0
	ambientC    = 30.0
	cPerWatt    = 0.08
	// jitterAmp is the unlocked clock's random variation, redrawn every
	// jitterPeriodNs (lead); locked clocks have none. The period is also
	// the longest step of a busy GPU (steadyUntil), over which the power
	// limit's activity estimate stands: a shorter one costs simulation
	// speed.
	jitterAmp      = 0.02
	jitterPeriodNs = 50_000_000
	// Power model weights (lead): SM and tensor activity scale with the
	// cube of the SM clock, HBM activity with the memory clock only.
	powSM, powTensor, powDRAM = 0.35, 0.45, 0.2
)

// Actuation and workload defaults (calibration.md, actuation and
// workloads).
const (
	defaultStartTime          = 5 * time.Second  // lead: process, CUDA context and server start
	defaultLoadBandwidth      = 2e9              // bytes/s, lead: model load from local storage
	defaultDrainTimeout       = 30 * time.Second // Kubernetes terminationGracePeriodSeconds default
	defaultTimeout            = 60 * time.Second // NGINX proxy_read_timeout default
	defaultCheckpointInterval = 10 * time.Minute // lead
	defaultIterationOverhead  = 3 * time.Millisecond
	defaultSeqOverhead        = 50 * time.Microsecond
	defaultServiceNoise       = 0.05 // lead: sigma of log service time, alone
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

// workTotals is what ran over an interval: ns with a kernel resident (busy),
// ns x the fraction of the SMs active (of the domain's SMs for a tenant or
// a domain, of the device's for a device), HBM bytes moved and FLOPs.
type workTotals struct {
	busy, sm, bytes, flops float64
}

func (a *workTotals) add(b workTotals) {
	a.busy += b.busy
	a.sm += b.sm
	a.bytes += b.bytes
	a.flops += b.flops
}

// domainTotals accumulates a domain's activity.
type domainTotals struct {
	workTotals
	occ     float64 // ns x fraction of warp slots occupied
	switch_ float64 // ns spent switching contexts
}

func (a *domainTotals) add(b domainTotals) {
	a.workTotals.add(b.workTotals)
	a.occ += b.occ
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
	g *gpuState
	// busyEnd is when the domain was last busy in the current step (0:
	// not at all): the GPU's idle time, for the clock's hold and decay,
	// starts there.
	busyEnd  int64
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
	slotRun    int64
	slotTarget int64
	arrNext    int64 // vGPU ARR: when the scheduler next observes the VMs' backlogs

	// set by boundary: what it returned (when a member's state next
	// changes by itself), the members that want to run, and the last time
	// no waiting request expires. Until due and up to expiry only the
	// running contexts change, by their own jobs: the domain does not call
	// boundary again, from one step to the next too, unless something
	// from outside the run (an event, a control call) may have changed a
	// member (Simulator.recheck).
	due     int64
	wanting int
	expiry  int64

	acc     [2]domainTotals // 0: since the previous Sample, 1: since the previous Window
	pending domainTotals    // since the last flush (see Simulator.flush)
	step    domainTotals
	act     []*tenant // MPS: the clients running in the current segment
	// MPS: the previous segment's clients and what their allocation
	// depended on (mpsCached)
	mpsPrev []mpsClient
	mpsKey  mpsKey
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
	// activity of the previous step for the power model: SM and tensor
	// (scales with the SM clock) and HBM (does not)
	actC, actM float64
	throttle   uint64

	ctxSwitches uint64
	switchNs    float64

	// vGPU scheduler
	vgpu     VGPUSpec
	schedLog []gpu.VGPUSchedulerLogEntry

	// MPS
	mpsDefault    float64
	pinnedDefault uint64

	acc     [2]deviceTotals // 0: since the previous Sample, 1: since the previous Window
	pending deviceTotals    // since the last flush (see Simulator.flush)
	events  []gpu.Event
}

// deviceTotals accumulates device-level figures (busy: ns with a kernel
// resident anywhere).
type deviceTotals struct {
	workTotals
	ns      float64
	occ     float64 // ns x fraction of the device's warp slots occupied
	energy  float64 // J
	clockNs float64 // MHz x ns
}

func (a *deviceTotals) add(b deviceTotals) {
	a.workTotals.add(b.workTotals)
	a.ns += b.ns
	a.occ += b.occ
	a.energy += b.energy
	a.clockNs += b.clockNs
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
	if t.duty > 0 && !t.job.active && t.frozenTill(now) > 0 {
		return false // paused, its queued work done
	}
	if t.draining {
		return t.job.active || len(t.seqs) > 0
	}
	// only an LLM has running sequences
	return t.job.active || t.queued() > 0 || t.training || len(t.seqs) > 0
}

// boundary delivers arrivals up to now, completes actions that are due
// (a standby's switch-over, a drain's timeout), expires waiting requests
// nobody will serve in time, sets each member's want (wants(now)) and
// d.wanting (how many want to run) and returns the next time a member's
// state changes by itself (arrival, end of a pause, an action due), at
// most limit. It also sets d.expiry, the last time at which no waiting
// request is old enough to expire: before the time it returns and up to
// d.expiry, a boundary call would change nothing for a member that has not
// run since.
func (d *domain) boundary(s *Simulator, now int64) int64 {
	next := never
	d.expiry, d.wanting = never, 0
	for _, m := range d.members {
		m.want = false
		if !m.alive {
			if m.refusing {
				// stopped by a control call: its clients' requests fail
				if m.nextArr <= now {
					m.arrive(now)
					m.failQueued()
				}
				next = min(next, m.nextArr)
			}
			continue
		}
		if m.standby {
			if m.switchAt <= now {
				s.switchOver(m, now)
			} else {
				next = min(next, m.switchAt)
			}
		}
		if m.w.Timeout > 0 && m.queued() > 0 && !m.job.active && m.queue[m.qhead].arrival < now-int64(m.w.Timeout) {
			m.expire(now) // requests nobody will serve in time
		}
		if m.draining {
			if m.drainEnd <= now {
				s.checkDrain(m, now)
			} else {
				next = min(next, m.drainEnd)
			}
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
		if f := m.frozenTill(now); f > 0 && f < next {
			next = f // the end of a paused phase
		}
		if m.w.Timeout > 0 && m.queued() > 0 {
			d.expiry = min(d.expiry, m.queue[m.qhead].arrival+int64(m.w.Timeout))
		}
		if m.want = m.wants(now); m.want {
			d.wanting++
		}
	}
	return next
}

// run advances the domain over [t0, t1) with the SM clock at clockFactor of
// its maximum.
func (d *domain) run(s *Simulator, t0, t1 int64, clockFactor float64) {
	d.step, d.busyEnd = domainTotals{}, 0
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
	d.pending.add(d.step)
}

// busyOver counts [t0, t1) of the step as busy (running or switching).
func (d *domain) busyOver(t0, t1 int64) {
	d.step.busy += float64(t1 - t0)
	d.busyEnd = t1
}

// capacity returns the FLOP/s and bytes/s a kernel filling share of the
// domain's SMs gets when alone: bandwidth grows with the SMs up to the
// knee (bwKneeSMs of the device's SMs) and is capped by the domain's
// memory slices.
func (d *domain) capacity(share, clockFactor float64) (c, w float64) {
	c = d.g.peakFLOPS() * clockFactor * d.smFrac * share
	w = d.g.peakBW() * min(d.bwFrac, d.smFrac*share/bwKneeSMs)
	return
}

// jobTime is the time of j (s) at compute rate c and bandwidth w: its
// roofline time times the noise multiplier mult, at least its floor.
func jobTime(j *job, c, w, mult float64) float64 {
	// (plain comparisons: every figure is positive, and the built-in
	// max's care for NaN and signed zeros costs on this path)
	jobSeconds := 0.0
	if j.flops > 0 {
		jobSeconds = j.flops / c
	}
	if b := j.bytes / w; j.bytes > 0 && b > jobSeconds {
		jobSeconds = b
	}
	jobSeconds *= mult
	if jobSeconds < j.floor {
		jobSeconds = j.floor
	}
	if jobSeconds < minJobS {
		jobSeconds = minJobS
	}
	return jobSeconds
}

// noise is the job's lognormal service-time multiplier at spread sigma
// (mean 1): the job's standard normal draw is fixed, so the multiplier
// changes only with sigma. The previous spread's multiplier is kept too:
// an MPS client's spread goes back and forth as a neighbour (an LLM
// between its host and GPU phases) leaves and rejoins.
func (j *job) noise(sigma float64) float64 {
	if sigma != j.sigma {
		if sigma == j.prevSigma {
			j.sigma, j.prevSigma = j.prevSigma, j.sigma
			j.mult, j.prevMult = j.prevMult, j.mult
		} else {
			j.prevSigma, j.prevMult = j.sigma, j.mult
			j.sigma = sigma
			j.mult = math.Exp(sigma*j.z - sigma*sigma/2)
		}
	}
	return j.mult
}

// progress moves t's job forward by dt ns, the whole job taking jobSeconds
// at SM share share, accounting it; it completes the job when done.
func (d *domain) progress(s *Simulator, t *tenant, dt int64, jobSeconds, share float64, done bool, end int64) {
	frac := t.job.rem
	if !done {
		frac = min(frac, float64(dt)/(jobSeconds*1e9))
	}
	b := t.job.bytes * frac
	f := t.job.flops * frac
	fdt := float64(dt)
	a := &t.pending
	a.busy += fdt
	if b > 0 {
		a.memBusy += fdt
	}
	a.sm += fdt * share
	a.bytes += b
	a.flops += f
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
	g := d.g
	// Time-slicing and best-effort vGPU are work conserving: an idle
	// context yields at once. Equal- and fixed-share vGPU hold a VM's
	// slot for its whole length even when the VM is idle.
	vgpu := d.kind == schedVGPU
	strict := vgpu && g.vgpu.Policy != gpu.VGPUPolicyBestEffort
	for t < t1 {
		if t >= d.due || t > d.expiry {
			d.due = d.boundary(s, t)
		} else if d.cur >= 0 {
			// only the resident context can have changed (d.due)
			d.rewant(d.members[d.cur], t)
			if f := d.members[d.cur].frozenTill(t); f > 0 {
				d.due = min(d.due, f) // paused once its job ended
			}
		}
		next := min(d.due, t1)
		if d.switchEnd > t {
			e := min(next, d.switchEnd)
			d.step.switch_ += float64(e - t)
			d.busyOver(t, e)
			t = e
			continue
		}
		// who wants to run at t (m.want: pick and the preemption count
		// below read it while nothing has changed)
		busy := d.wanting
		var cur *tenant
		curWants := false
		if d.cur >= 0 {
			cur = d.members[d.cur]
			curWants = cur.want
		}
		others := busy
		if curWants {
			others--
		}
		repick := !curWants || (others > 0 && t >= d.sliceEnd)
		if vgpu && t >= d.sliceEnd {
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
			if vgpu {
				d.logSlot(s, t)
				d.slotTarget, d.slotRun = slot, 0
			}
			if nx != d.cur {
				d.cur = nx
				d.switchEnd = t + switchCost(busy)
				d.sliceEnd = d.switchEnd + slot
				g.ctxSwitches++
				// the switch runs up to next at once (boundary at t
				// would give next again)
				e := min(next, d.switchEnd)
				d.step.switch_ += float64(e - t)
				d.busyOver(t, e)
				t = e
				if t >= next || t > d.expiry || t >= d.sliceEnd {
					continue
				}
				// Nothing changed during the switch: the new context
				// runs at once, as the next pass would have it.
				curWants = d.members[nx].want
				others = busy
				if curWants {
					others--
				}
			} else {
				d.sliceEnd = t + slot
			}
		}
		cur = d.members[d.cur]
		end := next
		if (others > 0 || vgpu) && d.sliceEnd < end {
			end = d.sliceEnd
		}
		if !cur.want {
			t = end // an idle VM's slot
			continue
		}
		if !cur.job.active && !cur.startJob(t) {
			if f := cur.frozenTill(t); f > 0 {
				// paused: the context yields like an idle one
				d.due = min(d.due, f)
				d.rewant(cur, t)
				continue
			}
			t = end
			continue
		}
		if cur.pause > t {
			d.due = min(d.due, cur.pause) // as boundary would see it
		}
		if !cur.wants(t) {
			// the job's host phase (LLM iteration overhead), which
			// boundary did not see yet: the context yields like an idle
			// one (d.due wakes it when the phase ends); a strict vGPU
			// slot stays its VM's
			d.rewant(cur, t)
			continue
		}
		share := cur.w.SMFraction
		jobSeconds := d.slicedJobTime(cur, share, clockFactor)
		ttc := int64(math.Ceil(cur.job.rem * jobSeconds * 1e9))
		done := false
		if t+ttc <= end {
			end, done = t+ttc, true
		}
		dt := end - t
		d.busyOver(t, end)
		d.slotRun += dt
		if vgpu {
			for i, m := range d.members {
				if i != d.cur && m.want {
					m.preempt += dt
				}
			}
		}
		if cur.draining {
			d.due = end // its drain may end with the job: look at everything again
		}
		d.progress(s, cur, dt, jobSeconds, share, done, end)
		t = end
	}
}

// rewant refreshes m's want at t after its own job changed its state,
// keeping d.wanting up to date.
func (d *domain) rewant(m *tenant, t int64) {
	if w := m.wants(t); w != m.want {
		m.want = w
		if w {
			d.wanting++
		} else {
			d.wanting--
		}
	}
}

// slicedJobTime is the time (s) of t's job running alone on share of the
// domain's SMs, kept with what it depends on (the domain, the job, the
// share, the SM clock and the memory clock) so that the job's later
// segments reuse it.
func (d *domain) slicedJobTime(t *tenant, share, clockFactor float64) float64 {
	c, memLock := &t.jt, d.g.memLock
	if c.d != d || c.seq != t.jobSeq || c.share != share || c.clockFactor != clockFactor || c.memLock != memLock {
		cp, w := d.capacity(share, clockFactor)
		c.d, c.seq, c.share, c.clockFactor, c.memLock = d, t.jobSeq, share, clockFactor, memLock
		c.seconds = jobTime(&t.job, cp, w, t.job.noise(*t.w.ServiceNoise))
	}
	return c.seconds
}

// pick chooses the next context round robin after the resident one and
// the length of its slot; -1 when nothing wants to run.
func (d *domain) pick(t int64) (int, int64) {
	// m.want is each member's wants(t), set by runSliced
	n := len(d.members)
	g := d.g
	if d.kind != schedVGPU {
		for k := 1; k <= n; k++ {
			if i := d.after(k); d.members[i].want {
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
	if d.wanting == 0 {
		return -1, 0
	}
	for k := 1; k <= n; k++ {
		i := d.after(k)
		m := d.members[i]
		slot := int64(v.TimeSlice)
		switch v.Policy {
		case gpu.VGPUPolicyBestEffort:
			if !m.want {
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

// after is the index of the k-th member (1 <= k <= len(members)) after
// the resident one, round robin; from the first when none is resident.
func (d *domain) after(k int) int {
	if d.cur < 0 {
		return k - 1
	}
	i := d.cur + k
	if i >= len(d.members) {
		i -= len(d.members)
	}
	return i
}

// logSlot appends the slot that ends at t to the vGPU scheduler log. As in
// NVML's log, the entry is stamped with the time the runlist was preempted
// and names it by a software runlist ID: the tenant's index in the
// scenario, one runlist per VM.
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
	m.runTotal += d.slotRun
	// filled in place (a composite literal is built aside and copied,
	// which costs at every slot)
	g.schedLog = append(g.schedLog, gpu.VGPUSchedulerLogEntry{})
	e := &g.schedLog[len(g.schedLog)-1]
	e.Timestamp = s.at(t)
	e.Runlist = uint32(m.idx)
	e.RunTime = time.Duration(d.slotRun)
	e.RunTimeTotal = time.Duration(m.runTotal)
	e.TargetTimeSlice = time.Duration(d.slotTarget)
	e.CumulativePreemp = time.Duration(m.preempt)
	e.Weight = m.spec.VM.Weight
}

// runMPS runs every client concurrently, each capped at its active-thread
// fraction. Oversubscribed SMs are shared by what each client's kernels
// occupy; HBM bandwidth in proportion to demand, less the contention loss
// of co-located bandwidth-bound clients (docs/calibration.md, MPS).
func (d *domain) runMPS(s *Simulator, t, t1 int64, clockFactor float64) {
	peak := d.g.peakBW() * d.bwFrac
	for t < t1 {
		if t >= d.due || t > d.expiry {
			d.due = d.boundary(s, t)
		}
		end := min(d.due, t1) // until d.due only the running clients change
		d.act = d.act[:0]
		for _, m := range d.members {
			if !m.wants(t) || (!m.job.active && !m.startJob(t)) {
				if f := m.frozenTill(t); f > 0 && m.alive {
					d.due, end = min(d.due, f), min(end, f) // paused until f
				}
				continue
			}
			if m.pause > t {
				d.due = min(d.due, m.pause) // as boundary would see it
			}
			if !m.wants(t) {
				// the job's host phase (LLM iteration overhead), which
				// boundary did not see yet
				end = min(end, max(m.pause, t+1))
				continue
			}
			d.act = append(d.act, m)
		}
		if len(d.act) == 0 {
			t = end
			continue
		}
		if !d.mpsCached(clockFactor, peak) {
			d.allocMPS(clockFactor, peak)
		}
		for _, m := range d.act {
			m.left = int64(math.Ceil(m.job.rem * m.jobSeconds * 1e9))
			end = min(end, t+m.left)
		}
		dt := end - t
		d.busyOver(t, end)
		for _, m := range d.act {
			done := t+m.left <= end
			if m.draining {
				d.due = end // its drain may end with the job: look at everything again
			}
			d.progress(s, m, dt, m.jobSeconds, m.share, done, end)
		}
		t = end
	}
}

// mpsClient is a running MPS client as its allocation saw it: its job
// (by sequence number) and its SM cap.
type mpsClient struct {
	t      *tenant
	jobSeq uint64
	cap    float64
}

// mpsKey is what an MPS allocation depends on besides the clients' jobs.
type mpsKey struct {
	clockFactor, peak float64
}

// mpsCached says whether the running clients' shares and job times of the
// previous segment hold for this one: the same clients with the same jobs
// and caps at the same clock and bandwidth. It records this segment's
// clients for the next.
func (d *domain) mpsCached(clockFactor, peak float64) bool {
	key := mpsKey{clockFactor, peak}
	same := key == d.mpsKey && len(d.act) == len(d.mpsPrev)
	for i, m := range d.act {
		p := mpsClient{m, m.jobSeq, min(m.w.SMFraction, m.mpsEff)}
		if same && p != d.mpsPrev[i] {
			same = false
		}
		if i < len(d.mpsPrev) {
			d.mpsPrev[i] = p
		} else {
			d.mpsPrev = append(d.mpsPrev, p)
		}
	}
	d.mpsPrev = d.mpsPrev[:len(d.act)]
	d.mpsKey = key
	return same
}

// allocMPS sets each running client's SM share, bandwidth and job time.
func (d *domain) allocMPS(clockFactor, peak float64) {
	capSum := 0.0
	for _, m := range d.act {
		m.share = min(m.w.SMFraction, m.mpsEff)
		capSum += m.share
	}
	if capSum > 1 {
		d.shareSMs()
	}
	demand, top := 0.0, 0.0
	for _, m := range d.act {
		m.capC, m.capW = d.capacity(m.share, clockFactor)
		m.bw = m.job.bytes / jobTime(&m.job, m.capC, m.capW, 1)
		demand += m.bw
		top = max(top, m.bw)
	}
	avail := peak
	if len(d.act) > 1 && demand > 0 {
		// contention: the more of the demand comes from clients other
		// than the largest, and the nearer the peak, the more is lost
		c := min(mpsContentionCap, (demand-top)/demand)
		avail = peak * (1 - mpsContention*c*min(1, demand/peak))
	}
	for _, m := range d.act {
		sigma := *m.w.ServiceNoise
		if len(d.act) > 1 {
			sigma += mpsTailSigma * min(1, (demand-m.bw)/peak)
		}
		w := m.capW
		if demand > avail {
			w = avail * m.bw / demand
		}
		m.jobSeconds = jobTime(&m.job, m.capC, w, m.job.noise(sigma))
	}
}

// shareSMs divides the domain's SMs among the running clients when their
// caps sum over 1: in proportion to what each client's kernels occupy (its
// SM cap times its occupancy), none beyond its cap; what a capped client
// leaves goes to the others.
func (d *domain) shareSMs() {
	left := 1.0
	for _, m := range d.act {
		m.fixed = false
	}
	for range d.act {
		wsum := 0.0
		for _, m := range d.act {
			if !m.fixed {
				wsum += m.share * m.w.Occupancy
			}
		}
		capped := false
		for _, m := range d.act {
			if !m.fixed && left*m.w.Occupancy >= wsum {
				m.fixed, capped = true, true
				left -= m.share
			}
		}
		if !capped {
			for _, m := range d.act {
				if !m.fixed {
					m.share = left * m.share * m.w.Occupancy / wsum
				}
			}
			return
		}
	}
}

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
