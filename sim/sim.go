package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/parallel"
)

// DefaultStart is the virtual start time when Options.Start is zero and no
// Clock is given.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options configure a Simulator.
type Options struct {
	// Seed overrides the scenario's seed; 0 keeps the scenario's.
	Seed int64
	// Clock, when set, makes the simulator run in real time: Sample and
	// AppMetrics first advance the model to Clock.Now(). Nil means virtual
	// time driven by AdvanceTo only.
	Clock gpu.Clock
	// Start is the virtual start time; zero means Clock.Now() with a Clock,
	// else DefaultStart.
	Start time.Time
	// WindowLatencies bounds the request latencies a window keeps per
	// tenant (beyond it, Window's Latencies are a uniform sample of the
	// window's requests); 0 means 1<<20. A simulator serving a live
	// exporter, which never calls Window, keeps only a few so that its
	// memory stays flat however long it runs.
	WindowLatencies int
	// MaxCatchUp bounds, in real-time mode, the Clock time one sync with
	// the Clock (a Sample, AppMetrics or control call) spends simulating:
	// the model runs in steps of at most catchUpChunk of model time, and
	// once a step ends with the Clock MaxCatchUp past the sync's start,
	// the rest of the gap is skipped. Nothing is simulated for the skipped
	// time; the model's timeline (the scenario's events, its ramps) moves
	// that much later against the Clock. A scenario the machine runs
	// faster than real time never skips; one it cannot holds each sync
	// (and the lock) to about MaxCatchUp, instead of a sync that falls
	// further behind at each call. 0 means DefaultMaxCatchUp; a negative
	// value, no bound.
	MaxCatchUp time.Duration
	// OnSkip, when set, is told of the time skipped (MaxCatchUp): the time
	// skipped since the last call and since the start, at the first skip
	// and then at most once a minute of the Clock. It is called with the
	// simulator's lock held and must not call the simulator.
	OnSkip func(skipped, total time.Duration)
}

// DefaultMaxCatchUp is Options.MaxCatchUp when it is 0: the exporter's
// default sample interval.
const DefaultMaxCatchUp = time.Second

// catchUpChunk is the most model time a real-time sync simulates between
// two looks at the Clock: a quarter of the exporter's default sample
// interval, so that a scenario eight times slower than real time overruns
// MaxCatchUp by about two seconds, not by the whole gap's work.
const catchUpChunk = int64(250 * time.Millisecond)

// skipNoteEvery is the least Clock time between two OnSkip calls.
const skipNoteEvery = time.Minute

// Simulator runs a scenario. It implements gpu.Source, every gpu actuator and
// gpu.AppMetricsSource; all methods are safe for concurrent use.
type Simulator struct {
	mu    sync.Mutex
	sc    *Scenario
	seed  int64
	clock gpu.Clock
	start time.Time

	now     int64 // ns since start
	gpus    []*gpuState
	tenants []*tenant
	evIdx   int

	lastSample int64
	sampled    bool

	// real-time mode's bound on a sync's Clock time (Options.MaxCatchUp,
	// <= 0: none), the time skipped in all and since the last OnSkip
	// call, and that call's Clock time
	maxCatchUp int64
	onSkip     func(skipped, total time.Duration)
	skipped    int64
	skipNote   int64
	skipNoted  time.Time

	winStart int64
	maxLat   int             // latencies a window keeps per tenant
	sortBuf  []time.Duration // Window's scratch for sorting latencies (SortLatencies)
	// spare holds, by tenant, the latency slices a window's caller handed
	// back (ReuseLatencies) for later windows to fill; under spareMu, so
	// that a caller on another goroutine need not wait for s.mu
	spareMu sync.Mutex
	spare   [][][]time.Duration

	// control actions and their costs (actuation.go); actBase is the id
	// of actions[0]
	actions []Action
	actBase int
	ctl     *rand.Rand // actuator call failures (restarts.go), made at the first draw
	// pauses are the pauses set, by tenant name (pause.go)
	pauses map[string]*pausedTenant
}

// New builds a simulator for sc, which must come from LoadScenario or
// ParseScenario. New does not modify sc: several simulators may run the
// same scenario at once.
func New(sc *Scenario, opts Options) (*Simulator, error) {
	if sc == nil || !sc.validated {
		return nil, fmt.Errorf("sim: the scenario must come from LoadScenario or ParseScenario")
	}
	s := &Simulator{sc: sc, seed: sc.Seed, clock: opts.Clock, start: opts.Start, maxLat: opts.WindowLatencies,
		maxCatchUp: int64(opts.MaxCatchUp), onSkip: opts.OnSkip}
	if s.maxCatchUp == 0 {
		s.maxCatchUp = int64(DefaultMaxCatchUp)
	}
	if s.maxLat <= 0 {
		s.maxLat = maxWindowLatencies
	}
	if opts.Seed != 0 {
		s.seed = opts.Seed
	}
	if s.start.IsZero() {
		s.start = DefaultStart
		if s.clock != nil {
			s.start = s.clock.Now()
		}
	}
	for i := range sc.GPUs {
		spec := &sc.GPUs[i]
		m := spec.model
		if m == nil {
			if m = modelByName(spec.Model); m == nil {
				return nil, fmt.Errorf("sim: unknown GPU model %q", spec.Model)
			}
		}
		g := &gpuState{
			idx: i, spec: spec, m: m, uuid: spec.UUID,
			bus:        fmt.Sprintf("00000000:%02X:00.0", 0x18+0x11*i%0xE0),
			mode:       gpu.SharingMode(spec.Sharing),
			level:      spec.TimeSlice,
			slice:      int64(timeSliceLevels[spec.TimeSlice]),
			clock:      m.IdleClockMHz,
			lockMin:    float64(spec.Clocks.Min),
			lockMax:    float64(spec.Clocks.Max),
			powerLimit: spec.PowerLimW,
			temp:       ambientC + cPerWatt*m.IdleW,
			vgpu:       spec.VGPU,
			mpsDefault: spec.MPS.DefaultActiveThreads,
		}
		g.pinnedDefault = uint64(spec.MPS.DefaultPinnedLimit)
		if g.lockMax > 0 {
			g.clock = g.lockMin
		}
		g.clk = g.clock
		g.power = g.powerAt(g.clock, 0, 0)
		if g.mode == gpu.SharingMIG {
			for j, ms := range spec.MIG {
				g.migs = append(g.migs, migInst{profile: m.profile(ms.Profile), uuid: ms.UUID, gi: j + 1, mps: ms.Sharing == string(gpu.SharingMPS)})
			}
		}
		g.buildDomains()
		s.gpus = append(s.gpus, g)
	}
	for i := range sc.Tenants {
		spec := &sc.Tenants[i]
		t := &tenant{
			idx: i, spec: spec, w: &spec.Workload,
			rng:     rand.New(rand.NewPCG(uint64(s.seed), 0x9E3779B97F4A7C15*uint64(i+1))),
			noise:   rand.New(rand.NewPCG(uint64(s.seed), streamOf("noise/"+spec.Name))),
			act:     -1,
			gpu:     spec.GPU,
			inst:    spec.MIGInstance,
			rate:    spec.Workload.Arrival.Rate,
			nextArr: never,
			e2e:     newHist(e2eBounds(spec.SLO)),
			wantRun: !spec.Stopped,

			training: spec.Workload.Type == "training",
			minJob:   spec.Workload.MinJobTime.Seconds(),
			// the client's own limit (0: the GPU's default)
			pinned: uint64(spec.PinnedLimit),
		}
		if spec.Workload.Type == "llm" {
			t.ttft = newHist(ttftBoundsOf(spec.SLO))
			t.itl = newHist(itlBoundsOf(spec.SLO))
		}
		if s.gpus[t.gpu].mode != gpu.SharingMIG {
			t.inst = -1
		}
		s.tenants = append(s.tenants, t)
	}
	s.placeAll()
	for _, t := range s.tenants {
		if t.wantRun {
			s.startTenant(t, 0)
		}
	}
	return s, nil
}

// streamOf is a PCG stream derived from a name.
func streamOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// Name is the backend name.
func (s *Simulator) Name() string { return "sim" }

// SetWindowLatencies sets Options.WindowLatencies for the windows from
// the next Window on (n <= 0: the default); a caller that reads windows
// sets it after each, so that a long run's latencies stay within a budget
// (vgpusim's run does: docs/vgpusim.md, Limits).
func (s *Simulator) SetWindowLatencies(n int) {
	if n <= 0 {
		n = maxWindowLatencies
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxLat = n
}

// Close does nothing.
func (s *Simulator) Close() error { return nil }

// Scenario returns the scenario being run.
func (s *Simulator) Scenario() *Scenario { return s.sc }

// Seed is the seed the simulator runs: Options.Seed, else the scenario's.
func (s *Simulator) Seed() int64 { return s.seed }

// Now returns the simulator's virtual time.
func (s *Simulator) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at(s.now)
}

func (s *Simulator) at(ns int64) time.Time { return s.start.Add(time.Duration(ns)) }

// Tenants returns the scenario's tenant names in scenario order.
func (s *Simulator) Tenants() []string {
	out := make([]string, len(s.tenants))
	for i, t := range s.tenants {
		out[i] = t.spec.Name
	}
	return out
}

// AdvanceTo runs the model up to t (no-op if t is not after Now).
func (s *Simulator) AdvanceTo(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(int64(t.Sub(s.start)))
}

// Skipped is the time real-time mode skipped since the start
// (Options.MaxCatchUp).
func (s *Simulator) Skipped() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.skipped)
}

// syncClock advances to the Clock's time in real-time mode, for at most
// maxCatchUp of the Clock's time: the rest of a longer gap is skipped by
// moving the start that much later, so that the model's own times
// (arrivals, pauses, scenario events) stay as they were and none of the
// gap's work is done.
func (s *Simulator) syncClock() {
	if s.clock == nil {
		return
	}
	began := s.clock.Now()
	to := int64(began.Sub(s.start))
	for s.now < to {
		s.advance(min(to, s.now+catchUpChunk))
		if s.now >= to || s.maxCatchUp <= 0 {
			continue
		}
		if now := s.clock.Now(); now.Sub(began) >= time.Duration(s.maxCatchUp) {
			s.skip(to-s.now, now)
			return
		}
	}
}

// skip moves the start d later, the Clock at now, and tells OnSkip at the
// first skip and then at most every skipNoteEvery.
func (s *Simulator) skip(d int64, now time.Time) {
	s.start = s.start.Add(time.Duration(d))
	s.skipped += d
	s.skipNote += d
	if s.onSkip != nil && (s.skipNoted.IsZero() || now.Sub(s.skipNoted) >= skipNoteEvery) {
		s.onSkip(time.Duration(s.skipNote), time.Duration(s.skipped))
		s.skipNote, s.skipNoted = 0, now
	}
}

// buildDomains creates the scheduling domains of g from its mode.
func (g *gpuState) buildDomains() {
	g.domains = g.domains[:0]
	m := g.m
	if g.mode == gpu.SharingMIG {
		for i, mi := range g.migs {
			kind := schedTimeSlice
			if mi.mps {
				kind = schedMPS
			}
			g.domains = append(g.domains, &domain{
				g: g, inst: i, kind: kind, cur: -1,
				smFrac:   float64(mi.profile.SMs) / float64(m.SMs),
				bwFrac:   float64(mi.profile.MemSlices) / 8,
				memBytes: mi.profile.MemoryBytes,
			})
		}
		return
	}
	kind := schedTimeSlice
	switch g.mode {
	case gpu.SharingMPS:
		kind = schedMPS
	case gpu.SharingVGPU:
		kind = schedVGPU
	}
	g.domains = append(g.domains, &domain{g: g, inst: -1, kind: kind, cur: -1,
		smFrac: 1, bwFrac: 1, memBytes: m.MemBytes - uint64(g.spec.Reserved)})
}

// placeAll rebuilds every domain's member list from tenant placements.
func (s *Simulator) placeAll() {
	for _, g := range s.gpus {
		for _, d := range g.domains {
			d.members = d.members[:0]
			d.cur = -1
		}
	}
	for _, t := range s.tenants {
		g := s.gpus[t.gpu]
		var d *domain
		if g.mode == gpu.SharingMIG {
			if t.inst < 0 || t.inst >= len(g.domains) {
				t.inst = 0
			}
			d = g.domains[t.inst]
		} else {
			t.inst = -1
			d = g.domains[0]
		}
		t.dom = d
		d.members = append(d.members, t)
	}
}

// memFree is the memory left in d for a new context of t.
func (d *domain) memFree(except *tenant) int64 {
	used := int64(0)
	for _, m := range d.members {
		if m.alive && m != except {
			used += int64(m.spec.Memory)
			if m.standby {
				used += int64(m.spec.Memory) // the standby's second copy
			}
		}
	}
	return int64(d.memBytes) - used
}

// pinnedLimit is the MPS pinned memory limit of t's context: its own (the
// scenario's pinned_memory_limit, or SetMPSPinnedMemoryLimit's), else its
// GPU's default; none off MPS, where no server limits it.
func (t *tenant) pinnedLimit() uint64 {
	if t.dom == nil || t.dom.kind != schedMPS {
		return 0
	}
	if t.pinned > 0 {
		return t.pinned
	}
	return t.dom.g.pinnedDefault
}

// startTenant creates the tenant's context at now; it fails with an OOM
// event when the memory does not fit.
func (s *Simulator) startTenant(t *tenant, now int64) bool {
	d := t.dom
	g := d.g
	if g.lost {
		return false // it starts when the GPU is back
	}
	if msg := s.memCheck(t); msg != "" {
		s.oom(t, now, msg)
		return false
	}
	t.alive = true
	t.pause = max(now, g.drainTo)
	t.lastCkpt = t.pause
	t.setMPSEff()
	if !t.refusing {
		t.initArrivals(now) // a stopped service's clients kept sending
	}
	t.refusing = false
	return true
}

// memCheck says why t's context cannot allocate its memory, or "".
func (s *Simulator) memCheck(t *tenant) string {
	need := int64(t.spec.Memory)
	if lim := t.pinnedLimit(); lim > 0 && uint64(need) > lim {
		return fmt.Sprintf("allocation of %d bytes over the MPS pinned memory limit of %d bytes", need, lim)
	}
	if fb := t.spec.VM.fb; t.dom.kind == schedVGPU && fb > 0 && uint64(need) > fb {
		return fmt.Sprintf("out of vGPU framebuffer: %d bytes requested, %s has %d", need, t.spec.VM.Type, fb)
	}
	if free := t.dom.memFree(t); need > free {
		return fmt.Sprintf("out of device memory: %d bytes requested, %d free", need, max(free, 0))
	}
	return ""
}

// oom fails t's context creation at now. A service that was serving (or
// stopped, its clients' requests failing) when it failed to start again
// is down: its clients keep sending, and their requests fail (Dropped)
// until it starts, as while stopped; one that never served (its memory
// does not fit at the scenario's start) has no clients yet.
func (s *Simulator) oom(t *tenant, now int64, msg string) {
	serving := t.alive || t.refusing
	t.ooms++
	if t.alive {
		s.lostSteps(t) // a live process OOMs on its restart's new context
	}
	t.alive = false
	t.drop()
	s.endAction(t)
	if serving {
		t.refusing = true
	} else {
		t.nextArr = never
	}
	g := t.dom.g
	s.event(g, gpu.Event{Time: s.at(now), Kind: gpu.EventOOM, PID: t.spec.Process.PID,
		Message: fmt.Sprintf("%s (%s): %s", t.spec.Process.Executable, t.spec.Name, msg)})
}

func (s *Simulator) event(g *gpuState, e gpu.Event) {
	if len(g.events) >= 1000 {
		return
	}
	g.events = append(g.events, e)
}

func (s *Simulator) stopTenant(t *tenant) {
	if t.alive {
		s.lostSteps(t)
	}
	t.alive = false
	t.drop()
	t.nextArr = never
	t.refusing = false
	s.endAction(t)
}

// applyEvents applies scenario events due at or before now.
func (s *Simulator) applyEvents() {
	for s.evIdx < len(s.sc.Events) && int64(s.sc.Events[s.evIdx].At) <= s.now {
		e := &s.sc.Events[s.evIdx]
		s.evIdx++
		var t *tenant
		if e.tenant >= 0 {
			t = s.tenants[e.tenant]
		}
		switch e.Action {
		case "rate":
			t.rate = e.Rate
			if t.alive {
				t.scheduleNext(s.now)
			}
		case "start":
			t.wantRun = true
			if !t.alive {
				s.startTenant(t, s.now)
			}
		case "stop":
			t.wantRun = false
			s.stopTenant(t)
		case "xid":
			ev := gpu.Event{Time: s.at(s.now), Kind: gpu.EventXID, Code: e.Code,
				Message: fmt.Sprintf("Xid %d", e.Code)}
			if t != nil {
				ev.PID = t.spec.Process.PID
				ev.Message = fmt.Sprintf("Xid %d, pid=%d, name=%s", e.Code, ev.PID, t.spec.Process.Executable)
			}
			s.event(s.gpus[*e.GPU], ev)
		case "gpu-lost":
			g := s.gpus[*e.GPU]
			if g.lost {
				break
			}
			g.lost = true
			s.event(g, gpu.Event{Time: s.at(s.now), Kind: gpu.EventXID, Code: 79, Message: "Xid 79, GPU has fallen off the bus"})
			for _, x := range s.tenants {
				if x.gpu == g.idx && x.alive {
					// its processes die; their clients' requests go on
					// coming and fail until the GPU is back
					s.lostSteps(x)
					x.alive = false
					x.drop()
					s.endAction(x)
					x.refusing = true
				}
			}
		case "gpu-restored":
			g := s.gpus[*e.GPU]
			if !g.lost {
				break
			}
			g.lost = false
			for _, x := range s.tenants {
				if x.gpu == g.idx && x.wantRun && !x.alive {
					s.startTenant(x, s.now)
				}
			}
		}
	}
}

func (s *Simulator) nextEvent() int64 {
	if s.evIdx < len(s.sc.Events) {
		return int64(s.sc.Events[s.evIdx].At)
	}
	return never
}

// busy says whether anything on g may run at t; wake is the next time
// something on g changes on its own when nothing runs.
func (g *gpuState) busy(t int64) (bool, int64) {
	wake := never
	if g.drainTo > t {
		wake = g.drainTo
	}
	for _, d := range g.domains {
		if d.switchEnd > t || d.warming() {
			return true, 0
		}
		for _, m := range d.members {
			if !m.alive {
				if m.refusing {
					wake = min(wake, m.nextArr)
				}
				continue
			}
			if m.wants(t) {
				return true, 0
			}
			wake = min(wake, m.nextArr)
			if m.pause > t {
				wake = min(wake, m.pause)
			}
			if f := m.frozenTill(t); f > 0 {
				wake = min(wake, f)
			}
			if m.standby {
				wake = min(wake, m.switchAt)
			}
			if m.draining {
				wake = min(wake, m.drainEnd)
			}
		}
	}
	return false, wake
}

// advance runs the model to `to` ns since start. Between scenario events
// the GPUs are independent, and each runs in steps of its own (see
// gpuState.run).
func (s *Simulator) advance(to int64) {
	for s.now < to {
		s.applyEvents()
		s.recheck()
		end := min(to, s.nextEvent())
		s.runGPUs(s.now, end)
		s.now = end
	}
	s.applyEvents()
}

// runGPUs runs every GPU over [t, end). Until the next scenario event a
// GPU's run reads the simulator's settings and changes only its own
// domains and tenants (and the actions of those tenants), so the GPUs run
// in parallel on up to GOMAXPROCS goroutines; each GPU's arithmetic is the
// same whichever goroutine runs it, so the results do not depend on the
// split.
func (s *Simulator) runGPUs(t, end int64) {
	parallel.Each(len(s.gpus), func(i int) { s.gpus[i].run(s, t, end) })
}

// recheck makes every domain look at all its members again (boundary) at
// its next run: between runs, events and control calls change tenants.
func (s *Simulator) recheck() {
	for _, g := range s.gpus {
		for _, d := range g.domains {
			d.due = 0
		}
	}
}

// run advances g over [t, end): an idle stretch (nothing can run) in one
// go, else in steps no longer than its clock plan allows.
func (g *gpuState) run(s *Simulator, t, end int64) {
	for t < end {
		busy, wake := g.busy(t)
		if !busy {
			next := min(end, wake)
			if next > t {
				g.idle(next - t)
				t = next
				continue
			}
		}
		p := g.plan(s, t, busy)
		e := min(end, p.until)
		if e <= t {
			e = t + 1
		}
		g.step(s, t, e, &p)
		t = e
	}
}

// jitter is a deterministic value in [-1, 1] for GPU g and a time bucket:
// independent of the load, so that a load change elsewhere does not
// reshuffle the clock noise.
func (s *Simulator) jitter(g int, bucket int64) float64 {
	x := uint64(s.seed) ^ uint64(g)<<56 ^ uint64(bucket)*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return float64(x>>11)/float64(1<<53)*2 - 1
}

// flush moves what the model accumulated since the last flush into the
// totals since the previous Sample and since the previous Window: the
// model adds each segment once, into pending, and Sample and Window, which
// read the totals, flush first.
func (s *Simulator) flush() {
	for _, g := range s.gpus {
		flushInto(&g.acc, &g.pending)
		for _, d := range g.domains {
			flushInto(&d.acc, &d.pending)
		}
	}
	for _, t := range s.tenants {
		flushInto(&t.acc, &t.pending)
	}
}

// flushInto adds *pending to both totals of acc and clears it.
func flushInto[T any, P interface {
	*T
	add(T)
}](acc *[2]T, pending *T) {
	P(&acc[0]).add(*pending)
	P(&acc[1]).add(*pending)
	var zero T
	*pending = zero
}
