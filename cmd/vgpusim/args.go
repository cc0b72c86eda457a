package main

import (
	"strings"

	"github.com/alecthomas/kingpin/v2"
)

// joinNegativeValues returns args with each "--flag -N" of a flag that
// takes a value, N starting with a digit or a point ("--seed -3",
// "--duration -5m"), written "--flag=-N": kingpin reads any argument
// that starts with '-' as a flag, and would answer "expected argument
// for flag '--seed'" for a value that was given, where the flag's own
// check names what is wrong with it. A lone "-" is joined too: kingpin
// gave the flag "" for it, so that "--tenants -" ran with the scenario's
// companion as if the flag were not there. No flag of vgpusim is a '-'
// and a digit, or a lone '-', so nothing else is read differently.
// Arguments after "--" are left alone.
func joinNegativeValues(app *kingpin.Application, args []string) []string {
	takesValue := map[string]bool{}
	m := app.Model()
	add := func(g *kingpin.FlagGroupModel) {
		for _, f := range g.Flags {
			if !f.IsBoolFlag() {
				takesValue["--"+f.Name] = true
			}
		}
	}
	add(m.FlagGroupModel)
	var cmds func(cs []*kingpin.CmdModel)
	cmds = func(cs []*kingpin.CmdModel) {
		for _, c := range cs {
			add(c.FlagGroupModel)
			cmds(c.Commands)
		}
	}
	cmds(m.Commands)
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if takesValue[a] && i+1 < len(args) && looksNegative(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// looksNegative reports whether s is a '-' followed by a digit or a
// point (a negative number or duration), or a lone '-': never a flag.
func looksNegative(s string) bool {
	return s == "-" || len(s) >= 2 && s[0] == '-' && strings.ContainsRune("0123456789.", rune(s[1]))
}
