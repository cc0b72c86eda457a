package main

import (
	"slices"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// joinNegativeValues joins a negative number or duration, or a lone '-',
// to the flag before it when that flag takes a value, and nothing else.
func TestJoinNegativeValues(t *testing.T) {
	app := kingpin.New("t", "")
	run := app.Command("run", "")
	run.Flag("seed", "").String()
	run.Flag("slack", "").Bool()
	for _, c := range []struct{ args, want []string }{
		{[]string{"run", "--seed", "-3"}, []string{"run", "--seed=-3"}},
		{[]string{"run", "--seed", "-.5"}, []string{"run", "--seed=-.5"}},
		{[]string{"run", "--seed=-3"}, []string{"run", "--seed=-3"}},
		{[]string{"run", "--seed", "-x"}, []string{"run", "--seed", "-x"}},
		{[]string{"run", "--seed", "-"}, []string{"run", "--seed=-"}},
		{[]string{"run", "--slack", "-"}, []string{"run", "--slack", "-"}},
		{[]string{"run", "--slack", "-3"}, []string{"run", "--slack", "-3"}},
		{[]string{"run", "--seed"}, []string{"run", "--seed"}},
		{[]string{"run", "--", "--seed", "-3"}, []string{"run", "--", "--seed", "-3"}},
		{[]string{"--seed", "-3", "--seed", "-4"}, []string{"--seed=-3", "--seed=-4"}},
	} {
		if got := joinNegativeValues(app, c.args); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.args, got, c.want)
		}
	}
}
