package main

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// docFlag is a row of docs/vgpusim.md's table of the run flags.
	docFlag    = regexp.MustCompile("(?m)^\\| `--([a-z][a-z0-9.-]*)` \\|([^|]*)\\|")
	backquoted = regexp.MustCompile("^`([^`]*)`$")
)

// flagModel is a usage template listing a command's flags as
// "NAME<TAB>BOOL<TAB>DEFAULT", one a line, from kingpin's model of them
// (hidden ones, --help-long, left out as --help leaves them).
const flagModel = "{{range .Context.Flags}}{{if not .Hidden}}{{.Name}}\t{{.IsBoolFlag}}\t{{range $i, $d := .Default}}{{if $i}},{{end}}{{$d}}{{end}}\n{{end}}{{end}}"

// flagDefaults returns the flags of a vgpusim command (help and version
// left out), each with its default: "" for none, "true" or "false" for a
// bool flag. They come from kingpin's model, not from the layout of
// --help: a wrapped help line is no flag, a bool flag's default (which
// --help does not show) is known, and a placeholder (PlaceHolder("dir"))
// is no default.
func flagDefaults(t *testing.T, command string) map[string]string {
	t.Helper()
	defer func(old string) { usageTemplate = old }(usageTemplate)
	usageTemplate = flagModel
	code, out, stderr := vgpusim(t, false, command, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d: %s", command, code, stderr)
	}
	flags := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("%s --help: flag line %q", command, line)
		}
		name, def := f[0], f[2]
		if name == "help" || name == "version" {
			continue
		}
		if _, dup := flags[name]; dup {
			t.Fatalf("%s --help: --%s listed twice", command, name)
		}
		if f[1] == "true" && def == "" {
			def = "false"
		}
		flags[name] = def
	}
	return flags
}

// runFlagsProblems returns where doc's table of the run flags differs from
// flags (flagDefaults): a flag it lists that does not exist, one it does
// not list, a default it does not give in backquotes (`1s`), or a single
// backquoted value for a flag without one.
func runFlagsProblems(doc string, flags map[string]string) []string {
	var out, listed []string
	for _, m := range docFlag.FindAllStringSubmatch(doc, -1) {
		name, cell := m[1], strings.TrimSpace(m[2])
		listed = append(listed, name)
		def, ok := flags[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("docs/vgpusim.md lists --%s, which vgpusim run does not have", name))
		case def != "" && !strings.Contains(cell, "`"+def+"`"):
			out = append(out, fmt.Sprintf("docs/vgpusim.md: --%s defaults to %s, the flag to %q", name, cell, def))
		case def == "" && backquoted.MatchString(cell):
			out = append(out, fmt.Sprintf("docs/vgpusim.md: --%s defaults to %s, the flag to none", name, cell))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if !slices.Contains(listed, name) {
			out = append(out, fmt.Sprintf("vgpusim run --%s is not in docs/vgpusim.md's table of the run flags", name))
		}
	}
	return out
}

// TestDocsRunFlags keeps docs/vgpusim.md's table of the run flags equal to
// `vgpusim run`'s flags (runFlagsProblems), and gives each tables flag
// with a default other than true or false with it, "`--seeds` (default
// `1-3`".
func TestDocsRunFlags(t *testing.T) {
	flags := flagDefaults(t, "run")
	if len(flags) < 10 || flags["step"] != "1s" || flags["format"] != "csv" || flags["policy"] != "best-effort" ||
		flags["scenario"] != "" || flags["disable-knob"] != "" {
		t.Fatalf("run: flags read as %v", flags)
	}
	b, err := os.ReadFile("../../docs/vgpusim.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range runFlagsProblems(string(b), flags) {
		t.Error(p)
	}
	tables := flagDefaults(t, "tables")
	if tables["policy-table"] != "true" || tables["slack"] != "false" || tables["seeds"] != "1-3" {
		t.Fatalf("tables: flags read as %v", tables)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	for name, def := range tables {
		if def != "" && def != "true" && def != "false" && !strings.Contains(doc, "`--"+name+"` (default `"+def+"`") {
			t.Errorf("docs/vgpusim.md does not give tables --%s with its default, \"`--%s` (default `%s`\"", name, name, def)
		}
	}

	planted := "| `--step` | `2s` | x |\n| `--out` | `none` | x |\n| `--dry` | `true` | x |\n| `--format` | `csv` | x |\n"
	got := runFlagsProblems(planted, map[string]string{"step": "1s", "out": "", "dry": "true", "format": "csv", "new": ""})
	want := []string{"docs/vgpusim.md: --step defaults to `2s`, the flag to \"1s\"", "docs/vgpusim.md: --out defaults to `none`, the flag to none",
		"vgpusim run --new is not in docs/vgpusim.md's table of the run flags"}
	if !slices.Equal(got, want) {
		t.Errorf("runFlagsProblems = %q, want %q", got, want)
	}
}
