package flagvalue

import (
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// TestErrorsNameTheFlag: each value's parse error names its flag and the
// value given; a good value is set.
func TestErrorsNameTheFlag(t *testing.T) {
	var (
		d     time.Duration
		n     int64
		e     string
		price *float64
	)
	app := kingpin.New("t", "")
	app.Terminate(nil)
	Duration(app, "interval", "", "1s", &d)
	Int64(app, "limit", "", "0", &n)
	Enum(app, "mode", "", "off", &e, "off", "on")
	app.Flag("price", "").SetValue(FloatPtr{Name: "price", P: &price})

	for _, tc := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"--interval=2m", "--limit=0x10", "--mode=on", "--price=2.5"}, ""},
		{[]string{"--interval=2"}, `--interval: "2" is not a duration`},
		{[]string{"--limit=ten"}, `--limit: "ten" is not an integer`},
		{[]string{"--mode=auto"}, `--mode: "auto" is not one of off, on`},
		{[]string{"--price=cheap"}, `--price: "cheap" is not a number`},
	} {
		d, n, e, price = 0, 0, "", nil
		_, err := app.Parse(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want == "" && (d != 2*time.Minute || n != 16 || e != "on" || price == nil || *price != 2.5):
			t.Errorf("%v: got %v %d %q %v", tc.args, d, n, e, price)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	var unset *float64
	if s := (FloatPtr{Name: "x", P: &unset}).String(); s != "" {
		t.Errorf("unset FloatPtr prints %q", s)
	}
}

// TestEachOf: a repeatable flag of allowed values keeps each given, in
// order, and names the flag and the value for one not allowed.
func TestEachOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		err  string
	}{
		{[]string{"--knob=a", "--knob=c"}, []string{"a", "c"}, ""},
		{nil, nil, ""},
		{[]string{"--knob=a", "--knob=b"}, nil, `--knob: "b" is not one of a, c`},
	} {
		var got []string
		app := kingpin.New("t", "")
		app.Terminate(nil)
		app.Flag("knob", "").SetValue(EachOf("knob", &got, "a", "c"))
		_, err := app.Parse(tc.args)
		switch {
		case tc.err == "" && (err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ")):
			t.Errorf("%v: got %q, %v; want %q", tc.args, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
	}
}
