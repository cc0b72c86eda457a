package simrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A scenario argument that is neither a file nor a built-in name says
// what it is: missing, a directory, or a path that cannot be looked at;
// each lists the built-in names.
func TestLoadScenarioNotAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(file, []byte("name: f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ arg, want string }{
		{filepath.Join(dir, "none.yaml"), "no such file and no built-in scenario of that name"},
		{dir, "is a directory, not a scenario file, and no built-in scenario has that name"},
		{dir + "/", "is a directory, not a scenario file"},
		{filepath.Join(file, "x.yaml"), "not a directory, and no built-in scenario has that name"},
	} {
		_, _, err := LoadScenario(c.arg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(built-in: ") || !strings.Contains(err.Error(), c.arg) {
			t.Errorf("%s: %v, want %q naming it and the built-in scenarios", c.arg, err, c.want)
		}
	}
}

// A tenants file given as the scenario is refused with its problems and
// a line that says what it is and where it goes.
func TestLoadScenarioTenantsFile(t *testing.T) {
	_, _, err := LoadScenario("../scenarios/noisy-neighbour.tenants.yaml")
	want := "../scenarios/noisy-neighbour.tenants.yaml is named as a tenants file: give it with --tenants, and the scenario (../scenarios/noisy-neighbour.yaml) with --scenario"
	if err == nil || !strings.Contains(err.Error(), `unknown key "class"`) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("%v, want its problems, then %q", err, want)
	}
}

// Anything of a scenario file's companion name is read as its tenants
// file: a directory or a link to nothing there is refused naming it, not
// taken as no tenants file (every process unassigned).
func TestLoadScenarioCompanionNotAFile(t *testing.T) {
	data, err := os.ReadFile("../scenarios/noisy-neighbour.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "is a directory"},
		{"link to nothing", func(p string) error { return os.Symlink(p+".none", p) }, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			scenario := filepath.Join(dir, "nn.yaml")
			if err := os.WriteFile(scenario, data, 0o644); err != nil {
				t.Fatal(err)
			}
			companion := filepath.Join(dir, "nn.tenants.yaml")
			if err := c.make(companion); err != nil {
				t.Fatal(err)
			}
			_, cfg, err := LoadScenario(scenario)
			if err == nil || !strings.Contains(err.Error(), companion) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("tenants %v, error %v; want %q naming %s", cfg, err, c.want, companion)
			}
		})
	}
}

// A --tenants file that loads but disagrees with the scenario (a sim://
// source it does not serve, another SLO) is refused naming the flag, as
// one that does not load is.
func TestTenantsFlagDisagreementNamesFlag(t *testing.T) {
	data, err := os.ReadFile("../scenarios/noisy-neighbour.tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"sim source", "sim://chat", "sim://nosuch", `latency_source sim://nosuch: sim: no tenant named "nosuch"`},
		{"slo", "target: 8s", "target: 9s", "disagree on SLOs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(string(data), c.from, c.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Config{Scenario: "noisy-neighbour", Tenants: path, Policy: "best-effort", Step: DefaultStep}.Check()
			if err == nil || !strings.HasPrefix(err.Error(), "--tenants: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want --tenants: ... %q", err, c.want)
			}
		})
	}
}
