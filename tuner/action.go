package tuner

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Value is a typed knob setting. Distance measures how far apart two
// values of the same kind are, on a 0-1 scale where the knob allows it
// (fractions, levels, clock and power ranges relative to their span), so
// that a guard can judge the size of a change. Values of different kinds
// are at distance 1.
type Value interface {
	Kind() string
	String() string
	Distance(Value) float64
}

// Fraction is an MPS active-thread fraction (0-1].
type Fraction float64

// Kind returns "fraction".
func (Fraction) Kind() string { return "fraction" }

// String renders the fraction as a percentage.
func (f Fraction) String() string { return percent(float64(f)) }

// Distance is the absolute difference of two fractions.
func (f Fraction) Distance(o Value) float64 {
	g, ok := o.(Fraction)
	if !ok {
		return 1
	}
	return math.Abs(float64(f) - float64(g))
}

// Level is a compute time-slice level.
type Level gpu.TimeSliceLevel

// levelOrder places the time-slice levels on a line (short to long).
var levelOrder = map[gpu.TimeSliceLevel]int{gpu.TimeSliceShort: 0, gpu.TimeSliceDefault: 1, gpu.TimeSliceMedium: 2, gpu.TimeSliceLong: 3}

// Kind returns "timeslice".
func (Level) Kind() string { return "timeslice" }

func (l Level) String() string { return string(l) }

// Distance is the number of level steps between two levels, over 3.
func (l Level) Distance(o Value) float64 {
	m, ok := o.(Level)
	if !ok {
		return 1
	}
	return math.Abs(float64(levelOrder[gpu.TimeSliceLevel(l)]-levelOrder[gpu.TimeSliceLevel(m)])) / 3
}

// ClockRange is a locked SM clock range; the zero value is "not locked".
type ClockRange gpu.ClockLock

// clockSpanMHz is the clock span distances are measured against (the
// range of a Hopper GPU's SM clock).
const clockSpanMHz = 2000.0

// Kind returns "clocks".
func (ClockRange) Kind() string { return "clocks" }

func (c ClockRange) String() string {
	if c.MinMHz == 0 && c.MaxMHz == 0 {
		return "unlocked"
	}
	return fmt.Sprintf("%d-%dMHz", c.MinMHz, c.MaxMHz)
}

// Distance is the larger move of either end, over the clock span; an
// unlocked range counts as the full span.
func (c ClockRange) Distance(o Value) float64 {
	d, ok := o.(ClockRange)
	if !ok {
		return 1
	}
	if (c == ClockRange{}) != (d == ClockRange{}) {
		return 1
	}
	return math.Max(math.Abs(float64(c.MinMHz)-float64(d.MinMHz)), math.Abs(float64(c.MaxMHz)-float64(d.MaxMHz))) / clockSpanMHz
}

// Watts is a power limit; 0 is the default limit.
type Watts float64

// wattsSpan is the power span distances are measured against.
const wattsSpan = 700.0

// Kind returns "watts".
func (Watts) Kind() string { return "watts" }

func (w Watts) String() string {
	if w == 0 {
		return "default"
	}
	return strconv.FormatFloat(float64(w), 'f', 0, 64) + "W"
}

// Distance is the difference over a 700 W span; to or from the default
// counts as 1.
func (w Watts) Distance(o Value) float64 {
	v, ok := o.(Watts)
	if !ok || (w == 0) != (v == 0) {
		return 1
	}
	return math.Abs(float64(w)-float64(v)) / wattsSpan
}

// Duty is a tenant's pause duty: the fraction (0-1) of each period its
// processes are paused (gpu.PauseActuator). 0 is "never paused".
type Duty float64

// Kind returns "duty".
func (Duty) Kind() string { return "duty" }

// String renders the duty as a percentage.
func (d Duty) String() string { return percent(float64(d)) }

// Distance is the absolute difference of two duties.
func (d Duty) Distance(o Value) float64 {
	e, ok := o.(Duty)
	if !ok {
		return 1
	}
	return math.Abs(float64(d) - float64(e))
}

// Scheduler is a vGPU host's scheduler state, whole: the policy and, with
// adaptive round robin (ARR, best-effort only) on, its average factor and
// frequency, with it off the time slice (0: the driver's default). A
// restore sets all of it back, so that an original is never set back as
// its policy alone (an operator's ARR, or custom time slice, lost).
type Scheduler struct {
	Policy    gpu.VGPUPolicy
	ARR       bool
	TimeSlice time.Duration // ARR off
	AvgFactor uint32        // ARR on
	Frequency uint32        // ARR on, Hz; 0: the driver's default
	// PolicyOnly: the policy alone is known, the rest not (an original
	// journaled by an earlier version, which kept the policy alone): set
	// back, the rest goes to the driver's defaults, and compared, the
	// policy alone tells.
	PolicyOnly bool
}

// SchedulerOf is the scheduler state a device reads: the parameters that
// apply to its ARR mode alone (with ARR on, the time slice NVML reads is
// one period of the frequency; with it off, no average factor or
// frequency applies).
func SchedulerOf(s *gpu.VGPUScheduler) Scheduler {
	v := Scheduler{Policy: s.Policy, ARR: s.ARREnabled}
	if s.ARREnabled {
		v.AvgFactor, v.Frequency = s.AvgFactor, s.Frequency
	} else {
		v.TimeSlice = s.TimeSlice
	}
	return v
}

// WithPolicy is s under the policy p, the rest kept where it applies: the
// time slice with ARR off; ARR, which applies to best-effort alone, off
// (its time slice not known: the driver's default).
func (s Scheduler) WithPolicy(p gpu.VGPUPolicy) Scheduler {
	w := Scheduler{Policy: p}
	if !s.ARR && !s.PolicyOnly {
		w.TimeSlice = s.TimeSlice
	}
	return w
}

// Setting is the scheduler state s as the actuator sets it.
func (s Scheduler) Setting() gpu.VGPUSchedulerSetting {
	s = s.canonical()
	return gpu.VGPUSchedulerSetting{Policy: s.Policy, ARREnabled: s.ARR, TimeSlice: s.TimeSlice, AvgFactor: s.AvgFactor, Frequency: s.Frequency}
}

// canonical is s with only the parameters its ARR mode applies.
func (s Scheduler) canonical() Scheduler {
	switch {
	case s.PolicyOnly:
		return Scheduler{Policy: s.Policy, PolicyOnly: true}
	case s.ARR:
		s.TimeSlice = 0
	default:
		s.AvgFactor, s.Frequency = 0, 0
	}
	return s
}

// readsAs reports whether the reading r shows s in force: a parameter s
// leaves to the driver's default (0) reads as the default, whatever it is.
func (s Scheduler) readsAs(r Scheduler) bool {
	s, r = s.canonical(), r.canonical()
	if s.TimeSlice == 0 {
		r.TimeSlice = 0
	}
	if s.AvgFactor == 0 {
		r.AvgFactor = 0
	}
	if s.Frequency == 0 {
		r.Frequency = 0
	}
	return s.Distance(r) == 0
}

// Kind returns "vgpu_policy".
func (Scheduler) Kind() string { return "vgpu_policy" }

// String is the policy, then the ARR parameters or a time slice set.
func (s Scheduler) String() string {
	s = s.canonical()
	switch {
	case s.PolicyOnly:
		return string(s.Policy) + " (policy alone known)"
	case s.ARR:
		return fmt.Sprintf("%s, ARR (average factor %d, %d Hz)", s.Policy, s.AvgFactor, s.Frequency)
	case s.TimeSlice != 0:
		return fmt.Sprintf("%s, time slice %v", s.Policy, s.TimeSlice)
	}
	return string(s.Policy)
}

// Distance is 0 for the same state (the same policy, where either is
// known by its policy alone), 1 otherwise.
func (s Scheduler) Distance(o Value) float64 {
	t, ok := o.(Scheduler)
	switch {
	case !ok || t.Policy != s.Policy:
		return 1
	case s.PolicyOnly || t.PolicyOnly || s.canonical() == t.canonical():
		return 0
	}
	return 1
}

// warnPolicyOnly says, for an original of the vGPU scheduler known by its
// policy alone (Scheduler.PolicyOnly), that its restore sets the policy
// alone back.
func warnPolicyOnly(l log.Logger, o Original) {
	if s, ok := o.Value.(Scheduler); ok && s.PolicyOnly {
		level.Warn(l).Log("msg", "tuner journal holds a vGPU scheduler original an earlier version journaled by its policy alone: its restore sets that policy back, with adaptive round robin, the time slice, the average factor and the frequency at the driver's defaults, not as they were",
			"target", o.Target.String(), "policy", s.Policy)
	}
}

// Placement is the GPU (UUID) a tenant's process runs on.
type Placement string

// Kind returns "placement".
func (Placement) Kind() string { return "placement" }

func (p Placement) String() string { return string(p) }

// Distance is 0 for the same GPU, else 1.
func (p Placement) Distance(o Value) float64 {
	if q, ok := o.(Placement); ok && q == p {
		return 0
	}
	return 1
}

// encodedValue is a Value in the journal.
type encodedValue struct {
	Kind  string  `json:"kind"`
	Num   float64 `json:"num,omitempty"`
	Text  string  `json:"text,omitempty"`
	MinHz uint32  `json:"min_mhz,omitempty"`
	MaxHz uint32  `json:"max_mhz,omitempty"`
	// Sched is a vGPU scheduler's state beyond its policy (Text): absent
	// from one an earlier version journaled, which kept the policy alone
	// (and ignores it when read).
	Sched *encodedScheduler `json:"sched,omitempty"`
}

// encodedScheduler is a Scheduler's state beyond its policy.
type encodedScheduler struct {
	ARR         bool   `json:"arr,omitempty"`
	TimeSliceNs int64  `json:"time_slice_ns,omitempty"`
	AvgFactor   uint32 `json:"avg_factor,omitempty"`
	FrequencyHz uint32 `json:"frequency_hz,omitempty"`
}

func encodeValue(v Value) *encodedValue {
	switch x := v.(type) {
	case nil:
		return nil
	case Fraction:
		return &encodedValue{Kind: x.Kind(), Num: float64(x)}
	case Watts:
		return &encodedValue{Kind: x.Kind(), Num: float64(x)}
	case Duty:
		return &encodedValue{Kind: x.Kind(), Num: float64(x)}
	case Level:
		return &encodedValue{Kind: x.Kind(), Text: string(x)}
	case Scheduler:
		e := &encodedValue{Kind: x.Kind(), Text: string(x.Policy)}
		if x = x.canonical(); !x.PolicyOnly {
			e.Sched = &encodedScheduler{ARR: x.ARR, TimeSliceNs: int64(x.TimeSlice), AvgFactor: x.AvgFactor, FrequencyHz: x.Frequency}
		}
		return e
	case ClockRange:
		return &encodedValue{Kind: x.Kind(), MinHz: x.MinMHz, MaxHz: x.MaxMHz}
	case Layout:
		return &encodedValue{Kind: x.Kind(), Text: string(x)}
	}
	return &encodedValue{Kind: v.Kind(), Text: v.String()}
}

func (e *encodedValue) decode() (Value, error) {
	if e == nil {
		return nil, nil
	}
	if e.Sched != nil && e.Kind != (Scheduler{}).Kind() {
		return nil, fmt.Errorf("%s value with a vGPU scheduler's state", e.Kind)
	}
	switch e.Kind {
	case Fraction(0).Kind():
		return Fraction(e.Num), nil
	case Watts(0).Kind():
		return Watts(e.Num), nil
	case Duty(0).Kind():
		return Duty(e.Num), nil
	case Level("").Kind():
		return Level(e.Text), nil
	case Scheduler{}.Kind():
		if e.Sched == nil {
			return Scheduler{Policy: gpu.VGPUPolicy(e.Text), PolicyOnly: true}, nil
		}
		x := e.Sched
		if x.TimeSliceNs < 0 || x.TimeSliceNs > int64(maxJournalTimeSlice) {
			return nil, fmt.Errorf("%s value's time slice %dns out of range", e.Kind, x.TimeSliceNs)
		}
		s := Scheduler{Policy: gpu.VGPUPolicy(e.Text), ARR: x.ARR, TimeSlice: time.Duration(x.TimeSliceNs), AvgFactor: x.AvgFactor, Frequency: x.FrequencyHz}
		return s.canonical(), nil // (written again as read: a compaction keeps it)
	case ClockRange{}.Kind():
		return ClockRange{MinMHz: e.MinHz, MaxMHz: e.MaxHz}, nil
	case Placement("").Kind():
		return Placement(e.Text), nil
	case Layout("").Kind():
		return Layout(e.Text), nil
	case Running{}.Kind():
		if e.Text != (Running{}).String() {
			return nil, fmt.Errorf("process value %q is not %q", e.Text, Running{}.String())
		}
		return Running{}, nil
	}
	return nil, fmt.Errorf("unknown value kind %q", e.Kind)
}

// Target names what one action changes: a GPU's knob, or a process's
// knob on it (MPS).
type Target struct {
	GPU  string   `json:"gpu"` // device UUID
	Knob gpu.Knob `json:"knob"`
	PID  uint32   `json:"pid,omitempty"`
}

func (t Target) String() string {
	s := t.GPU + "/" + string(t.Knob)
	if t.PID != 0 {
		s += "/pid" + strconv.FormatUint(uint64(t.PID), 10)
	}
	return s
}

// DomainKey is the GPU and knob a guard's dwell and rate apply to.
func (t Target) DomainKey() string { return t.GPU + "/" + string(t.Knob) }

// Action is one change a policy wants: a knob of a GPU (and process)
// from its current value to a target value, with the reason.
type Action struct {
	Target
	GPUIndex int
	Tenant   string // "" for a device-wide knob
	Class    gpu.TenantClass
	Current  Value // nil when unknown
	Want     Value
	// PIDs are every process of the tenant, for a knob set on the tenant
	// as a whole (pause_duty: all of them paused together or none); the
	// target's PID is the first of them, which names the tenant's setting
	// in the journal.
	PIDs []uint32
	// Restart asks for the MPS client to be restarted after the change, so
	// that it takes effect (MPS applies a fraction to new contexts only).
	Restart bool
	// Revert marks an action that undoes an earlier change.
	Revert bool
	// HoldLeft: once applied, the value left (Current) is held by the
	// revert_hold guard as one that did not work (with Revert, a policy's
	// own step back).
	HoldLeft bool
	// Relax marks a change that gives protection away (a cap on a batch
	// tenant raised, a power limit lowered): its effect is judged after
	// Options.RevertAfter, and it is reverted when it made things worse.
	Relax  bool
	Reason string
	// Plan is the rebalancing plan the action stands for (its first move,
	// else its first MIG layout): the executor applies the whole plan.
	Plan *gpu.Plan
	// Held, when set, says why the policy holds the action back this
	// round (State.HoldWaiting: the knob's dwell): the engine neither
	// guards, journals nor applies it, and the GPU's round gives it as
	// the holding reason.
	Held string
}

// Budgeted reports whether the action counts against the fast loop's
// budgets (the cap per interval and the rate): a revert does not, nor does
// a rebalancing plan, which the slow loop's own cool-down spaces out.
func (a Action) Budgeted() bool { return !a.Revert && a.Plan == nil }

// Size is the distance from Current to Want (1 when Current is unknown).
func (a Action) Size() float64 {
	if a.Current == nil {
		return 1
	}
	return a.Want.Distance(a.Current)
}

func (a Action) String() string {
	cur := "?"
	if a.Current != nil {
		cur = a.Current.String()
	}
	who := a.Target.String()
	if a.Tenant != "" {
		who += " (" + a.Tenant + ")"
	}
	return fmt.Sprintf("%s: %s -> %s (%s)", who, cur, a.Want, a.Reason)
}

// joinReasons joins non-empty reasons with "; ".
func joinReasons(rs ...string) string {
	var out []string
	for _, r := range rs {
		if r != "" {
			out = append(out, r)
		}
	}
	return strings.Join(out, "; ")
}

// Order is the level's place on the line of levelOrder (short 0 to long 3).
func (l Level) Order() int { return levelOrder[gpu.TimeSliceLevel(l)] }

// percent renders a fraction as a percentage with at most one decimal.
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
