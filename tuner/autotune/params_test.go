package autotune

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParamsSet(t *testing.T) {
	for _, tc := range []struct {
		specs []string
		want  func(*Params) // the defaults changed as the specs say; nil: an error
		err   string
	}{
		{[]string{"pause_step_max=0.5", "pause_gain=0.15"}, func(p *Params) { p.PauseStepMax, p.PauseGain = 0.5, 0.15 }, ""},
		{[]string{" pause_window = 30s "}, func(p *Params) { p.PauseWindow = 30 * time.Second }, ""},
		{[]string{"min_requests=50", "violate_burn=2"}, func(p *Params) { p.MinRequests, p.ViolateBurn = 50, 2 }, ""},
		{[]string{"pause_max=0"}, func(p *Params) { p.PauseMax = 0 }, ""},
		{[]string{"pause_gan=0.1"}, nil, `unknown parameter "pause_gan" (names: costly_restart,`},
		{[]string{"pause_gain"}, nil, `"pause_gain" is not NAME=VALUE`},
		{[]string{"=1"}, nil, "is not NAME=VALUE"},
		{[]string{"pause_gain="}, nil, "is not NAME=VALUE"},
		{[]string{"pause_gain=x"}, nil, `pause_gain takes a finite number not below 0, not "x"`},
		{[]string{"pause_gain=-0.1"}, nil, "pause_gain takes a finite number not below 0"},
		{[]string{"pause_gain=NaN"}, nil, "pause_gain takes a finite number"},
		{[]string{"gain=+Inf"}, nil, "gain takes a finite number"},
		{[]string{"pause_max=1.5"}, nil, `pause_max is a share, between 0 and 1, not "1.5"`},
		{[]string{"power_fraction=0"}, nil, `power_fraction takes more than 0, not "0"`},
		{[]string{"energy_floor=0.0"}, nil, "energy_floor takes more than 0"},
		{[]string{"min_requests=0.5"}, nil, `min_requests takes at least 1, not "0.5"`},
		{[]string{"pause_release=0.004"}, nil, "pause_release takes at least 0.01"},
		{[]string{"pause_ahead_release=0"}, nil, "pause_ahead_release takes at least 0.01"},
		{[]string{"pause_step_min=0"}, nil, "pause_step_min takes at least 0.01"},
		{[]string{"energy_step=0.0002"}, nil, "energy_step takes at least 0.01"},
		{[]string{"variance_ratio=0.5"}, nil, "variance_ratio takes at least 1"},
		{[]string{"pause_rise=1"}, nil, "pause_rise takes more than 1"},
		{[]string{"trial_gain=1"}, nil, "trial_gain takes less than 1"},
		{[]string{"pause_max=0.95"}, nil, "pause_max takes at most 0.9 (the engine's ceiling on a pause)"},
		{[]string{"pause_max=0.9"}, func(p *Params) { p.PauseMax = 0.9 }, ""},
		{[]string{"pause_window=41s"}, nil, "pause_window takes at most 40s"},
		{[]string{"pause_window=40s"}, func(p *Params) { p.PauseWindow = 40 * time.Second }, ""},
		{[]string{"slack_ratio=1.2"}, nil, "slack_ratio is a share"},
		{[]string{"deep_slack_ratio=0.8"}, nil, "deep_slack_ratio 0.8 is above slack_ratio 0.7"},
		{[]string{"step_max=2", "step_min=0.3"}, nil, `step_max is a share, between 0 and 1, not "2"`},
		{[]string{"pause_window=15"}, nil, `pause_window takes a positive duration such as 30s, not "15"`},
		{[]string{"slack_dwell=-1m"}, nil, "slack_dwell takes a positive duration"},
		{[]string{"pause_step_min=0.4"}, nil, "pause_step_min 0.4 is above pause_step_max 0.3"},
		{[]string{"step_max=0.01"}, nil, "step_min 0.05 is above step_max 0.01"},
		{[]string{"slack_burn=2"}, nil, "slack_burn 2 is above violate_burn 1"},
		{[]string{"pause_gain=0.2", "bogus=1", "pause_max=2"}, nil, `unknown parameter "bogus"`},
	} {
		t.Run(strings.Join(tc.specs, ","), func(t *testing.T) {
			p := DefaultParams()
			err := p.SetAll(tc.specs)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if !reflect.DeepEqual(p, DefaultParams()) {
					t.Errorf("params changed by a refused set: %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultParams()
			tc.want(&want)
			if !reflect.DeepEqual(p, want) {
				t.Errorf("params %+v, want %+v", p, want)
			}
		})
	}
}

// Every field of Params has a name of its own that sets it, and the shares
// the setter bounds at 1 are fields.
func TestParamNamesCoverFields(t *testing.T) {
	names := ParamNames()
	if n := reflect.TypeFor[Params]().NumField(); len(names) != n {
		t.Fatalf("%d names for %d fields", len(names), n)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			t.Errorf("name %q twice", name)
		}
		seen[name] = true
		f, ok := paramField(name)
		if !ok {
			t.Fatalf("%q names no field", name)
		}
		values := []string{"0.02", "0.5", "1.25"}
		if f.Type == reflect.TypeFor[time.Duration]() {
			values = []string{"7s"}
		}
		changed := false
		for _, value := range values {
			p := DefaultParams()
			if err := p.Set(name + "=" + value); err == nil && !reflect.DeepEqual(p, DefaultParams()) {
				changed = true
				break
			}
		}
		if !changed {
			t.Errorf("%s: none of %v set it", name, values)
		}
	}
	for field, bs := range paramBounds {
		if f, ok := reflect.TypeFor[Params]().FieldByName(field); !ok || f.Type.Kind() != reflect.Float64 {
			t.Errorf("bounds of %q, no number field", field)
		}
		if len(bs) == 0 {
			t.Errorf("%q: an entry without bounds", field)
		}
	}
	// the defaults are inside every bound
	v := reflect.ValueOf(DefaultParams())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		value := fmt.Sprint(v.Field(i).Interface())
		if x, ok := v.Field(i).Interface().(float64); ok {
			value = strconv.FormatFloat(x, 'g', -1, 64)
		}
		p := DefaultParams()
		if err := p.Set(snake(f.Name) + "=" + value); err != nil {
			t.Errorf("the default of %s is refused: %v", f.Name, err)
		}
	}
}

// Whatever the flag says, setting never panics, and leaves the
// parameters as they were or with the one named set to a value it
// takes.
func FuzzParamsSet(f *testing.F) {
	for _, s := range []string{"pause_gain=0.15", "pause_window=30s", "pause_max=1.5", "x", "=", "gain=NaN", "slack_dwell=-1h", "min_requests=1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p := DefaultParams()
		if err := p.SetAll([]string{spec}); err != nil {
			if !reflect.DeepEqual(p, DefaultParams()) {
				t.Fatalf("%q refused (%v) but changed the params", spec, err)
			}
			return
		}
		v := reflect.ValueOf(p)
		for i := range v.NumField() {
			switch x := v.Field(i).Interface().(type) {
			case float64:
				if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%q set %s to %v", spec, v.Type().Field(i).Name, x)
				}
			case time.Duration:
				if x <= 0 {
					t.Fatalf("%q set %s to %v", spec, v.Type().Field(i).Name, x)
				}
			}
		}
	})
}

// docs/tuning-parameters.md's table names every parameter.
func TestParamsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/tuning-parameters.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(doc)
	rows := map[string]string{} // a parameter's table row
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, f := range strings.Split(first, "`") {
			if name := strings.TrimSpace(f); name != "" && !strings.ContainsAny(name, " ,()") {
				rows[name] = first
			}
		}
	}
	for _, name := range ParamNames() {
		row, ok := rows[name]
		if !ok {
			t.Errorf("docs/tuning-parameters.md: no row names %s", name)
			continue
		}
		f, _ := paramField(name)
		if isShare(f.Name) && !strings.Contains(row, "share") {
			t.Errorf("docs/tuning-parameters.md: %s is a share, its row does not say so", name)
		}
	}
}

// The parameters named again after an earlier spec, one for each repeat;
// a spec that is no NAME=VALUE is not one.
func TestRepeatedParams(t *testing.T) {
	for _, c := range []struct {
		specs, want []string
	}{
		{nil, nil},
		{[]string{"gain=1", "pause_max=0.5"}, nil},
		{[]string{"gain=1", " gain = 2"}, []string{"gain"}},
		{[]string{"gain=1", "gain=2", "step_min=0.1", "gain=3"}, []string{"gain", "gain"}},
		{[]string{"gain", "gain"}, nil},
	} {
		if got := RepeatedParams(c.specs); !slices.Equal(got, c.want) {
			t.Errorf("RepeatedParams(%q) = %q, want %q", c.specs, got, c.want)
		}
	}
}
