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
)

// Parameters by name, for the flags that set them (vgpusim's
// --autotune.param, the exporter's --tuner.autotune-param): a parameter's
// name is its Params field's in snake case (PauseStepMax: pause_step_max).

// paramFractions are the parameters that are shares of a GPU or of a
// period, or parts of a way: at most 1.
var paramFractions = map[string]bool{
	"DeepSlackRatio": true, "StepMin": true, "StepMax": true, "Release": true, "ReleaseFloor": true,
	"PowerFraction": true, "EnergyStep": true, "EnergyFloor": true,
	"PauseMax": true, "PauseStepMin": true, "PauseStepMax": true, "PauseRelease": true,
	"PauseAheadRelease": true, "PauseHandOver": true,
}

// paramPositive are the shares that may not be 0: a power limit or a
// clock floor of nothing.
var paramPositive = map[string]bool{"PowerFraction": true, "EnergyFloor": true}

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
	case paramPositive[f.Name] && x == 0:
		return fmt.Errorf("%s is a share above 0 and at most 1, not %q", name, value)
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
	if q.StepMin > q.StepMax {
		errs = append(errs, fmt.Errorf("step_min %g is above step_max %g", q.StepMin, q.StepMax))
	}
	if q.PauseStepMin > q.PauseStepMax {
		errs = append(errs, fmt.Errorf("pause_step_min %g is above pause_step_max %g", q.PauseStepMin, q.PauseStepMax))
	}
	if q.SlackBurn > q.ViolateBurn {
		errs = append(errs, fmt.Errorf("slack_burn %g is above violate_burn %g", q.SlackBurn, q.ViolateBurn))
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
