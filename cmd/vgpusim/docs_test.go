package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// helpFlag is a flag line of --help: the name, then the default
	// (quoted, or unquoted in lower case) or a placeholder (upper case).
	helpFlag = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--(?:\[no-\])?([a-z][a-z0-9.-]*)(?:=("[^"]*"|\S+))?`)
	// docFlag is a row of docs/vgpusim.md's table of the run flags.
	docFlag    = regexp.MustCompile("(?m)^\\| `--([a-z][a-z0-9.-]*)` \\|([^|]*)\\|")
	backquoted = regexp.MustCompile("^`([^`]*)`$")
)

// helpDefaults returns the flags a command's --help lists (help and
// version left out), each with its default ("" for none).
func helpDefaults(help string) map[string]string {
	out := map[string]string{}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		name, v := m[1], m[2]
		if name == "help" || name == "version" {
			continue
		}
		switch {
		case strings.HasPrefix(v, `"`):
			v = strings.Trim(v, `"`)
		case v != strings.ToLower(v):
			v = "" // a placeholder
		}
		out[name] = v
	}
	return out
}

// TestDocsRunFlags keeps docs/vgpusim.md's table of the run flags equal to
// `vgpusim run --help`: every flag it lists exists, every flag is listed,
// and a flag with a default gives it in backquotes (`1s`), one without
// does not give a single backquoted value for one. Each tables flag with a
// default other than true or false is given with it, "`--seeds` (default
// `1-3`".
func TestDocsRunFlags(t *testing.T) {
	code, help, stderr := vgpusim(t, false, "run", "--help")
	if code != 0 {
		t.Fatalf("run --help: exit %d: %s", code, stderr)
	}
	flags := helpDefaults(help)
	if len(flags) < 10 || flags["step"] != "1s" || flags["format"] != "csv" || flags["scenario"] != "" {
		t.Fatalf("run --help: flags read as %v from\n%s", flags, help)
	}
	b, err := os.ReadFile("../../docs/vgpusim.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := docFlag.FindAllStringSubmatch(string(b), -1)
	var listed []string
	for _, m := range rows {
		name, cell := m[1], strings.TrimSpace(m[2])
		listed = append(listed, name)
		def, ok := flags[name]
		switch {
		case !ok:
			t.Errorf("docs/vgpusim.md lists --%s, which vgpusim run does not have", name)
		case def != "" && !strings.Contains(cell, "`"+def+"`"):
			t.Errorf("docs/vgpusim.md: --%s defaults to %s, the flag to %q", name, cell, def)
		case def == "" && backquoted.MatchString(cell):
			t.Errorf("docs/vgpusim.md: --%s defaults to %s, the flag to none", name, cell)
		}
	}
	for name := range flags {
		if !slices.Contains(listed, name) {
			t.Errorf("vgpusim run --%s is not in docs/vgpusim.md's table of the run flags", name)
		}
	}
	code, help, stderr = vgpusim(t, false, "tables", "--help")
	if code != 0 {
		t.Fatalf("tables --help: exit %d: %s", code, stderr)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	for name, def := range helpDefaults(help) {
		if def != "" && def != "true" && def != "false" && !strings.Contains(doc, "`--"+name+"` (default `"+def+"`") {
			t.Errorf("docs/vgpusim.md does not give tables --%s with its default, \"`--%s` (default `%s`\"", name, name, def)
		}
	}
}
