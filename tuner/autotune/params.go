package autotune

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Parameters by name, for the flags that set them (vgpusim's
// --autotune.param, the exporter's --tuner.autotune-param): a parameter's
// name is its Params field's in snake case (PauseStepMax: pause_step_max).

// paramBounds are the bounds of the number parameters beyond "finite and
// not below 0", each parameter's together: share (a share of a GPU, of a
// period or of a target, or a part of a way: at most 1), a least value
// above 0 (a pause or clock step under 1% rounds to nothing, a window of
// no requests is not judged, p99/p50 is never under 1), a value it must
// exceed (a power limit or clock floor of nothing, a "rise" that is none)
// or stay under (a trial that must be more than all better), and a
// greatest (the engine's ceiling on a pause).
var paramBounds = map[string][]bound{
	"SlackRatio": {share}, "DeepSlackRatio": {share}, "StepMin": {share}, "StepMax": {share},
	"Release": {share}, "ReleaseFloor": {share}, "PauseStepMax": {share}, "PauseHandOver": {share},
	"PowerFraction":     {share, above(0)},
	"EnergyFloor":       {share, above(0)},
	"EnergyStep":        {share, least(0.01)},
	"TrialGain":         {share, below(1)},
	"PauseMax":          {share, most(tuner.MaxPauseDuty, "the engine's ceiling on a pause")},
	"PauseStepMin":      {share, least(0.01)},
	"PauseRelease":      {share, least(0.01)},
	"PauseAheadRelease": {share, least(0.01)},
	"MinRequests":       {least(1)},
	"VarianceRatio":     {least(1)},
	"PauseRise":         {above(1)},
}

// bound is one bound of a number parameter: op is "share" (at most 1),
// ">=", ">", "<" or "<=" v; why says where a greatest comes from.
type bound struct {
	op  string
	v   float64
	why string
}

// share bounds a share: between 0 and 1.
var share = bound{op: "share"}

// least, above, below and most bound a parameter by v: at least v, more
// than v, less than v, at most v (for the reason why).
func least(v float64) bound            { return bound{op: ">=", v: v} }
func above(v float64) bound            { return bound{op: ">", v: v} }
func below(v float64) bound            { return bound{op: "<", v: v} }
func most(v float64, why string) bound { return bound{op: "<=", v: v, why: why} }

// check returns the error of value x (given as value) of the parameter
// name outside b, nil inside.
func (b bound) check(name string, x float64, value string) error {
	switch {
	case b.op == "share" && x > 1:
		return fmt.Errorf("%s is a share, between 0 and 1, not %q", name, value)
	case b.op == ">=" && x < b.v:
		return fmt.Errorf("%s takes at least %g, not %q", name, b.v, value)
	case b.op == ">" && x <= b.v:
		return fmt.Errorf("%s takes more than %g, not %q", name, b.v, value)
	case b.op == "<" && x >= b.v:
		return fmt.Errorf("%s takes less than %g, not %q", name, b.v, value)
	case b.op == "<=" && x > b.v:
		return fmt.Errorf("%s takes at most %g (%s), not %q", name, b.v, b.why, value)
	}
	return nil
}

// isShare says whether the parameter of field name is a share.
func isShare(name string) bool { return slices.Contains(paramBounds[name], share) }

// pauseWindowMost is the longest PauseWindow: the request trail keeps
// trailKeep, and a rise compares the window with the two before it.
const pauseWindowMost = trailKeep / 3

// snake turns a field name into its parameter name.
func snake(field string) string {
	var b strings.Builder
	for i, r := range field {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// paramField returns the field of Params a parameter name stands for.
func paramField(name string) (reflect.StructField, bool) {
	t := reflect.TypeFor[Params]()
	for i := range t.NumField() {
		if f := t.Field(i); snake(f.Name) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// ParamNames returns the names of the parameters, sorted.
func ParamNames() []string {
	t := reflect.TypeFor[Params]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		names = append(names, snake(t.Field(i).Name))
	}
	sort.Strings(names)
	return names
}

// Set sets one parameter from NAME=VALUE: a number for a number (finite,
// not negative, at most 1 for a share), a duration such as 30s for a
// duration (positive). The error names the parameter and says what it
// takes; p is unchanged on an error.
func (p *Params) Set(spec string) error {
	name, value, ok := strings.Cut(spec, "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || value == "" {
		return fmt.Errorf("%q is not NAME=VALUE (names: %s)", spec, strings.Join(ParamNames(), ", "))
	}
	f, ok := paramField(name)
	if !ok {
		return fmt.Errorf("unknown parameter %q (names: %s)", name, strings.Join(ParamNames(), ", "))
	}
	v := reflect.ValueOf(p).Elem().FieldByIndex(f.Index)
	if f.Type == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s takes a positive duration such as 30s, not %q", name, value)
		}
		if f.Name == "PauseWindow" && d > pauseWindowMost {
			return fmt.Errorf("%s takes at most %v (the request trail the fast loop keeps), not %q", name, pauseWindowMost, value)
		}
		v.SetInt(int64(d))
		return nil
	}
	if f.Type.Kind() != reflect.Float64 {
		return fmt.Errorf("%s cannot be set", name) // no such field today
	}
	x, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return fmt.Errorf("%s takes a finite number not below 0, not %q", name, value)
	}
	for _, b := range paramBounds[f.Name] {
		if err := b.check(name, x, value); err != nil {
			return err
		}
	}
	v.SetFloat(x)
	return nil
}

// RepeatedParams returns the names of the NAME=VALUE specs (as Set reads
// them) that name a parameter an earlier spec named, one for each repeat,
// in order: of two values of a parameter only the last would hold, and a
// start's or a run's settings would list both. A spec that is no
// NAME=VALUE is Set's to refuse.
func RepeatedParams(specs []string) []string {
	var names, out []string
	for _, s := range specs {
		name, _, ok := strings.Cut(s, "=")
		if !ok {
			continue
		}
		if name = strings.TrimSpace(name); slices.Contains(names, name) {
			out = append(out, name)
		}
		names = append(names, name)
	}
	return out
}

// SetAll sets every NAME=VALUE of specs in order, then checks that each
// pair of bounds is in order (a step's least at most its most); on an
// error p is unchanged.
func (p *Params) SetAll(specs []string) error {
	q := *p
	var errs []error
	for _, s := range specs {
		if err := q.Set(s); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case len(errs) > 0: // the pairs are judged on values that were set
	case q.StepMin > q.StepMax:
		errs = append(errs, fmt.Errorf("step_min %g is above step_max %g", q.StepMin, q.StepMax))
	case q.PauseStepMin > q.PauseStepMax:
		errs = append(errs, fmt.Errorf("pause_step_min %g is above pause_step_max %g", q.PauseStepMin, q.PauseStepMax))
	case q.SlackBurn > q.ViolateBurn:
		errs = append(errs, fmt.Errorf("slack_burn %g is above violate_burn %g", q.SlackBurn, q.ViolateBurn))
	case q.DeepSlackRatio > q.SlackRatio:
		errs = append(errs, fmt.Errorf("deep_slack_ratio %g is above slack_ratio %g", q.DeepSlackRatio, q.SlackRatio))
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	*p = q
	return nil
}
