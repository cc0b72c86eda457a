package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(`tenants:
  - name: chat
    class: latency
    selectors:
      - executable: vllm
  - name: batch
    class: batch
    selectors:
      - uid: 1002
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two problems on two lines: both must be printed.
	if err := os.WriteFile(bad, []byte(`tenants:
  - name: chat
    class: latncy
    selectors:
      - executable: vllm
  - name: batch
    class: batch
    selectors:
      - uid: 1002
    slo: {quantile: 0.99, target: 250xs}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("defaults: {scrape_interval: 10s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 5<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file       string
		allowEmpty bool
		code       int
		out, errs  []string
	}{
		{good, false, 0, []string{good + ": OK (2 tenants; prices: none (no cost series))"}, nil},
		{bad, false, 1, nil, []string{bad + ":3:", bad + ":10:", "INVALID"}},
		{filepath.Join(dir, "missing.yaml"), false, 1, nil, []string{"missing.yaml", "no such file"}},
		{empty, false, 1, nil, []string{empty + " defines no tenants", "--tenants.allow-empty", "INVALID"}},
		{empty, true, 0, []string{empty + ": OK (0 tenants; "}, nil},
		{big, false, 1, nil, []string{fmt.Sprintf("%s is larger than the limit of %d bytes", big, tenant.MaxConfigBytes)}},
		{"/dev/zero", false, 1, nil, []string{"/dev/zero is not a regular file (a character device)"}},
	} {
		var stdout, stderr strings.Builder
		code := checkConfig(tc.file, tc.allowEmpty, &meteringConfig{}, nil, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.file, code, tc.code, stderr.String())
		}
		for _, w := range tc.out {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout %q lacks %q", tc.file, stdout.String(), w)
			}
		}
		for _, w := range tc.errs {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q lacks %q", tc.file, stderr.String(), w)
			}
		}
	}
}

// TestConfigCheckPrices: --config.check lists the problems of the
// metering section (by line) and of the --metering.* flags (by flag), and
// prints the prices in use and where they come from.
func TestConfigCheckPrices(t *testing.T) {
	dir := t.TempDir()
	write := func(name, metering string) string { return writeOneTenant(t, filepath.Join(dir, name), metering) }
	plain := write("plain.yaml", "")
	priced := write("priced.yaml", "metering:\n  currency: EUR\n  price_per_gpu_hour: 2.25\n  price_per_kwh: 0.3\n")
	bad := write("bad.yaml", "metering:\n  currency: euro\n  price_per_gpu_hour: -2\n")
	gpuHour := func(p float64) *meteringConfig { return &meteringConfig{Currency: "USD", PerGPUHour: &p} }
	kWh := 0.2
	for _, tc := range []struct {
		name  string
		file  string
		flags *meteringConfig
		code  int
		out   string
		errs  []string
	}{
		{"flags", plain, gpuHour(3), 0, plain + ": OK (1 tenants; prices: 3 USD per GPU-hour (the --metering.* flags))", nil},
		{"file over flags", priced, gpuHour(3), 0, priced + ": OK (1 tenants; prices: 2.25 EUR per GPU-hour, 0.3 EUR per kWh (the tenants file's metering section))", nil},
		{"bad file", bad, &meteringConfig{}, 1, "", []string{
			bad + `:5: metering.currency "euro" is not an ISO 4217 code`,
			bad + ":6: metering.price_per_gpu_hour must be a number, 0 or more, got -2", "INVALID"}},
		{"bad flags", plain, gpuHour(-1), 1, "", []string{"--metering.price-per-gpu-hour must be a number, 0 or more, got -1", "INVALID"}},
		{"no currency", plain, &meteringConfig{PerKWh: &kWh}, 1, "", []string{"--metering.currency is needed with a price"}},
		{"no price", plain, &meteringConfig{Currency: "USD"}, 1, "", []string{"--metering.currency USD gives no price"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := checkConfig(tc.file, false, tc.flags, nil, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.out)
			}
			for _, w := range tc.errs {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
}

// TestConfigCheckListsEveryProblem: a file with one problem that stops its
// reading (a syntax error or a value that does not parse) and three that
// only the whole file shows gets all four listed, each on its own line,
// and any other problem of the tenant that stopped the reading besides.
func TestConfigCheckListsEveryProblem(t *testing.T) {
	// The three whole-file problems follow the broken tenant in each file.
	const rest = `  - name: chat
    selectors:
      - executable: tgi
  - name: "bad name!"
    selectors: [{uid: 5}]
  - name: lonely
`
	wholeFile := func(first int) []string {
		return []string{
			fmt.Sprintf(":%d: duplicate tenant name \"chat\" (first defined at line 2)", first),
			fmt.Sprintf(":%d: tenant name \"bad name!\"", first+3),
			fmt.Sprintf(":%d: tenant \"lonely\" has no selectors", first+5),
		}
	}
	for _, tc := range []struct {
		name, head string
		first      string   // the reading problem, with its line
		also       []string // the broken tenant's problems that do not follow from it
		restAt     int      // line of the rest's first tenant
	}{
		// the tenant whose target fails has no latency_source either: a
		// problem of its own, listed beside the target's
		{"bad duration", "tenants:\n  - name: chat\n    selectors:\n      - executable: vllm\n    slo: {quantile: 0.99, target: 250xs}\n",
			`:5: slo.target: bad duration "250xs"`, []string{`:5: tenant "chat" has an slo but no latency_source`}, 6},
		{"tab in indentation", "tenants:\n  - name: chat\n    class: latency\n\t  selectors:\n      - executable: vllm\n",
			":4: found a tab character that violates indentation", nil, 6},
		{"unclosed flow sequence", "tenants:\n  - name: chat\n    selectors: [{executable: vllm}\n",
			":3: did not find expected ',' or ']'", nil, 4},
		{"unknown class", "tenants:\n  - name: chat\n    class: latncy\n    selectors:\n      - executable: vllm\n",
			`:3: class "latncy" is not one of latency, batch, best-effort`, nil, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tenants.yaml")
			if err := os.WriteFile(file, []byte(tc.head+rest), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			if code := checkConfig(file, false, &meteringConfig{}, nil, &stdout, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, stderr.String())
			}
			want := append(append([]string{tc.first}, tc.also...), wholeFile(tc.restAt)...)
			var problems []string
			for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if !strings.HasSuffix(l, ": INVALID") {
					problems = append(problems, strings.TrimPrefix(l, file))
				}
			}
			if len(problems) != len(want) {
				t.Fatalf("%d problems listed, want %d:\n%s", len(problems), len(want), stderr.String())
			}
			for i, w := range want {
				if !strings.HasPrefix(problems[i], w) {
					t.Errorf("problem %d is %q, want it to start with %q", i+1, problems[i], w)
				}
			}
		})
	}
}

// TestConfigCheckSimSources: with --backend=sim, --config.check holds a
// tenants file to what a start on the scenario does, with the start's
// words and line: a sim:// source of an application the scenario does not
// run is refused; without --backend=sim the file stays valid (its sources
// read no simulator); a scenario that cannot be read is named.
func TestConfigCheckSimSources(t *testing.T) {
	b, err := os.ReadFile("../../scenarios/h100-timeslice.tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "sim://chat", "sim://nosuch", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := bad + `:10: tenant "chat": latency_source sim://nosuch: sim: no tenant named "nosuch" in scenario h100-timeslice`
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"sim, good", []string{"--config.check=" + good, "--backend=sim"}, 0, nil},
		{"sim, no such application", []string{"--config.check=" + bad, "--backend=sim"}, 1, []string{refused, bad + ": INVALID"}},
		{"another scenario", []string{"--config.check=" + good, "--backend=sim", "--sim.scenario=h200-mig"}, 1, []string{good + `:18: tenant "recsys": latency_source sim://recsys: sim: no tenant named "recsys" in scenario h200-mig`}},
		{"no such scenario", []string{"--config.check=" + good, "--backend=sim", "--sim.scenario=nosuch"}, 1, []string{"--sim.scenario=nosuch: no such file, and not a built-in scenario", good + ": not checked"}},
		{"not sim", []string{"--config.check=" + bad}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			app := kingpin.New("vgpu_exporter", "")
			app.Terminate(nil)
			if code := run(context.Background(), app, tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
	// the start refuses the file with the same words
	_, err = buildOn(testConfig(t, "--backend=sim", "--tenants.config="+bad), gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)), log.NewNopLogger())
	if err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("the start's error %v, want one containing %q", err, refused)
	}
}

// --metering.* flags given beside a tenants file with a metering section
// are replaced by it, as documented: the start warns, naming the flags and
// both prices; before, they went unused without a word. Without the
// section, or without the flags, nothing is warned.
func TestMeteringFlagsReplacedWarned(t *testing.T) {
	dir := t.TempDir()
	write := func(name, metering string) string { return writeOneTenant(t, filepath.Join(dir, name), metering) }
	priced := write("priced.yaml", "metering:\n  currency: EUR\n  price_per_gpu_hour: 2.25\n")
	plain := write("plain.yaml", "")
	flags := []string{"--metering.currency=USD", "--metering.price-per-kwh=0.3"}
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"section and flags", append([]string{"--tenants.config=" + priced}, flags...), true},
		{"flags alone", append([]string{"--tenants.config=" + plain}, flags...), false},
		{"section alone", []string{"--tenants.config=" + priced}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
			svc, err := buildOn(testConfig(t, append([]string{"--backend=sim"}, tc.args...)...), clock, log.NewLogfmtLogger(&logs))
			if err != nil {
				t.Fatal(err)
			}
			svc.src.Close()
			want := `level=warn msg="the tenants file's metering section replaces every --metering.* flag: the flags given are not used" file=` + priced +
				` file_prices="2.25 EUR per GPU-hour" flags="--metering.currency --metering.price-per-kwh" flag_prices="0.3 USD per kWh"`
			if warned := strings.Contains(logs.String(), "metering section replaces"); warned != tc.warn || tc.warn && !strings.Contains(logs.String(), want) {
				t.Errorf("logs %s, want the warning %v: %s", logs.String(), tc.warn, want)
			}
		})
	}
}

// writeOneTenant writes at path a tenants file of one tenant (one that no
// built-in scenario runs) and the lines rest, and returns path.
func writeOneTenant(t *testing.T, path, rest string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("tenants:\n  - name: web\n    selectors: [{executable: vllm}]\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
