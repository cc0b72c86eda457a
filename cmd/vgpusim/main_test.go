package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// vgpusim runs the command in-process and returns its exit status and
// output.
func vgpusim(t *testing.T, progress bool, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr, progress)
	return code, stdout.String(), stderr.String()
}

// libraryScenarios returns the scenario files of scenarios (and its
// replay/ directory), companions excluded.
func libraryScenarios(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"../../scenarios/*.yaml", "../../scenarios/replay/*.yaml"} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, scenarios.TenantsSuffix) {
				out = append(out, f)
			}
		}
	}
	if len(out) < 7 {
		t.Fatalf("found %d scenarios: %v", len(out), out)
	}
	return out
}

// Every library scenario runs for 20 virtual seconds under each policy, and
// the summary and the files name every tenant.
func TestRunLibraryScenarios(t *testing.T) {
	for _, f := range libraryScenarios(t) {
		sc, err := sim.LoadScenario(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, policy := range []string{"best-effort", "static-equal"} {
			t.Run(filepath.Base(f)+"/"+policy, func(t *testing.T) {
				dir := t.TempDir()
				args := []string{"run", "--scenario", f, "--policy", policy, "--duration", "20s"}
				if policy == "best-effort" {
					// Files (plots are the slow part) for one policy only.
					code, stdout, stderr := vgpusim(t, false, args...)
					if code != 0 || !strings.Contains(stdout, "scenario "+sc.Name+", policy "+policy) {
						t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
					}
					return
				}
				code, stdout, stderr := vgpusim(t, false, append(args, "--out", dir)...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if stderr != "" {
					t.Errorf("stderr without a terminal: %q", stderr)
				}
				if !strings.Contains(stdout, "scenario "+sc.Name+", policy "+policy) || !strings.Contains(stdout, "20s simulated in 20 steps") {
					t.Errorf("summary header missing:\n%s", stdout)
				}
				rows := readCSV(t, filepath.Join(dir, report.FileTenantsCSV))
				if got, want := len(rows)-1, 20*len(sc.Tenants); got != want {
					t.Errorf("tenants.csv has %d rows, want %d (20 steps x %d tenants)", got, want, len(sc.Tenants))
				}
				for _, ts := range sc.Tenants {
					if !strings.Contains(stdout, "\n"+ts.Name+" ") {
						t.Errorf("summary lacks tenant %s:\n%s", ts.Name, stdout)
					}
				}
				gpus := readCSV(t, filepath.Join(dir, report.FileGPUsCSV))
				if got, want := len(gpus)-1, 20*len(sc.GPUs); got != want {
					t.Errorf("gpus.csv has %d rows, want %d", got, want)
				}
				for _, name := range []string{report.FileSummary, report.FileLatencyPlot, report.FileSharesPlot, report.FileGPUPlot, simrun.FileDecisions} {
					b, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(name, ".png") {
						if _, err := png.Decode(bytes.NewReader(b)); err != nil {
							t.Errorf("%s: %v", name, err)
						}
					}
				}
				sum, _ := os.ReadFile(filepath.Join(dir, report.FileSummary))
				if !strings.HasPrefix(stdout, string(sum)) {
					t.Errorf("summary.txt differs from the printed summary")
				}
			})
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// static-equal on an MPS scenario gives each of the two tenants 50%, and
// the decisions name the tenants of the companion tenants file.
func TestStaticEqualDecisions(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := vgpusim(t, false, "run", "--scenario", "noisy-neighbour", "--policy", "static-equal", "--duration", "5s", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "policy static-equal: 2 decisions, 2 applied") {
		t.Errorf("decision count missing:\n%s", stdout)
	}
	rows := readCSV(t, filepath.Join(dir, simrun.FileDecisions))
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[2]+" "+r[3]+" "+r[4]+"->"+r[5]+" "+r[6])
	}
	want := []string{"chat mps_active_threads 100%->50% true", "embed mps_active_threads 100%->50% true"}
	if !slices.Equal(got, want) {
		t.Errorf("decisions %q, want %q", got, want)
	}
	// The shares follow within the run.
	rows = readCSV(t, filepath.Join(dir, report.FileTenantsCSV))
	last := rows[len(rows)-1]
	if last[1] != "embed" || last[12] == "" {
		t.Fatalf("last row %v", last)
	}
}

// The same seed gives the same bytes in every file, CSV and JSON, PNG
// included; another seed gives another series.
func TestDeterministic(t *testing.T) {
	runOnce := func(format, seed string) map[string][]byte {
		dir := t.TempDir()
		code, stdout, stderr := vgpusim(t, false, "run", "--scenario", "../../scenarios/bursty-llm-training.yaml",
			"--policy", "static-equal", "--duration", "30s", "--seed", seed, "--format", format, "--out", dir)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		files := map[string][]byte{"stdout": []byte(strings.ReplaceAll(stdout, dir, "DIR"))}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
		return files
	}
	for _, format := range []string{"csv", "json"} {
		t.Run(format, func(t *testing.T) {
			a, b := runOnce(format, "7"), runOnce(format, "7")
			if len(a) != len(b) || len(a) < 6 {
				t.Fatalf("files %d and %d", len(a), len(b))
			}
			for name, data := range a {
				if !bytes.Equal(data, b[name]) {
					t.Errorf("%s differs between two runs with the same seed", name)
				}
			}
			c := runOnce(format, "8")
			series := report.FileTenantsCSV
			if format == "json" {
				series = report.FileJSON
				var doc struct {
					Meta report.Meta `json:"meta"`
				}
				if err := json.Unmarshal(a[series], &doc); err != nil || doc.Meta.Seed != 7 || doc.Meta.Policy != "static-equal" {
					t.Errorf("json meta %+v, %v", doc.Meta, err)
				}
			}
			if bytes.Equal(a[series], c[series]) {
				t.Errorf("seeds 7 and 8 gave the same %s", series)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	nn := "../../scenarios/noisy-neighbour.yaml"
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ngpus:\n  - model: H999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"walk"}, "expected command but got \"walk\""},
		{"no scenario", []string{"run"}, "required flag(s) '--scenario' not provided"},
		{"unknown scenario", []string{"run", "--scenario", "no-such"}, `scenario "no-such": no such file and no built-in scenario of that name (built-in: `},
		{"bad scenario file", []string{"run", "--scenario", bad}, "bad.yaml:3: unknown GPU model"},
		{"unknown policy", []string{"run", "--scenario", nn, "--policy", "magic"}, `unknown policy "magic" (known: autotune, best-effort, none, static-equal, oracle)`},
		{"bad duration", []string{"run", "--scenario", nn, "--duration", "ten"}, `--duration "ten": want a duration`},
		{"negative duration", []string{"run", "--scenario", nn, "--duration=-5s"}, "--duration -5s must not be negative"},
		{"zero duration", []string{"run", "--scenario", nn, "--duration", "0s"}, `--duration "0s": want a positive duration (leave the flag out`},
		{"zero duration, no unit", []string{"run", "--scenario", nn, "--duration", "0"}, `--duration "0": want a positive duration`},
		{"negative seed apart", []string{"run", "--scenario", nn, "--duration", "2s", "--seed", "-3", "--seeds", "1,2"}, "--seed -3 and a --seeds list"},
		{"negative duration apart", []string{"run", "--scenario", nn, "--duration", "-5s"}, "--duration -5s must not be negative"},
		{"negative step apart", []string{"run", "--scenario", nn, "--step", "-1s"}, "--step -1s must be positive"},
		{"negative seeds apart", []string{"run", "--scenario", nn, "--seeds", "-1"}, `--seeds "-1": want a count`},
		{"negative tables duration apart", []string{"tables", "--duration", "-5s"}, `--duration "-5s": want a duration`},
		{"zero tables duration", []string{"tables", "--duration", "0s"}, `--duration "0s": want a positive duration`},
		{"negative value of a bool flag", []string{"tables", "--slack", "-3"}, "-3"},
		{"tenants -", []string{"run", "--scenario", nn, "--tenants", "-"}, "--tenants: stat -: no such file"},
		{"scenario -", []string{"run", "--scenario", "-"}, `scenario "-": no such file`},
		{"format without out", []string{"run", "--scenario", nn, "--duration", "2s", "--format", "json"}, "--format json: only the files of --out have a format; give --out DIR"},
		{"out -", []string{"run", "--scenario", nn, "--duration", "2s", "--out", "-"}, "--out -: want a directory"},
		{"no command", []string{}, "no command given (run, list or tables), try --help"},
		{"duration below a step", []string{"run", "--scenario", nn, "--duration", "500ms"}, "shorter than one step"},
		{"zero step", []string{"run", "--scenario", nn, "--step", "0s"}, "--step 0s must be positive"},
		{"bad step", []string{"run", "--scenario", nn, "--step", "1"}, `--step "1": want a duration`},
		{"bad format", []string{"run", "--scenario", nn, "--format", "xml"}, `--format: "xml" is not one of csv, json`},
		{"out not made", []string{"run", "--scenario", nn, "--out", "/proc/vgpusim-out"}, "--out: mkdir /proc/vgpusim-out"},
		{"bad seed", []string{"run", "--scenario", nn, "--seed", "x"}, `--seed "x": want a non-zero integer`},
		{"zero seed", []string{"run", "--scenario", nn, "--seed", "0"}, `--seed "0": want a non-zero integer`},
		{"missing tenants file", []string{"run", "--scenario", nn, "--tenants", "/nonexistent/t.yaml"}, "--tenants: stat /nonexistent/t.yaml"},
		{"autotune parameter for a planner", []string{"run", "--scenario", nn, "--policy", "oracle", "--autotune.param", "pause_max=0.5"}, `--autotune.param: only the autotune policy has parameters, not "oracle"`},
		{"bad autotune parameter", []string{"run", "--scenario", nn, "--policy", "autotune", "--autotune.param", "pause_max=2"}, `--autotune.param: pause_max is a share, between 0 and 1, not "2"`},
		{"unknown autotune parameter", []string{"run", "--scenario", nn, "--policy", "autotune", "--autotune.param", "pause=1"}, `--autotune.param: unknown parameter "pause" (names: `},
		{"oracle at another step", []string{"run", "--scenario", nn, "--policy", "oracle", "--step", "500ms"}, "--step 500ms: the oracle policy searches by replays that step as a run at the default step of 1s does; leave --step out"},
		{"duration over a week", []string{"run", "--scenario", nn, "--duration", "168h1s", "--step", "1h"}, "--duration 168h0m1s: at most 168h0m0s, as a scenario's duration"},
		{"centuries in a step", []string{"run", "--scenario", nn, "--duration", "2562047h", "--step", "2562047h"}, "--duration 2562047h0m0s: at most 168h0m0s"},
		{"tables duration over a week", []string{"tables", "--scenario", nn, "--duration", "169h"}, "--duration 169h0m0s: at most 168h0m0s"},
		{"tables too many rows", []string{"tables", "--scenario", "eight-gpu-hot", "--duration", "30h"}, "--duration 30h0m0s at the step of 1s is 108000 steps of 32 tenants and 8 GPUs: a run's series holds at most 4194304 rows (steps x (tenants + GPUs + 2 a step)), this one 99864 steps at the most; shorten --duration (default: the scenario's duration)\n"},
		{"run too many rows", []string{"run", "--scenario", "eight-gpu-hot", "--duration", "30h"}, "--duration 30h0m0s at --step 1s is 108000 steps of 32 tenants and 8 GPUs"},
		{"tenants empty", []string{"run", "--scenario", nn, "--duration", "2s", "--tenants", ""}, `--tenants "": want a tenants file (leave the flag out for the scenario's companion)`},
		{"tenants= empty", []string{"run", "--scenario", nn, "--duration", "2s", "--tenants="}, `--tenants "": want a tenants file`},
		{"out empty", []string{"run", "--scenario", nn, "--duration", "2s", "--out", ""}, `--out "": want a directory (leave the flag out to write nothing)`},
		{"out is a file", []string{"run", "--scenario", nn, "--duration", "2s", "--out", bad}, "bad.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := vgpusim(t, false, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr, tc.want) || !strings.HasPrefix(stderr, "vgpusim: error: ") {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.want)
			}
		})
	}
}

func TestHelpAndList(t *testing.T) {
	code, stdout, _ := vgpusim(t, false, "--help")
	if code != 0 || !strings.Contains(stdout, "run") || !strings.Contains(stdout, "list") {
		t.Errorf("--help: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := vgpusim(t, false, "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	for _, name := range []string{"noisy-neighbour", "bursty-llm-training", "clock-stability", "eight-gpu-hot", "h100-timeslice", "h200-mig", "vgpu-contention", "diurnal-shift"} {
		if !strings.Contains(stdout, "\n"+name+" ") {
			t.Errorf("list lacks %s:\n%s", name, stdout)
		}
	}
	if strings.Contains(stdout, "\nnoisy-neighbour.tenants ") || !strings.Contains(stdout, "eight-gpu-hot.tenants.yaml") ||
		!strings.Contains(stdout, "replay/diurnal-shift.tenants.yaml") {
		t.Errorf("list shows companions as scenarios or lacks them as tenants files:\n%s", stdout)
	}
}

// Every scenario of the library on disk, trace replays included, is a
// built-in of the same name, and a built-in replay finds its trace and its
// companion tenants file wherever vgpusim runs, with nothing written to
// disk: not even a temporary directory is needed (TMPDIR names none).
func TestBuiltinsMatchLibrary(t *testing.T) {
	var want []string
	for _, f := range libraryScenarios(t) {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	slices.Sort(want)
	got, err := scenarios.Names()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("built-in scenarios %q, library files %q", got, want)
	}
	t.Chdir(t.TempDir())
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "absent"))
	sc, cfg, err := simrun.LoadScenario("diurnal-shift")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "diurnal-shift" || cfg == nil || cfg.TenantByName("chat-east") == nil {
		t.Errorf("built-in diurnal-shift: name %q, companion tenants %v", sc.Name, cfg)
	}
	code, stdout, stderr := vgpusim(t, false, "run", "--scenario", "diurnal-shift", "--duration", "10s")
	if code != 0 || !strings.Contains(stdout, "\nchat-east ") {
		t.Fatalf("run built-in diurnal-shift: exit %d: %s\n%s", code, stderr, stdout)
	}
}

// The progress bar goes to stderr only, and leaves stdout as it is.
func TestProgressBar(t *testing.T) {
	args := []string{"run", "--scenario", "clock-stability", "--duration", "10s"}
	code, plain, _ := vgpusim(t, false, args...)
	code2, withBar, stderr := vgpusim(t, true, args...)
	if code != 0 || code2 != 0 {
		t.Fatalf("exit %d, %d: %s", code, code2, stderr)
	}
	if plain != withBar {
		t.Errorf("stdout changed with the progress bar")
	}
	if !strings.Contains(stderr, "simulating") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
}
