package simrun_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// builtins lists every built-in scenario (replays included).
func builtins(t *testing.T) []scenarios.Builtin {
	t.Helper()
	bs, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) < 2 {
		t.Fatalf("%d built-in scenarios", len(bs))
	}
	return bs
}

// TestBuiltinSLOsAgree: every built-in scenario loads, has a companion
// tenants file, and that file gives each tenant with an SLO the SLO the
// scenario judges it by.
func TestBuiltinSLOsAgree(t *testing.T) {
	for _, b := range builtins(t) {
		t.Run(b.Name, func(t *testing.T) {
			sc, cfg, err := simrun.LoadScenario(b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if cfg == nil {
				t.Fatalf("%s has no companion tenants file", b.Name)
			}
			judged := 0
			for _, ts := range sc.Tenants {
				q, target, _, _, found := cfg.GivenSLO(ts.Name)
				if ts.SLO == nil {
					continue
				}
				judged++
				if !found || q != ts.SLO.Quantile || target != time.Duration(ts.SLO.Target) {
					t.Errorf("tenant %s: judged %v, given q=%v target=%v (found %v)", ts.Name, *ts.SLO, q, target, found)
				}
			}
			if judged == 0 {
				t.Errorf("%s judges no SLO", b.Name)
			}
		})
	}
}

// sloTarget is the target of a tenants file's slo line.
var sloTarget = regexp.MustCompile(`(slo: \{quantile: [0-9.]+, target: )([0-9a-z.]+)\}`)

// TestMismatchedCopyRefused: a copy on disk of each built-in scenario
// whose tenants file gives one tenant another SLO target is refused, by
// name and line of both files, whether the tenants file is the companion
// or given to Run.
func TestMismatchedCopyRefused(t *testing.T) {
	for _, b := range builtins(t) {
		t.Run(b.Name, func(t *testing.T) {
			scenario, tp, data := copyBuiltin(t, b)
			m := sloTarget.FindSubmatchIndex(data)
			if m == nil {
				t.Fatalf("%s: no slo line", tp)
			}
			bad := append(append(append([]byte{}, data[:m[4]]...), "1234ms"...), data[m[5]:]...)
			if err := os.WriteFile(tp, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			line := strings.Count(string(data[:m[0]]), "\n") + 1
			_, _, err := simrun.LoadScenario(scenario)
			if err == nil {
				t.Fatal("a tenants file that disagrees with its scenario was accepted")
			}
			for _, want := range []string{scenario + ":", tp + ":" + itoa(line) + " gives the tuner", "1.234s"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// copyBuiltin copies built-in scenario b, with its tenants file and
// trace, to a temporary directory: it returns the copy's scenario path,
// its companion tenants file and that file's text.
func copyBuiltin(t *testing.T, b scenarios.Builtin) (scenario, tenants string, data []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, b.FS); err != nil {
		t.Fatal(err)
	}
	scenario = filepath.Join(dir, filepath.FromSlash(b.Path))
	tenants = simrun.Companion(scenario)
	data, err := os.ReadFile(tenants)
	if err != nil {
		t.Fatal(err)
	}
	return scenario, tenants, data
}

func itoa(n int) string { return strconv.Itoa(n) }

// A tenant the scenario judges an SLO of and the tenants file leaves out
// is refused (vgpusim would score the tuner against an SLO it was never
// given); one the scenario judges no SLO of may be left out.
func TestCheckJudgedDefined(t *testing.T) {
	slo := &sim.SLOSpec{Quantile: 0.99, Target: sim.Duration(3500 * time.Microsecond), Line: 7}
	sc := &sim.Scenario{Name: "s", File: "s.yaml", Tenants: []sim.TenantSpec{{Name: "a", SLO: slo}, {Name: "b"}}}
	for _, tc := range []struct {
		name    string
		defined []string
		want    string // "" when none is missing
	}{
		{"both defined", []string{"a", "b"}, ""},
		{"the one without an SLO left out", []string{"a"}, ""},
		{"the judged one left out", []string{"b"}, "tenant a: s.yaml:7 judges e2e quantile 0.99 <= 3.5ms, but t.yaml defines no tenant a (its processes are unassigned: the tuner is given no SLO of it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sc.CheckJudgedDefined("t.yaml", func(name string) bool { return slices.Contains(tc.defined, name) })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckSLOs covers each way a tenants file can disagree with its
// scenario, and the tenants it leaves alone.
func TestCheckSLOs(t *testing.T) {
	slo := &sim.SLOSpec{Quantile: 0.99, Target: sim.Duration(3500 * time.Microsecond), Line: 7}
	sc := &sim.Scenario{Name: "s", File: "s.yaml", Tenants: []sim.TenantSpec{{Name: "a", SLO: slo}, {Name: "b"}}}
	type given struct {
		q      float64
		target time.Duration
		metric string
		found  bool
	}
	for _, tc := range []struct {
		name string
		a, b given
		want string // "" when it agrees
	}{
		{"equal", given{0.99, 3500 * time.Microsecond, "", true}, given{found: true}, ""},
		{"absent from the tenants file", given{}, given{}, ""},
		{"looser target", given{0.99, 100 * time.Millisecond, "", true}, given{found: true}, "s.yaml:7 judges e2e quantile 0.99 <= 3.5ms, but t.yaml:3 gives the tuner e2e quantile 0.99 <= 100ms"},
		{"other quantile", given{0.95, 3500 * time.Microsecond, "", true}, given{found: true}, "gives the tuner e2e quantile 0.95 <= 3.5ms"},
		{"other metric", given{0.99, 3500 * time.Microsecond, "ttft", true}, given{found: true}, "gives the tuner ttft quantile 0.99"},
		{"no SLO to the tuner", given{found: true}, given{found: true}, "tenant a: s.yaml:7 judges e2e quantile 0.99 <= 3.5ms, but t.yaml:3 gives the tuner no SLO"},
		{"an SLO the scenario does not judge", given{0.99, 3500 * time.Microsecond, "", true}, given{0.9, time.Second, "", true}, "tenant b: s.yaml judges no SLO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sc.CheckSLOs("t.yaml", func(name string) (float64, time.Duration, string, int, bool) {
				g := map[string]given{"a": tc.a, "b": tc.b}[name]
				return g.q, g.target, g.metric, 3, g.found
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A scenario file that judges SLOs, run with no tenants file, is refused
// to the tuner policy that tunes to the tenants' SLOs (autotune, which
// would be scored against objectives it was never given), naming the
// companion to write; the policies of fixed settings run it (the oracle
// too: cmd/vgpusim's TestUntoldOracle), and so does autotune with the
// tenants file given by --tenants.
func TestUntoldRefused(t *testing.T) {
	b, err := scenarios.Find("h200-mig")
	if err != nil {
		t.Fatal(err)
	}
	scenario, tp, _ := copyBuiltin(t, b)
	given := filepath.Join(t.TempDir(), "given.tenants.yaml")
	if err := os.Rename(tp, given); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy, tenants string
		want            string // "" when it runs
	}{
		{"autotune", "", "scenario h200-mig judges the SLOs of chat, vision and has no tenants file: the autotune policy, given only the SLOs a tenants file states, would be scored against objectives it was never given; write " + tp},
		{"autotune", given, ""},
		{"best-effort", "", ""},
		{"static-equal", "", ""},
		{"none", "", ""},
	} {
		t.Run(tc.policy+"/"+filepath.Base(tc.tenants), func(t *testing.T) {
			cfg := simrun.Config{Scenario: scenario, Tenants: tc.tenants, Policy: tc.policy, Duration: 10 * time.Second, Step: time.Second}
			_, err := simrun.Run(t.Context(), cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if cerr := cfg.Check(); (cerr == nil) != (err == nil) {
				t.Errorf("Check: %v, Run: %v", cerr, err)
			}
		})
	}
}

// A tenants file that defines no tenant is refused, given with --tenants
// or beside the scenario, as the exporter refuses it: everything would be
// unassigned and no policy could act for a tenant.
func TestEmptyTenantsFileRefused(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "x.yaml")
	empty := filepath.Join(dir, "empty.yaml")
	for path, data := range map[string]string{
		scenario: "gpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: training, flops: 1e12}}\n",
		empty:    "tenants: []\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const want = "empty.yaml defines no tenants; refusing an empty tenants file"
	err := simrun.Config{Scenario: scenario, Tenants: empty, Policy: "static-equal", Step: time.Second, Duration: time.Minute}.Check()
	if err == nil || !strings.Contains(err.Error(), "--tenants: "+dir) || !strings.Contains(err.Error(), want) {
		t.Fatalf("--tenants: error %v, want one naming the file and containing %q", err, want)
	}
	if err := os.Rename(empty, filepath.Join(dir, "x.tenants.yaml")); err != nil {
		t.Fatal(err)
	}
	_, _, err = simrun.LoadScenario(scenario)
	if err == nil || !strings.Contains(err.Error(), "x.tenants.yaml defines no tenants") {
		t.Fatalf("companion: error %v, want one naming x.tenants.yaml", err)
	}
}
