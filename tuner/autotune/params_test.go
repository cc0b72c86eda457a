package autotune

import (
	"math"
	"os"
	"reflect"
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
		{[]string{"power_fraction=0"}, nil, `power_fraction is a share above 0 and at most 1, not "0"`},
		{[]string{"energy_floor=0.0"}, nil, "energy_floor is a share above 0"},
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
		p := DefaultParams()
		value := "0.01"
		if f.Type == reflect.TypeFor[time.Duration]() {
			value = "7s"
		}
		if err := p.Set(name + "=" + value); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if reflect.DeepEqual(p, DefaultParams()) {
			t.Errorf("%s=%s changed nothing", name, value)
		}
	}
	for field := range paramFractions {
		if _, ok := reflect.TypeFor[Params]().FieldByName(field); !ok {
			t.Errorf("share %q is no field", field)
		}
	}
	for field := range paramPositive {
		if !paramFractions[field] {
			t.Errorf("%q must be above 0 but is no share", field)
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

// docs/tuning.md's table of parameters names every parameter.
func TestParamsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/tuning.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Parameters\n")
	if !ok {
		t.Fatal(`docs/tuning.md has no "## Parameters" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	for _, name := range ParamNames() {
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("docs/tuning.md, Parameters: no row names %s", name)
		}
	}
}
