package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
)

var (
	// readmeFlag is a row of the README's flag tables: the flag, its default.
	readmeFlag = regexp.MustCompile("^\\| `--([a-z0-9.-]+)(?:=[A-Z]+)?` \\|([^|]*)\\|")
	// readmeCollectors is the row of the --collector.<name> flags.
	readmeCollectors = regexp.MustCompile("(?m)^\\| `--collector.<name>` .*\\(((?:`[a-z]+`(?:, )?)+)\\)")
	backticked       = regexp.MustCompile("`([^`]+)`")
)

// TestReadmeFlags keeps the README's flag tables equal to the command
// line: every flag they list exists, every flag --help shows is listed,
// and each default they give is the flag's. A default in backticks is the
// flag's (durations compared as durations; a path may be named by its last
// element, "the service account's `token`"); one without ("none", "off",
// "system roots") stands for an empty or false default.
func TestReadmeFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "")
	app := kingpin.New("vgpu_exporter", "")
	addFlags(app)
	flags := map[string]*kingpin.FlagModel{}
	for _, f := range app.Model().Flags {
		if !f.Hidden && f.Name != "help" && f.Name != "help-long" && f.Name != "help-man" && f.Name != "version" {
			flags[f.Name] = f
		}
	}
	listed := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(readme, "\n") {
		// The flag tables are those headed | flag | default |.
		if strings.HasPrefix(line, "| flag | default |") || line == "" {
			inTable = line != ""
			continue
		}
		m := readmeFlag.FindStringSubmatch(line)
		if !inTable || m == nil {
			continue
		}
		name, cell := m[1], strings.TrimSpace(m[2])
		listed[name] = true
		f, ok := flags[name]
		if !ok {
			t.Errorf("README lists --%s, which the exporter does not have", name)
			continue
		}
		def := strings.Join(f.Default, ",")
		vals := backticked.FindAllStringSubmatch(cell, -1)
		if len(vals) == 0 {
			if def != "" && def != "false" {
				t.Errorf("README: --%s defaults to %q, the flag to %q", name, cell, def)
			}
			continue
		}
		if !slices.ContainsFunc(vals, func(v []string) bool { return sameDefault(v[1], def) }) {
			t.Errorf("README: --%s defaults to %s, the flag to %q", name, cell, def)
		}
	}
	if len(listed) < len(flags)/2 {
		t.Fatalf("README: only %d rows found in its flag tables", len(listed))
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if !listed[name] && !strings.HasPrefix(name, "collector.") {
			t.Errorf("--%s is not in the README's flag tables", name)
		}
	}
	m := readmeCollectors.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README has no --collector.<name> row naming the collectors")
	}
	var names []string
	for _, v := range backticked.FindAllStringSubmatch(m[1], -1) {
		names = append(names, v[1])
	}
	if want := collector.Collectors(); !slices.Equal(names, want) {
		t.Errorf("README's --collector.<name> row names %v, the exporter has %v", names, want)
	}
}

// sameDefault reports whether a default the README gives is the flag's.
func sameDefault(readme, flag string) bool {
	if readme == flag || strings.HasSuffix(flag, "/"+readme) {
		return true
	}
	a, errA := time.ParseDuration(readme)
	b, errB := time.ParseDuration(flag)
	return errA == nil && errB == nil && a == b
}

var (
	// dottedFlag is a flag of the exporter's shape in a doc: --group.name,
	// or a family of them (--metering.*, --collector.<name>).
	dottedFlag = regexp.MustCompile(`--(?:no-)?([a-z][a-z0-9-]*(?:\.[a-z0-9<>*-]+)+)`)
	// otherFlags are dotted flags the docs name of other programs: vgpusim's
	// (cmd/vgpusim checks docs/vgpusim.md), test/device/compare's and
	// Prometheus's.
	otherFlags = regexp.MustCompile(`^(autotune\.param|tol\.[a-z-]+|web\.enable-lifecycle|storage\.tsdb\.retention\.time)$`)
)

// unknownFlags returns the dotted flags a doc (name, text) names that the
// exporter does not have (flags holds its flags' names): a family
// (--metering.*, --collector.<name>) must name at least one.
func unknownFlags(name, text string, flags []string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, m := range dottedFlag.FindAllStringSubmatch(line, -1) {
			f := strings.TrimRight(m[1], ".-")
			if otherFlags.MatchString(f) || slices.Contains(flags, f) {
				continue
			}
			if at := strings.IndexAny(f, "*<"); at > 0 && slices.ContainsFunc(flags, func(g string) bool { return strings.HasPrefix(g, f[:at]) }) {
				continue
			}
			out = append(out, fmt.Sprintf("%s:%d: %s is no flag of the exporter", name, i+1, m[0]))
		}
	}
	return out
}

// TestDocsNameExporterFlags: every flag of the exporter's dotted shape
// that README.md, scenarios/README.md or a docs/*.md names is one of its
// flags, so that a renamed flag is not left in the prose (TestReadmeFlags
// checks the README's tables, with their defaults).
func TestDocsNameExporterFlags(t *testing.T) {
	app := kingpin.New("vgpu_exporter", "")
	addFlags(app)
	var flags []string
	// The collector package declares its --collector.* flags on
	// kingpin.CommandLine, as main uses it.
	for _, f := range append(app.Model().Flags, kingpin.CommandLine.Model().Flags...) {
		flags = append(flags, f.Name)
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) < 20 {
		t.Fatalf("docs/*.md: %d files, %v", len(docs), err)
	}
	for _, doc := range append([]string{"../../README.md", "../../scenarios/README.md"}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range unknownFlags(strings.TrimPrefix(doc, "../../"), string(b), flags) {
			t.Error(p)
		}
	}
	doc := "`--a.b=1`, --a.c, `--no-a.b`, `--d.*` and `--d.<name>` (`--tol.x`); `--a.bb`, --e.*\n"
	got := unknownFlags("x.md", doc, []string{"a.b", "a.c", "d.e"})
	want := []string{"x.md:1: --a.bb is no flag of the exporter", "x.md:1: --e.* is no flag of the exporter"}
	if !slices.Equal(got, want) {
		t.Errorf("unknownFlags = %q, want %q", got, want)
	}
}

// TestArchitectureListsFiles: docs/architecture.md's table of the
// exporter process ("The exporter process") has a row for each file of
// this command but main.go, and no row for a file it lacks.
func TestArchitectureListsFiles(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The exporter process\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The exporter process"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+\\.go)` \\|").FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if f != "main.go" && !strings.HasSuffix(f, "_test.go") {
			want = append(want, f)
		}
	}
	slices.Sort(rows)
	if !slices.Equal(rows, want) {
		t.Errorf("docs/architecture.md's table of the exporter process lists %v, the command has %v (main.go aside)", rows, want)
	}
}

// TestHelpShowsDefaults: --help shows a flag's default, as the README's
// tables give it (TestReadmeFlags), where kingpin does not: a flag with a
// placeholder is shown with it (--tuner.node-lock=FILE), not its default,
// so its help says "Default: ..." (before, --tuner.node-lock's and
// --tenants.kubernetes-default's were nowhere in --help).
func TestHelpShowsDefaults(t *testing.T) {
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "")
	app := kingpin.New("vgpu_exporter", "")
	addFlags(app)
	n := 0
	for _, f := range app.Model().Flags {
		def := strings.Join(f.Default, ",")
		if f.Hidden || f.PlaceHolder == "" || def == "" || def == "false" {
			continue
		}
		n++
		if _, after, ok := strings.Cut(f.Help, "Default: "); !ok || !strings.Contains(after, def) {
			t.Errorf("--%s=%s: its help does not say \"Default: %s\": %q", f.Name, f.PlaceHolder, def, f.Help)
		}
	}
	if n < 3 {
		t.Errorf("only %d flags with a placeholder and a default", n)
	}
}
