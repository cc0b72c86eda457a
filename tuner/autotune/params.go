package autotune

import (
	"errors"
	"fmt"
	"math"
	"reflect"
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

// paramFractions are the parameters that are shares of a GPU, of a
// period or of a target, or parts of a way: at most 1.
var paramFractions = map[string]bool{
	"SlackRatio": true, "DeepSlackRatio": true, "StepMin": true, "StepMax": true, "Release": true, "ReleaseFloor": true,
	"PowerFraction": true, "EnergyStep": true, "EnergyFloor": true, "TrialGain": true,
	"PauseMax": true, "PauseStepMin": true, "PauseStepMax": true, "PauseRelease": true,
	"PauseAheadRelease": true, "PauseHandOver": true,
}

// paramLeast are the least values of the parameters that have one above
// 0 (a pause or clock step under 1% rounds to nothing, a window of no
// requests is not judged, p99/p50 is never under 1); paramAbove the values
// a parameter must exceed (a power limit or clock floor of nothing, a
// "rise" that is none), paramBelow those it must stay under (a trial that
// must be more than all better), paramMost the greatest (the engine's
// ceiling on a pause).
var (
	paramLeast = map[string]float64{"MinRequests": 1, "PauseRelease": 0.01, "PauseAheadRelease": 0.01, "PauseStepMin": 0.01,
		"EnergyStep": 0.01, "VarianceRatio": 1}
	paramAbove = map[string]float64{"PowerFraction": 0, "EnergyFloor": 0, "PauseRise": 1}
	paramBelow = map[string]float64{"TrialGain": 1}
	paramMost  = map[string]float64{"PauseMax": tuner.MaxPauseDuty}
)

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
	switch {
	case err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0:
		return fmt.Errorf("%s takes a finite number not below 0, not %q", name, value)
	case paramFractions[f.Name] && x > 1:
		return fmt.Errorf("%s is a share, between 0 and 1, not %q", name, value)
	}
	if least, ok := paramLeast[f.Name]; ok && x < least {
		return fmt.Errorf("%s takes at least %g, not %q", name, least, value)
	}
	if above, ok := paramAbove[f.Name]; ok && x <= above {
		return fmt.Errorf("%s takes more than %g, not %q", name, above, value)
	}
	if below, ok := paramBelow[f.Name]; ok && x >= below {
		return fmt.Errorf("%s takes less than %g, not %q", name, below, value)
	}
	if most, ok := paramMost[f.Name]; ok && x > most {
		return fmt.Errorf("%s takes at most %g (the engine's ceiling on a pause), not %q", name, most, value)
	}
	v.SetFloat(x)
	return nil
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
