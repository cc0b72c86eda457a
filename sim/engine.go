package sim

import (
	"fmt"
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
	// maxJobS is the longest any job takes (about 3 years): a job that
	// would take longer (a tiny sm_fraction, a huge KV cache) never ends
	// in a run, and its time in nanoseconds stays in int64's range.
	maxJobS = 1e8

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
	// The temperature settles at ambientC + cPerWatt x power (guesses,
	// docs/calibration.md, clocks and power: 86 °C at 700 W, the droop
	// from 500 W).
	ambientC = 30.0
	cPerWatt = 0.08
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
	act     []int32 // MPS: the clients running in the current segment (indices in members)
	// MPS: the previous segment's clients and what their allocation
	// depended on (runMPS)
	mpsPrev []mpsClient
	mpsKey  mpsKey
	// warm is the share of the SMs warming standbys keep busy (rewarm),
	// warmOcc their warp occupancy, and warmOn the share they keep busy
	// beside the running clients (yieldToWarmup)
	warm, warmOcc, warmOn float64
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
// d.wanting (how many want to run), except in an MPS domain (there every
// want stays false and d.wanting 0: runMPS reads neither), and returns the
// next time a member's state changes by itself (arrival, end of a pause,
// an action due). It also sets d.expiry, the last time at which no waiting
// request is old enough to expire: before the time it returns and up to
// d.expiry, a boundary call would change nothing for a member that has not
// run since.
func (d *domain) boundary(s *Simulator, now int64) int64 {
	next := never
	d.expiry, d.wanting = never, 0
	for _, m := range d.members {
		m.want = false
		timeout := int64(m.w.Timeout) // (0: none)
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
		if timeout > 0 && m.queued() > 0 && !m.job.active && m.queue[m.qhead].arrival < now-timeout {
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
		if timeout > 0 && m.queued() > 0 {
			d.expiry = min(d.expiry, m.queue[m.qhead].arrival+timeout)
		}
		if d.kind == schedMPS {
			continue // (runMPS reads no member's want)
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
	tc, tw := jobTimes(j, c, w)
	return rooflineTime(j, tc, tw, mult)
}

// jobTimes are j's compute time at rate c (0 without FLOPs) and memory
// time at bandwidth w (s), which rooflineTime takes.
func jobTimes(j *job, c, w float64) (tc, tw float64) {
	if j.flops > 0 {
		tc = j.flops / c
	}
	return tc, j.bytes / w
}

// rooflineTime is jobTime from j's compute time tc and memory time tw
// (jobTimes).
func rooflineTime(j *job, tc, tw, mult float64) float64 {
	// (plain comparisons: every figure is positive, and the built-in
	// max's care for NaN and signed zeros costs on this path)
	jobSeconds := tc
	if j.bytes > 0 && tw > jobSeconds {
		jobSeconds = tw
	}
	jobSeconds *= mult
	if jobSeconds < j.floor {
		jobSeconds = j.floor
	}
	if jobSeconds < minJobS {
		jobSeconds = minJobS
	}
	if !(jobSeconds <= maxJobS) { // (+Inf and NaN too)
		jobSeconds = maxJobS
	}
	return jobSeconds
}

// progress moves t's job forward by dt ns, the whole job taking jobSeconds
// at SM share share, accounting it; it completes the job when done.
func (d *domain) progress(s *Simulator, t *tenant, dt int64, jobSeconds, share float64, done bool, end int64) {
	frac := t.job.rem
	if !done {
		// (a plain comparison: both are positive, and the built-in min's
		// care for NaN and signed zeros costs on this path)
		if f := float64(dt) / (jobSeconds * 1e9); f < frac {
			frac = f
		}
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
