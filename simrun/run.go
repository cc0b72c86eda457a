package simrun

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/policies"
)

// settings lists what c sets beyond the policy's defaults, as the
// report's Meta.Settings names them.
func (c Config) settings() []string {
	var out []string
	for _, k := range c.EnabledKnobs {
		out = append(out, "enable-knob "+k)
	}
	for _, k := range c.DisabledKnobs {
		out = append(out, "disable-knob "+k)
	}
	for _, p := range c.AutotuneParams {
		// as the parameter reads it, the spaces around its name and
		// value trimmed (" pause_max = 0.5" named "pause_max=0.5")
		name, value, _ := strings.Cut(p, "=")
		out = append(out, "autotune.param "+strings.TrimSpace(name)+"="+strings.TrimSpace(value))
	}
	return out
}

// DefaultStep is the step of vgpusim's runs unless told: the tables' and
// the one the oracle's replay mirrors.
const DefaultStep = time.Second

// Config is one run: a scenario under a policy in virtual time.
type Config struct {
	// Scenario is a scenario file or the name of a built-in scenario.
	Scenario string
	// Tenants is the tenants file for attribution; "" means the scenario's
	// companion when it has one.
	Tenants string
	// Policy is a tuner policy's or a planner's registered name.
	Policy string
	// DisabledKnobs are the knobs the autotune policy never changes.
	DisabledKnobs []string
	// EnabledKnobs are the opt-in knobs (tuner.OptInKnobs) the autotune
	// policy may change.
	EnabledKnobs []string
	// AutotuneParams are NAME=VALUE settings of the autotune policy's
	// parameters (autotune.Params.Set), applied over its defaults.
	AutotuneParams []string
	// Duration is the virtual time to simulate; 0 means the scenario's.
	Duration time.Duration
	// Seed, when SeedSet, replaces the scenario's seed.
	Seed    int64
	SeedSet bool
	// Step is the sample, policy and report step (vgpusim's DefaultStep
	// unless told).
	Step time.Duration
	// StepFixed says the step is no flag of the command (vgpusim
	// tables): an error advises only --duration.
	StepFixed bool
	// Actuators wraps the simulator into the actuators a policy gets (the
	// oracle's replays included); nil gives tuner.ActuatorsOf(simulator).
	Actuators func(*sim.Simulator) tuner.Actuators
	// Progress, when set, is called after each step with the steps done
	// and the total.
	Progress func(done, total int64)
	// observe, when set, is given each step's snapshot, what the policy
	// decided on it and the window recorded (the readings' hash test).
	observe func(*tenant.Snapshot, []tuner.Decision, *sim.WindowStats)
}

func (c Config) actuators(s *sim.Simulator) tuner.Actuators {
	if c.Actuators == nil {
		return tuner.ActuatorsOf(s)
	}
	return c.Actuators(s)
}

// Result is a finished run.
type Result struct {
	Recorder  *report.Recorder
	Decisions []tuner.Decision
	// Actions are the control actions the simulator accepted, with their
	// costs (sim.Action).
	Actions []sim.Action
	// Plan is what a planner found; nil for a tuner policy.
	Plan *Plan
}

// Applied returns how many of the run's decisions were applied.
func (r *Result) Applied() int {
	n := 0
	for _, d := range r.Decisions {
		if d.Applied {
			n++
		}
	}
	return n
}

// Setup is what a planner is given: the run's scenario, tenants
// configuration, seed, duration and step, and the actuators its own
// replays give their policies.
type Setup struct {
	Scenario *sim.Scenario
	// Tenants is the run's tenants configuration, which its snapshots
	// attribute with (an empty one where the run has none): the tenants
	// and share bounds the tuner knows.
	Tenants   *tenant.Config
	Seed      int64
	Duration  time.Duration
	Step      time.Duration
	Actuators func(*sim.Simulator) tuner.Actuators
}

// Plan is what a planner prepared for a run.
type Plan struct {
	// Scenario is the scenario to run, with the planner's placements.
	Scenario *sim.Scenario
	// Policy makes the run's policy; it acts through the actuators the run
	// gives policies.
	Policy func() tuner.Policy
	// Write prints what the planner found.
	Write func(w io.Writer)
}

// A Planner prepares a run whose policy needs the whole scenario first
// (the oracle replays it in search of the best static settings).
type Planner func(ctx context.Context, s Setup) (*Plan, error)

// planners maps a registered name to its planner.
var planners = map[string]Planner{}

// RegisterPlanner adds a planner under name, which Config.Policy may then
// name like a tuner policy. Call it from an init function.
func RegisterPlanner(name string, p Planner) { planners[name] = p }

// UnknownPolicy is the error of a policy name Config.Policy does not
// take (nil for one it takes), listing those it takes.
func UnknownPolicy(name string) error {
	if _, ok := planners[name]; ok || slices.Contains(policies.Names(), name) {
		return nil
	}
	return fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames(), ", "))
}

// PolicyNames are the names Config.Policy takes: the tuner policies, then
// the planners, each sorted.
func PolicyNames() []string {
	var ps []string
	for n := range planners {
		ps = append(ps, n)
	}
	slices.Sort(ps)
	return append(policies.Names(), ps...)
}

// tunerPolicyNames are the policies that run on the tuner's engine, which
// have knobs to enable and disable.
func tunerPolicyNames() []string {
	var out []string
	for _, n := range policies.Names() {
		if p, err := policies.New(n); err == nil {
			if _, ok := p.(*tuner.TunerPolicy); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// knobsOnlyForTuner is the error of knob flags given to a policy that is
// not a tuner policy.
func (c Config) knobsOnlyForTuner() error {
	switch {
	case len(c.DisabledKnobs) > 0:
		return fmt.Errorf("--disable-knob: only a tuner policy (%s) has knobs to disable, not %q", strings.Join(tunerPolicyNames(), ", "), c.Policy)
	case len(c.EnabledKnobs) > 0:
		return fmt.Errorf("--enable-knob: only a tuner policy (%s) has knobs to enable, not %q", strings.Join(tunerPolicyNames(), ", "), c.Policy)
	case len(c.AutotuneParams) > 0:
		return fmt.Errorf("--autotune.param: only the %s policy has parameters, not %q", autotune.Name, c.Policy)
	}
	return nil
}

// policy returns the tuner policy cfg names, or else its planner.
func (c Config) policy() (tuner.Policy, Planner, error) {
	if pl, ok := planners[c.Policy]; ok {
		if err := c.knobsOnlyForTuner(); err != nil {
			return nil, nil, err
		}
		return nil, pl, nil
	}
	if err := UnknownPolicy(c.Policy); err != nil {
		return nil, nil, fmt.Errorf("--policy: %w", err)
	}
	p, err := policies.New(c.Policy)
	if err != nil {
		return nil, nil, fmt.Errorf("--policy: %w", err)
	}
	if err := policies.SetAutotuneParams(p, c.AutotuneParams); err != nil {
		return nil, nil, fmt.Errorf("--autotune.param: %w", err)
	}
	if tp, ok := p.(*tuner.TunerPolicy); ok {
		for _, k := range c.DisabledKnobs {
			tp.Disabled = append(tp.Disabled, gpu.Knob(k))
		}
		for _, k := range c.EnabledKnobs {
			tp.Enabled = append(tp.Enabled, gpu.Knob(k))
		}
	} else if err := c.knobsOnlyForTuner(); err != nil {
		return nil, nil, err
	}
	return p, nil, nil
}

func (c Config) validate() error {
	if c.Duration < 0 {
		return fmt.Errorf("--duration %v must not be negative", c.Duration)
	}
	if c.Duration > sim.MaxDuration {
		// a long step kept the series small while the run went on for
		// centuries of virtual time
		return fmt.Errorf("--duration %v: at most %v, as a scenario's duration", c.Duration, sim.MaxDuration)
	}
	if c.Step <= 0 {
		return fmt.Errorf("--step %v must be positive", c.Step)
	}
	if both := tuner.KnobsEnabledAndDisabled(c.EnabledKnobs, c.DisabledKnobs); len(both) > 0 {
		return fmt.Errorf("--enable-knob and --disable-knob both name %s: give each knob one of them", strings.Join(both, ", "))
	}
	// a name given twice: the run's settings line would list both, and
	// only the last of two parameter values would hold
	for _, f := range []struct {
		flag  string
		names []string
	}{{"--disable-knob", c.DisabledKnobs}, {"--enable-knob", c.EnabledKnobs}} {
		for i, n := range f.names {
			if slices.Contains(f.names[:i], n) {
				return fmt.Errorf("%s: %s given twice: give it once", f.flag, n)
			}
		}
	}
	if r := autotune.RepeatedParams(c.AutotuneParams); len(r) > 0 {
		return fmt.Errorf("--autotune.param: %s given twice: give it once", r[0])
	}
	return nil
}

// prepared is what a run needs before its first step, its configuration
// checked.
type prepared struct {
	pol     tuner.Policy
	planner Planner
	sc      *sim.Scenario
	tcfg    *tenant.Config
	seed    int64
	dur     time.Duration
	steps   int64
}

// prepare checks cfg and loads what its run needs: the policy, the
// scenario and its tenants configuration.
func (c Config) prepare() (*prepared, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	pol, planner, err := c.policy()
	if err != nil {
		return nil, err
	}
	sc, companion, err := LoadScenario(c.Scenario)
	if err != nil {
		return nil, err
	}
	p := &prepared{pol: pol, planner: planner, sc: sc, seed: sc.Seed, dur: c.Duration}
	if c.SeedSet {
		p.seed = c.Seed
	}
	if p.dur == 0 {
		p.dur = sc.Duration
	}
	if p.dur < c.Step {
		return nil, fmt.Errorf("--duration %v is shorter than one step (%v)", p.dur, c.Step)
	}
	if p.steps, err = runSteps(sc, p.dur, c.Step, c.StepFixed); err != nil {
		return nil, err
	}
	p.tcfg = tenant.EmptyConfig()
	switch {
	case c.Tenants != "":
		if p.tcfg, err = loadTenants(c.Tenants); err != nil {
			return nil, fmt.Errorf("--tenants: %w", err)
		}
		if err := CheckTenants(sc, p.tcfg); err != nil {
			return nil, fmt.Errorf("--tenants: %w", err)
		}
	case companion != nil:
		p.tcfg = companion // checked against the scenario as it was loaded
	default:
		if err := untold(c.Scenario, sc, pol); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Check returns the error Run would return before its first step: a bad
// flag, policy, scenario or tenants file.
func (c Config) Check() error {
	_, err := c.prepare()
	return err
}

// SeriesSize is the rows of the run's series, steps x (tenants + GPUs),
// each a line of its files in --out, and the bytes of the names written on
// them: steps x (the tenants' names + the GPUs' UUIDs), each on its rows
// (up to 253 and 95 bytes, sim's bounds). Its error is Check's.
func (c Config) SeriesSize() (rows, names int64, err error) {
	p, err := c.prepare()
	if err != nil {
		return 0, 0, err
	}
	for _, t := range p.sc.Tenants {
		names += int64(len(t.Name))
	}
	for _, g := range p.sc.GPUs {
		names += int64(len(g.UUID))
	}
	return p.steps * int64(len(p.sc.Tenants)+len(p.sc.GPUs)), p.steps * names, nil
}

// Run runs the scenario in virtual time: every step it advances the
// simulator, samples it, builds a snapshot, lets the policy act and
// records the window's ground truth.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	p, err := cfg.prepare()
	if err != nil {
		return nil, err
	}
	pol, planner, sc, tcfg, seed, dur, steps := p.pol, p.planner, p.sc, p.tcfg, p.seed, p.dur, p.steps

	res := &Result{}
	if planner != nil {
		res.Plan, err = planner(ctx, Setup{Scenario: sc, Tenants: tcfg, Seed: seed, Duration: dur, Step: cfg.Step, Actuators: cfg.Actuators})
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", cfg.Policy, cfg.Scenario, err)
		}
		sc = res.Plan.Scenario
	}
	latLeft := int64(maxRunLatencies)
	h, err := newHost(sc, tcfg, seed, windowLatencies(latLeft, len(sc.Tenants)))
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", cfg.Scenario, err)
	}
	defer h.Close()
	s := h.Sim
	act := cfg.actuators(s)
	if res.Plan != nil {
		pol = res.Plan.Policy()
	}
	snaps := NewSnapshots(h, cfg.Step)

	res.Recorder = report.NewRecorder(report.Meta{
		Scenario: sc.Name, Description: sc.Description, Policy: pol.Name(), Seed: seed,
		Settings: cfg.settings(), Start: s.Now(), Step: cfg.Step, Duration: dur,
	})
	rec := startRecording(res.Recorder, s)
	defer rec.wait() // (every step recorded before the result is returned)
	var sortBuf []time.Duration

	start := s.Now()
	// The first sample gives the policy its starting point.
	snap, err := snaps.Take(ctx)
	if err != nil {
		return nil, fmt.Errorf("sample at start: %w", err)
	}
	// Discard anything before the first step (the policy's calls at init
	// take time: they count), but for the contexts that failed to start:
	// a tenant whose memory does not fit fails at the scenario's start, and
	// the first step's window counts that OOM (else its row is all zeros,
	// with no word of why).
	startOOMs := s.Window().Tenants
	if err := pol.Init(ctx, act, snap); err != nil {
		return nil, fmt.Errorf("policy %s: init: %w", pol.Name(), err)
	}
	for i := int64(1); i <= steps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		at := start.Add(time.Duration(i) * cfg.Step)
		if at.Sub(start) > dur {
			at = start.Add(dur)
		}
		h.AdvanceTo(at)
		snap, err := snaps.Take(ctx)
		if err != nil {
			return nil, fmt.Errorf("sample at %v: %w", at.Sub(start), err)
		}
		decs, err := pol.Observe(ctx, act, snap)
		if err != nil {
			return nil, fmt.Errorf("policy %s at %v: %w", pol.Name(), at.Sub(start), err)
		}
		res.Decisions = append(res.Decisions, decs...)
		var changes []report.Change
		for _, d := range decs {
			if d.Applied {
				changes = append(changes, report.Change{Time: d.Time, GPU: d.GPU, Tenant: d.Tenant, Knob: d.Knob, To: d.To})
			}
		}
		// the recorder takes the window's latencies unsorted
		w := s.WindowUnsorted()
		for j, tw := range w.Tenants {
			latLeft -= int64(len(tw.Latencies))
			if i == 1 {
				w.Tenants[j].OOMs += startOOMs[j].OOMs
			}
		}
		s.SetWindowLatencies(windowLatencies(latLeft, len(sc.Tenants)))
		if cfg.observe != nil {
			sortBuf = w.SortLatencies(sortBuf)
			cfg.observe(snap, decs, &w)
		}
		rec.add(changes, w)
		if cfg.Progress != nil {
			cfg.Progress(i, steps)
		}
	}
	res.Actions = s.Actions()
	return res, nil
}

// A run's report keeps a row per tenant and per GPU a step, and every
// latency its windows keep, for its whole length (docs/vgpusim.md, Limits).
const (
	// maxSeriesRows bounds a run's steps x (tenants + GPUs + stepRows).
	// Measured peak RSS of an empty scenario (one GPU, no tenants) at
	// 4,194,304 steps of one row: 1.94 GB without --out, 7.34 GB with it
	// (its CSV and plots: the plots hold every point); with one tenant at
	// 2,097,152 steps: 1.82 GB and 5.30 GB. So a row costs about 400
	// bytes (780 with --out) and a step, its rows aside, about 60 bytes
	// (970 with --out): at the limit, the empty scenario peaks at 0.64 GB
	// (2.7 GB with --out), and many tenants, by that row cost, near 1.7 GB
	// (3.3 GB): an estimate, not measured. A day at the default step of
	// 1s is 86,400 steps.
	maxSeriesRows = 4 << 20
	// stepRows is a step's own cost, in rows: the report's step, and with
	// --out its line of every file and the plots' points of its time.
	stepRows = 2
	// maxRunLatencies is the budget of latencies a run's report keeps (4
	// bytes each, 256 MiB): each window may keep the budget left over
	// the tenants (at most the simulator's default, at least
	// minWindowLatencies), a uniform sample of its requests beyond that
	// (docs/simulator.md, Ground truth). A run that keeps less than half
	// of it keeps every latency of any step with fewer than 2^26/(2 x
	// tenants) requests a tenant; an hour of eight-gpu-hot keeps 10.3
	// million.
	maxRunLatencies = 1 << 26
	// minWindowLatencies is the least a window keeps a tenant once the
	// budget is spent: maxSeriesRows of them are 256 MiB more at the most.
	minWindowLatencies = 16
)

// runSteps is the number of steps of a run of dur at step on sc; an error
// when the run's series would be over maxSeriesRows, naming --step where
// it is a flag (not fixed).
func runSteps(sc *sim.Scenario, dur, step time.Duration, fixed bool) (int64, error) {
	steps := int64(dur / step)
	if dur%step != 0 {
		steps++
	}
	if most := maxRunSteps(len(sc.Tenants), len(sc.GPUs)); steps > most {
		at, advice := "at --step", "shorten --duration (default: the scenario's duration) or lengthen --step"
		if fixed {
			at, advice = "at the step of", "shorten --duration (default: the scenario's duration)"
		}
		return 0, fmt.Errorf("--duration %v %s %v is %d steps of %d tenants and %d GPUs: a run's series holds at most %d rows (steps x (tenants + GPUs + %d a step)), this one %d steps at the most; %s",
			dur, at, step, steps, len(sc.Tenants), len(sc.GPUs), maxSeriesRows, stepRows, most, advice)
	}
	return steps, nil
}

// maxRunSteps is the most steps a run of tenants and gpus may have: a step
// costs a row each and stepRows of its own.
func maxRunSteps(tenants, gpus int) int64 {
	return maxSeriesRows / int64(tenants+gpus+stepRows)
}

// windowLatencies is what a window may keep per tenant, of tenants, with
// left of the run's budget of latencies.
func windowLatencies(left int64, tenants int) int {
	n := left / int64(max(tenants, 1))
	return int(min(max(n, minWindowLatencies), sim.DefaultWindowLatencies))
}

// recording adds each step's applied changes and window to a recorder on
// a goroutine of its own, in the order the steps give them: the recorder
// keeps up with the run beside it instead of after each step.
type recording struct {
	steps chan recordedStep
	done  chan struct{}
}

// recordedStep is what one step gives the recorder.
type recordedStep struct {
	changes []report.Change
	w       sim.WindowStats
}

// startRecording starts adding steps to r, handing each window's
// latency slices back to s once recorded.
func startRecording(r *report.Recorder, s *sim.Simulator) *recording {
	steps, done := make(chan recordedStep, 64), make(chan struct{})
	go func() {
		defer close(done)
		for st := range steps {
			for _, c := range st.changes {
				r.AddChange(c)
			}
			r.Add(st.w)
			s.ReuseLatencies(&st.w)
		}
	}()
	return &recording{steps: steps, done: done}
}

// add hands a step's changes and window (which the caller no longer
// touches, its latencies sorted or not) to the recorder.
func (rec *recording) add(changes []report.Change, w sim.WindowStats) {
	rec.steps <- recordedStep{changes, w}
}

// wait returns once every step handed over is recorded; no step may be
// added after it.
func (rec *recording) wait() {
	close(rec.steps)
	<-rec.done
}
