package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

const never = int64(math.MaxInt64)

// maxWindowLatencies is the default bound on the latencies a window keeps
// per tenant (Options.WindowLatencies); beyond it Latencies is a uniform
// sample of the window's requests.
const maxWindowLatencies = 1 << 20

// DefaultWindowLatencies is the default of Options.WindowLatencies.
const DefaultWindowLatencies = maxWindowLatencies

// request is one inference request (or training step).
type request struct {
	arrival int64 // ns since start
	ctx     int   // LLM context tokens
	gen     int   // LLM tokens to generate
	done    int   // LLM tokens generated so far
	first   int64 // LLM: when the first token came out; -1 before
}

// job is the unit of GPU work in flight for a tenant: a DNN batch, an LLM
// iteration or a training step. It progresses as a fluid: rem is the
// fraction still to do.
type job struct {
	active bool
	flops  float64
	bytes  float64
	rem    float64
	floor  float64 // s: the job takes at least this long
	n      int     // DNN: requests in the batch (taken from the queue head)
	start  int64
	// LLM: the number of sequences in the iteration that were newly admitted
	// (prefill); they are the last newSeqs entries of tenant.seqs.
	newSeqs int
	// service-time noise: the job's standard normal draw and its
	// multipliers at the last noiseSpreads spreads (the first spreads of
	// them hold one; evict is the next to go; see job.noise)
	z              float64
	sigma, mult    [noiseSpreads]float64
	spreads, evict int
}

// begin makes j a new job of flops and bytes starting at now, its other
// fields zero. (Zeroing and setting fields in place: a composite literal
// here is built aside and copied, which costs on this path.)
func (j *job) begin(flops, bytes float64, now int64) {
	*j = job{}
	j.active, j.rem, j.start = true, 1, now
	j.flops, j.bytes = flops, bytes
}

// jobTimeCache is a time-sliced job's time (s) and what it depends on.
// (It is compared and filled field by field: building a key struct to
// compare costs more than the check saves on this path.)
type jobTimeCache struct {
	d                           *domain
	seq                         uint64 // tenant.jobSeq of the job
	share, clockFactor, memLock float64
	seconds                     float64
}

// tenantTotals accumulates what a tenant got over an interval.
type tenantTotals struct {
	workTotals
	memBusy float64 // ns with memory traffic (a kernel moving bytes)
}

func (a *tenantTotals) add(b tenantTotals) {
	a.workTotals.add(b.workTotals)
	a.memBusy += b.memBusy
}

// tenant is the runtime state of a scenario tenant.
type tenant struct {
	idx   int
	spec  *TenantSpec
	w     *WorkloadSpec
	rng   *rand.Rand
	res   *rand.Rand // reservoir sampling of window latencies
	noise *rand.Rand // service-time noise (its own stream: arrivals do not move with it)

	alive   bool  // the process exists
	wantRun bool  // scenario says it should run (not stopped)
	pause   int64 // no GPU progress before this time (migration, restart)
	// duty is the pause duty (pause.go): no new job is started in the
	// first duty of each PausePeriod since pulseBase.
	duty      float64
	pulseBase int64
	gpu, inst int
	dom       *domain

	// control actions in progress (actuation.go)
	refusing  bool  // stopped by a control call: arrivals fail
	standby   bool  // a standby context warms up (holding a second copy)
	switchAt  int64 // standby: when it takes over
	draining  bool  // no new admissions until in-flight work ends
	drainEnd  int64 // draining: in-flight work left then is dropped
	drainStop bool  // draining: stop when drained (else restart)
	drainSwap bool  // draining: an LLM's old engine before its standby takes over
	act       int   // id of the action in progress (Simulator.actions), -1 none
	// training checkpoints: steps completed since the last one (lost on a
	// restart), when it was taken, and lost steps still to redo; the one
	// being written counts only once written, at ckptEnd: until then a
	// restart loses its steps (writing) too
	sinceCkpt int
	lastCkpt  int64
	redo      int
	writing   int
	ckptEnd   int64

	// arrivals
	rate      float64
	bursting  bool
	stateEnd  int64 // MMPP: when the current burst/calm state ends
	nextArr   int64
	traceIdx  int
	traceBase int64

	queue []request // FIFO of waiting requests (head at qhead)
	qhead int
	seqs  []request // LLM: running sequences
	job   job

	// MPS
	mpsEff     float64 // active-thread fraction of the current context
	mpsCap     float64 // an MPS client's SM cap: min(w.SMFraction, mpsEff) (setMPSEff)
	mpsPending float64 // set for the next context; 0 = use the GPU default
	pinned     uint64  // pinned-memory limit; 0 = none

	training bool    // the workload is training (always has a step to run)
	minJob   float64 // s: the workload's min_job_time

	// per-segment scheduling scratch
	want       bool    // runSliced: wants(t) at the segment's start
	share      float64 // fraction of the domain's SMs this segment
	bw         float64 // bytes/s this segment
	capC, capW float64 // FLOP/s and bytes/s its share gets alone
	tc, tw     float64 // MPS: its job's compute and memory time at capC and capW (jobTimes)
	bwOf       bwOf    // MPS: what capC, capW and bw hold for
	jobSeconds float64 // job time (s) at the current allocation
	left       int64   // MPS: ns the job still takes at the current allocation
	fixed      bool    // shareSMs: the client's cap binds
	jobSeq     uint64  // jobs started (tells an allocation's job apart)
	jt         jobTimeCache

	preempt  int64 // vGPU: ns runnable while another VM held the GPU
	runTotal int64 // vGPU: ns the VM ran in its logged slots
	// vGPU adaptive round robin: the backlog the scheduler last observed
	// (refreshed every 1/frequency seconds)
	arrBacklog int

	acc     [2]tenantTotals // 0: since the previous Sample, 1: since the previous Window
	pending tenantTotals    // since the last flush (see Simulator.flush)

	// ground truth for the window
	lat       []time.Duration
	completed int
	good      int
	itlTokens int // tokens judged by an ITL SLO
	// ITL SLO: the tokens after their first the dropped requests had not
	// produced (see lose)
	droppedTokens int
	work          float64
	ooms          int
	dropped       int
	timedOut      int

	// cumulative histograms and counters (AppMetrics)
	e2e          hist
	ttft         hist
	itl          hist
	lastIter     int64 // LLM: end of the previous iteration
	promptTokens uint64
	genTokens    uint64

	draws noiseDraws // the next draws of noise (last: it is large and cold)
}

// contextFraction is the MPS active-thread fraction a new context of t
// gets (docs/calibration.md, MPS): the server's value for this client (set by
// SetMPSActiveThreads, else the GPU's default), lowered by the client's
// own CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (mps_active_threads), which can
// only lower it.
func (t *tenant) contextFraction() float64 {
	f := t.dom.g.mpsDefault
	if t.mpsPending > 0 {
		f = t.mpsPending
	}
	if env := t.spec.MPSThreads; env > 0 && env < f {
		f = env
	}
	return f
}

func (t *tenant) queued() int { return len(t.queue) - t.qhead }

// startJob forms the next job if there is work; it reports whether a job
// is active.
func (t *tenant) startJob(now int64) bool {
	if t.duty > 0 && t.frozenTill(now) > 0 {
		return false // paused: it launches nothing new
	}
	active := t.formJob(now)
	t.job.floor = t.minJob
	if t.job.active && t.noise != nil {
		if t.dom.kind == schedMPS {
			// an MPS client's spread moves with its neighbours' demand:
			// job.noise works its multiplier out when the allocation asks
			t.job.z = t.draws.nextZ(t.noise)
		} else {
			t.job.sigma[0] = *t.w.ServiceNoise
			t.job.z, t.job.mult[0] = t.draws.next(t.noise, t.job.sigma[0])
			t.job.spreads, t.job.evict = 1, 1
		}
	}
	if t.job.active {
		t.jobSeq++
	}
	return active
}

// formJob is startJob's choice of the job's work, without its floor and
// noise.
func (t *tenant) formJob(now int64) bool {
	w := t.w
	if w.Timeout > 0 {
		t.expire(now)
	}
	switch w.Type {
	case "training":
		t.job.begin(w.FLOPs, w.Bytes, now)
		return true
	case "dnn":
		n := min(t.queued(), w.MaxBatch)
		if n == 0 || t.draining {
			return false
		}
		t.job.begin(float64(n)*w.FLOPs, float64(w.WeightsBytes)+float64(n)*w.Bytes, now)
		t.job.n = n
		return true
	case "llm":
		// Continuous batching: admit waiting requests while the batch and the
		// KV cache have room (vLLM reserves blocks as sequences grow; here a
		// sequence reserves its final length on admission).
		kvCap := math.Inf(1)
		if w.KVBytesPerToken > 0 {
			kvCap = (float64(t.spec.Memory) - float64(w.WeightsBytes)) / float64(w.KVBytesPerToken)
		}
		// (token counts are summed as integers, exact as float sums are)
		used := 0
		for i := range t.seqs {
			used += t.seqs[i].ctx + t.seqs[i].gen
		}
		newSeqs, prefill := 0, 0
		for !t.draining && t.queued() > 0 && len(t.seqs) < w.MaxBatch {
			r := t.queue[t.qhead]
			need := r.ctx + r.gen
			if float64(used+need) > kvCap && len(t.seqs) > 0 {
				break
			}
			t.qhead++
			used += need
			t.seqs = append(t.seqs, r)
			newSeqs++
			prefill += r.ctx
		}
		t.compactQueue()
		if len(t.seqs) == 0 {
			return false
		}
		decode := len(t.seqs) - newSeqs
		kvRead := 0
		for i := 0; i < decode; i++ {
			kvRead += t.seqs[i].ctx + t.seqs[i].done
		}
		kv := float64(w.KVBytesPerToken)
		// prefill is compute-bound (2 FLOPs per parameter per token);
		// decode reads the weights and every sequence's KV cache.
		t.job.begin(2*w.Params*(float64(prefill)+float64(decode)),
			float64(w.WeightsBytes)+kv*float64(kvRead)+kv*float64(prefill), now)
		t.job.newSeqs = newSeqs
		// the engine's host time (scheduling, sampling, launches) comes
		// before the GPU work (docs/calibration.md, LLM iteration)
		t.pause = max(t.pause, now+int64(w.IterationOverhead)+int64(len(t.seqs))*int64(w.SeqOverhead))
		return true
	}
	return false
}

func (t *tenant) compactQueue() {
	if t.qhead > 64 && t.qhead*2 > len(t.queue) {
		n := copy(t.queue, t.queue[t.qhead:])
		t.queue = t.queue[:n]
		t.qhead = 0
	}
}

// finishJob completes the current job at time now.
func (t *tenant) finishJob(s *Simulator, now int64) {
	j := &t.job // cleared at the end
	if t.w.Type != "training" {
		t.work += j.flops
	}
	switch t.w.Type {
	case "training":
		// training work is counted in completed steps; steps redone after
		// a restart (lost since the last checkpoint) are not work
		if t.redo > 0 {
			t.redo--
		} else {
			t.work++
		}
		t.sinceCkpt++
		if now-t.lastCkpt >= int64(t.w.CheckpointInterval) {
			// the write takes the job off the GPU (restarts.go); its
			// steps are saved when it ends, which a pause puts off
			// (pause.go)
			t.ckptEnd = t.thawedAfter(now, s.checkpointWrite(t))
			t.pause = max(t.pause, t.ckptEnd)
			t.lastCkpt, t.writing, t.sinceCkpt = t.pause, t.sinceCkpt, 0
			t.dom.due = min(t.dom.due, t.pause) // its end wakes the domain
		}
		t.record(s, now-j.start, now-j.start)
	case "dnn":
		for i := 0; i < j.n; i++ {
			d := now - t.queue[t.qhead+i].arrival
			t.record(s, d, d)
		}
		t.qhead += j.n
		t.compactQueue()
	case "llm":
		if decode := len(t.seqs) - j.newSeqs; decode > 0 {
			// every running sequence got its next token after one iteration
			t.itl.observeN(float64(now-t.lastIter)/1e9, uint64(decode))
			if t.judgesITL() {
				t.judgeTokens(s, now-t.lastIter, decode)
			}
		}
		t.lastIter = now
		// the sequences that go on are kept in place, in order (moved
		// only past one that ended)
		kept := 0
		cutoff := now - int64(t.w.Timeout)
		for i := range t.seqs {
			r := &t.seqs[i]
			if t.w.Timeout > 0 && r.arrival < cutoff {
				// the client gave up: the engine aborts it, this
				// iteration's token of it judged (decode) or not its
				// first (prefill)
				t.timeOut(r.gen, r.done+1)
				continue
			}
			r.done++
			t.genTokens++
			if r.first < 0 {
				r.first = now
				t.promptTokens += uint64(r.ctx)
				t.ttft.observe(float64(now-r.arrival) / 1e9)
			}
			if r.done >= r.gen {
				t.record(s, now-r.arrival, t.judged(r, now))
				continue
			}
			if kept != i {
				t.seqs[kept] = *r
			}
			kept++
		}
		t.seqs = t.seqs[:kept]
	}
	t.job = job{}
	if t.draining {
		s.checkDrain(t, now)
	}
}

// record notes a completed request (or step) with latency ns; judged is
// the latency its SLO judges and the window keeps (ns but under a TTFT
// SLO).
func (t *tenant) record(s *Simulator, ns, judged int64) {
	d := time.Duration(ns)
	if t.w.Timeout > 0 && d > time.Duration(t.w.Timeout) {
		t.timeOut(0, 0) // done too late: the client had given up
		return
	}
	t.completed++
	if t.judgesITL() {
		t.e2e.observe(d.Seconds())
		return // its tokens were judged as they came
	}
	jd := time.Duration(judged)
	t.keep(s, jd, t.completed)
	if t.spec.SLO != nil && jd <= time.Duration(t.spec.SLO.Target) {
		t.good++
	}
	t.e2e.observe(d.Seconds())
}

// keep keeps latency d, the seen-th judged in the window, among the
// window's latencies. Beyond s.maxLat, reservoir sampling keeps a uniform
// sample of them in bounded memory (a run nobody reads windows of, such as
// the exporter's, would otherwise grow without end).
func (t *tenant) keep(s *Simulator, d time.Duration, seen int) {
	if len(t.lat) < s.maxLat {
		t.lat = append(t.lat, d)
		return
	}
	if t.res == nil {
		t.res = rand.New(rand.NewPCG(uint64(s.seed), streamOf("reservoir/"+t.spec.Name)))
	}
	if j := t.res.Uint64N(uint64(seen)); j < uint64(s.maxLat) {
		t.lat[j] = d
	}
}

// judgesITL says whether t's SLO bounds its inter-token latency.
func (t *tenant) judgesITL() bool {
	return t.spec.SLO != nil && t.spec.SLO.Metric == SLOMetricITL
}

// judgeTokens judges n tokens that each came gap ns after their request's
// previous one, as the ITL histogram observes them: the window keeps
// their latencies (a uniform sample beyond s.maxLat, as record keeps
// requests') and counts those at or under the target.
func (t *tenant) judgeTokens(s *Simulator, gap int64, n int) {
	d := time.Duration(gap)
	for range n {
		t.itlTokens++
		t.keep(s, d, t.itlTokens)
	}
	if d <= time.Duration(t.spec.SLO.Target) {
		t.good += n
	}
}

// judged is the latency of LLM request r, ending at now, that its SLO
// judges: its time to first token under a TTFT SLO, else end to end.
func (t *tenant) judged(r *request, now int64) int64 {
	if t.spec.SLO != nil && t.spec.SLO.Metric == SLOMetricTTFT {
		return r.first - r.arrival
	}
	return now - r.arrival
}

// overdue counts the requests waiting or running at now that are older
// than the SLO target; under a TTFT SLO, those still without their first
// token and the running ones whose first token came later than the
// target (their judged latency is known: they will not be good); under
// an ITL SLO, the running requests with a first token when the last
// token came more than the target before now.
func (t *tenant) overdue(now int64) int {
	target := int64(t.spec.SLO.Target)
	cutoff := now - target
	n := 0
	for _, r := range t.queue[t.qhead:] {
		if r.arrival < cutoff {
			n++
		}
	}
	if t.judgesITL() {
		// a running request whose next token is already late; one
		// waiting for its first token is not judged by an ITL SLO yet
		n = 0
		if t.lastIter < cutoff {
			for _, r := range t.seqs {
				if r.first >= 0 {
					n++
				}
			}
		}
		return n
	}
	ttft := t.spec.SLO != nil && t.spec.SLO.Metric == SLOMetricTTFT
	for _, r := range t.seqs {
		switch {
		case ttft && r.first >= 0:
			if r.first-r.arrival > target {
				n++
			}
		case r.arrival < cutoff:
			n++
		}
	}
	return n
}

// expire fails the queued requests older than the client's timeout (the
// clients gave up); the queue must not hold a running DNN batch.
func (t *tenant) expire(now int64) {
	cutoff := now - int64(t.w.Timeout)
	for t.queued() > 0 && t.queue[t.qhead].arrival < cutoff {
		r := &t.queue[t.qhead]
		t.qhead++
		t.timeOut(r.gen, r.done)
	}
	t.compactQueue()
}

// --- arrivals ---

// initArrivals sets up the request process at time now.
func (t *tenant) initArrivals(now int64) {
	a := &t.w.Arrival
	t.nextArr = never
	switch a.Process {
	case "poisson":
		t.scheduleNext(now)
	case "bursty":
		t.bursting = false
		t.stateEnd = satAdd(now, expNs(t.rng, a.CalmMean.Seconds()))
		t.scheduleNext(now)
	case "trace":
		tr := t.spec.trace
		t.traceBase = now
		t.traceIdx = 0
		t.nextArr = satAdd(now, replayed(tr.offsets[0], a.Speedup))
	}
}

// replayed is a trace's offset d at speedup, never where that is out of
// int64's range (load refuses a span over maxDrawNs at its speedup; a
// conversion out of range would give a time in the past).
func replayed(d time.Duration, speedup float64) int64 {
	if q := float64(d) / speedup; q < float64(never) {
		return int64(q)
	}
	return never
}

// satAdd is t + d for a d of at least 0, never where that is out of
// int64's range.
func satAdd(t, d int64) int64 {
	if t > never-d {
		return never
	}
	return t + d
}

// expNs draws an exponential duration with the given mean in seconds, at
// most maxDrawNs: a rate of 1e-300 (a mean of 1e300 s) gives a draw out of
// int64's range, which would convert to a time in the past.
func expNs(r *rand.Rand, mean float64) int64 {
	if d := r.ExpFloat64() * mean * 1e9; d < maxDrawNs {
		return int64(d) + 1
	}
	return maxDrawNs
}

// maxDrawNs bounds a drawn time between arrivals or of a burst: about 146
// years, so that now plus it stays in range.
const maxDrawNs = 1 << 62

// scheduleNext draws the next Poisson/MMPP arrival after now.
func (t *tenant) scheduleNext(now int64) {
	a := &t.w.Arrival
	switch a.Process {
	case "poisson":
		if t.rate <= 0 {
			t.nextArr = never
			return
		}
		t.nextArr = now + expNs(t.rng, 1/t.rate)
	case "bursty":
		// Two-state MMPP: exponential sojourns in calm (rate) and burst
		// (burst_rate) states; memorylessness lets us redraw at a switch.
		// An arrival past a drawn time's bound from now never comes, as
		// a drawn time at the bound (the search would run out of int64's
		// range).
		limit := satAdd(now, maxDrawNs)
		for {
			r := t.rate
			if t.bursting {
				r = a.BurstRate
			}
			next := never
			if r > 0 {
				next = satAdd(now, expNs(t.rng, 1/r))
			}
			if next < t.stateEnd {
				t.nextArr = next
				return
			}
			if t.stateEnd >= limit {
				t.nextArr = never
				return
			}
			now = t.stateEnd
			t.bursting = !t.bursting
			mean := a.CalmMean
			if t.bursting {
				mean = a.BurstMean
			}
			t.stateEnd = satAdd(now, expNs(t.rng, mean.Seconds()))
		}
	}
}

// arrive enqueues every arrival at or before now.
func (t *tenant) arrive(now int64) {
	for t.nextArr <= now {
		at := t.nextArr
		ctx, gen := 0, 0 // the request's tokens (LLM)
		a := &t.w.Arrival
		switch a.Process {
		case "trace":
			tr := t.spec.trace
			ctx, gen = tr.context[t.traceIdx], tr.generated[t.traceIdx]
			t.traceIdx++
			if t.traceIdx == len(tr.offsets) {
				if a.NoLoop {
					t.nextArr = never
					break
				}
				t.traceIdx = 0
				t.traceBase = satAdd(t.traceBase, replayed(tr.span, a.Speedup))
			}
			t.nextArr = satAdd(t.traceBase, replayed(tr.offsets[t.traceIdx], a.Speedup))
		default:
			t.scheduleNext(at)
		}
		if t.w.Type == "llm" && a.Process != "trace" {
			ctx, gen = t.tokens(t.w.ContextTokens), t.tokens(t.w.GeneratedTokens)
		}
		if t.w.Type == "llm" && gen < 1 {
			gen = 1
		}
		if t.queued() >= t.w.MaxQueue {
			t.lose(gen, 0) // the server rejects what it cannot queue
			continue
		}
		// filled in place (a composite literal is built aside and
		// copied, which costs at every arrival)
		t.queue = append(t.queue, request{})
		q := &t.queue[len(t.queue)-1]
		q.arrival, q.ctx, q.gen, q.first = at, ctx, gen, -1
	}
}

// tokens draws a token count with the given mean (exponential unless
// fixed_tokens).
func (t *tenant) tokens(mean int) int {
	if t.w.FixedTokens {
		return mean
	}
	return max(1, int(t.rng.ExpFloat64()*float64(mean)+0.5))
}

// --- histograms ---

// hist is a cumulative Prometheus-style histogram.
type hist struct {
	bounds []float64
	counts []uint64 // per bucket (not cumulative), len(bounds)+1
	sum    float64
	n      uint64
}

func newHist(bounds []float64) hist {
	return hist{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *hist) observe(v float64) { h.observeN(v, 1) }

// observeN records n observations of v.
func (h *hist) observeN(v float64, n uint64) {
	if h.counts == nil {
		return
	}
	// the first bucket whose bound is at least v (slices.BinarySearch
	// without its generic comparison, which is slow on this path)
	i, j := 0, len(h.bounds)
	for i < j {
		m := int(uint(i+j) >> 1)
		if h.bounds[m] < v {
			i = m + 1
		} else {
			j = m
		}
	}
	h.counts[i] += n
	h.sum += v * float64(n)
	h.n += n
}

// setMPSEff sets t's active-thread fraction to that of its current
// context, and its SM cap as an MPS client with it.
func (t *tenant) setMPSEff() {
	t.mpsEff = t.contextFraction()
	t.mpsCap = min(t.w.SMFraction, t.mpsEff)
}
