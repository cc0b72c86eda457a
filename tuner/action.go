package tuner

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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

// Scheduler is a vGPU scheduler policy.
type Scheduler gpu.VGPUPolicy

// Kind returns "vgpu_policy".
func (Scheduler) Kind() string { return "vgpu_policy" }

func (s Scheduler) String() string { return string(s) }

// Distance is 0 for the same policy, 1 otherwise.
func (s Scheduler) Distance(o Value) float64 {
	if t, ok := o.(Scheduler); ok && t == s {
		return 0
	}
	return 1
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
		return &encodedValue{Kind: x.Kind(), Text: string(x)}
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
	switch e.Kind {
	case Fraction(0).Kind():
		return Fraction(e.Num), nil
	case Watts(0).Kind():
		return Watts(e.Num), nil
	case Duty(0).Kind():
		return Duty(e.Num), nil
	case Level("").Kind():
		return Level(e.Text), nil
	case Scheduler("").Kind():
		return Scheduler(e.Text), nil
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
