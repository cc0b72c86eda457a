package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/vgpu-exporter/vgpu_exporter/exposition"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
)

func readBuiltin(t *testing.T, name string) []byte {
	t.Helper()
	b, err := scenarios.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestResolveScenario(t *testing.T) {
	scenario := readBuiltin(t, "h100-timeslice.yaml")
	tenants := readBuiltin(t, "h100-timeslice.tenants.yaml")

	dir := t.TempDir()
	withCompanion := filepath.Join(dir, "mine.yaml")
	alone := filepath.Join(dir, "sub", "alone.yml")
	broken := filepath.Join(dir, "broken.yaml")
	for p, data := range map[string][]byte{
		withCompanion:                           scenario,
		filepath.Join(dir, "mine.tenants.yaml"): tenants,
		alone:                                   scenario,
		broken:                                  []byte("name: x\ngpus: 3\n"),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	builtin := fstest.MapFS{
		"tiny.yaml":         {Data: scenario},
		"tiny.tenants.yaml": {Data: tenants},
		"bare.yaml":         {Data: scenario},
		"bad.yaml":          {Data: []byte("name: bad\ngpus: 3\n")},
	}

	// A second library, like the trace-replay scenarios: its own
	// directory, companion and a trace its scenario names beside it.
	traced := func(file string) []byte {
		return []byte("name: traced\ngpus: [{model: H100-SXM5-80GB}]\ntenants:\n" +
			"  - {name: a, workload: {type: llm, params: 1e9, arrival: {process: trace, file: " + file + "}}}\n")
	}
	second := fstest.MapFS{
		"replay/other.yaml":         {Data: scenario},
		"replay/other.tenants.yaml": {Data: tenants},
		"replay/traced.yaml":        {Data: traced("t.csv")},
		"replay/t.csv":              {Data: []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\n2023-11-16 18:15:47,396,109\n")},
		"replay/lost.yaml":          {Data: traced("gone.csv")},
	}
	libs := []scenarios.Library{{FS: builtin, Dir: "."}, {FS: second, Dir: "replay"}}

	// A companion that is no regular file (a directory, a link to nothing)
	// is still the companion, refused where it is read, not taken as no
	// tenants file (every process unassigned).
	dirCompanion, linkCompanion := filepath.Join(dir, "d.yaml"), filepath.Join(dir, "l.yaml")
	for _, p := range []string{dirCompanion, linkCompanion} {
		if err := os.WriteFile(p, scenario, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.tenants.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone.yaml"), filepath.Join(dir, "l.tenants.yaml")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		arg         string
		wantPath    string // companion file
		wantBuiltin string // companion built-in name
		wantErr     []string
	}{
		{arg: "tiny", wantBuiltin: "tiny.tenants.yaml"},
		{arg: "tiny.yaml", wantBuiltin: "tiny.tenants.yaml"},
		{arg: "bare"},
		{arg: "other", wantBuiltin: "replay/other.tenants.yaml"},
		{arg: "traced"},
		{arg: "lost", wantErr: []string{"built-in scenario lost: replay/lost.yaml:4: open replay/gone.csv: file does not exist"}},
		{arg: withCompanion, wantPath: filepath.Join(dir, "mine.tenants.yaml")},
		{arg: alone},
		{arg: "nope", wantErr: []string{"--sim.scenario=nope", "not a built-in scenario", "bad, bare, lost, other, tiny, traced"}},
		{arg: "../tiny", wantErr: []string{"not a built-in scenario"}},
		{arg: "tiny.tenants", wantErr: []string{"not a built-in scenario"}},
		{arg: "bad", wantErr: []string{"built-in scenario bad: bad.yaml:2"}},
		{arg: broken, wantErr: []string{"broken.yaml"}},
		{arg: dirCompanion, wantPath: filepath.Join(dir, "d.tenants.yaml")},
		{arg: linkCompanion, wantPath: filepath.Join(dir, "l.tenants.yaml")},
	} {
		sc, ts, err := resolveScenario(tc.arg, libs...)
		if len(tc.wantErr) > 0 {
			if err == nil {
				t.Errorf("%s: no error", tc.arg)
				continue
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tc.arg, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if sc == nil {
			t.Errorf("%s: nil scenario", tc.arg)
		}
		if ts.Path != tc.wantPath || ts.Name != tc.wantBuiltin {
			t.Errorf("%s: companion %+v, want path %q builtin %q", tc.arg, ts, tc.wantPath, tc.wantBuiltin)
		}
		if tc.wantBuiltin != "" && len(ts.Data) == 0 {
			t.Errorf("%s: built-in companion without data", tc.arg)
		}
	}

	// Two built-in scenarios of one name are an error, not a silent choice.
	dup := scenarios.Library{FS: fstest.MapFS{"replay/tiny.yaml": {Data: scenario}}, Dir: "replay"}
	if _, _, err := resolveScenario("tiny", append(libs, dup)...); err == nil || !strings.Contains(err.Error(), "same name") {
		t.Errorf("duplicate built-in name: %v", err)
	}
}

// Every built-in scenario loads, runs and has a valid companion tenants
// file whose tenants all appear in the snapshot. It is read from the
// binary: the start needs no file on disk, not even a temporary directory
// (TMPDIR names none).
func TestBuiltinScenariosBuild(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "absent"))
	// Names fails when two built-in scenarios share a name.
	names, err := scenarios.Names()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 || !slices.Contains(names, defaultScenario) {
		t.Fatalf("built-in scenarios %v lack the default %q", names, defaultScenario)
	}
	// The trace-replay scenarios can be chosen by name too.
	if !slices.Contains(names, "diurnal-shift") {
		t.Errorf("built-in scenarios %v lack the trace replay diurnal-shift", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, "--backend=sim", "--sim.scenario="+name)
			clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			if svc.TenantsFile() != "" {
				t.Errorf("built-in tenants file should not be reloadable from disk, got %q", svc.TenantsFile())
			}
			// Rates need an interval: two samples, 5 s apart.
			for i := range 2 {
				if i > 0 {
					clock.Advance(5 * time.Second)
				}
				if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			snap := svc.Snapshot()
			if snap == nil || !svc.Ready() {
				t.Fatal("no snapshot after a sample")
			}
			if len(snap.Tenants) == 0 {
				t.Fatalf("no tenants from %s.tenants.yaml", name)
			}
			if snap.Readings.Backend != "sim" {
				t.Errorf("backend %q", snap.Readings.Backend)
			}
			// The whole scrape, exporter metrics included, is promlint-clean
			// and every collector succeeds.
			h := serviceHandler(t, svc, selfRegistry())
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body := rec.Body.String()
			if rec.Code != 200 || !strings.Contains(body, "vgpu_tenant_sm_active_ratio") {
				t.Fatalf("scrape: %d, no per-tenant SM activity", rec.Code)
			}
			if regexp.MustCompile(`vgpu_scrape_collector_success\{collector="[a-z]+"\} 0`).MatchString(body) {
				t.Errorf("a collector failed:\n%s", grepLines(body, "vgpu_scrape_collector_success"))
			}
			problems, err := promlint.New(strings.NewReader(body)).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

func TestTenantsFlagOverridesCompanion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(p, []byte("tenants:\n  - name: solo\n    class: batch\n    selectors:\n      - executable: vllm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "--backend=sim", "--tenants.config="+p)
	svc, err := build(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	if svc.TenantsFile() != p {
		t.Errorf("reload file %q, want %q", svc.TenantsFile(), p)
	}
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := svc.Snapshot()
	if len(snap.Tenants) != 1 || snap.Tenants[0].Name != "solo" {
		t.Errorf("tenants %+v", snap.Tenants)
	}
	// A bad tenants file stops the start with the file named.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tenants:\n  - nmae: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := build(testConfig(t, "--backend=sim", "--tenants.config="+bad), log.NewNopLogger()); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad tenants file: %v", err)
	}
}

// The simulator runs on the real clock: later samples see later model time.
func TestSimFollowsClock(t *testing.T) {
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "--backend=sim")
	src, _, err := openSim(cfg, clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r1, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	r2, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.Time.Sub(r1.Time); got != 10*time.Second {
		t.Errorf("model time advanced %s, want 10s", got)
	}
}

// A built-in scenario finds the trace it names relative to itself.
func TestBuiltinScenarioWithTrace(t *testing.T) {
	base := string(readBuiltin(t, "h100-timeslice.yaml"))
	const poisson = "arrival: {process: poisson, rate: 3}"
	if !strings.Contains(base, poisson) {
		// A skip here would let the test pass without checking anything.
		t.Fatalf("h100-timeslice.yaml has no %q line to replace with a trace; update this test", poisson)
	}
	withTrace := strings.Replace(base, poisson, "arrival: {process: trace, file: traces/conv.csv}", 1)
	trace := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:15:46.6805900,374,44\n" +
		"2023-11-16 18:15:50.9951690,396,109\n" +
		"2023-11-16 18:15:51.4848370,879,143\n"
	builtin := fstest.MapFS{
		"replay.yaml":     {Data: []byte(withTrace)},
		"traces/conv.csv": {Data: []byte(trace)},
		"missing.yaml":    {Data: []byte(strings.Replace(base, poisson, "arrival: {process: trace, file: traces/nope.csv}", 1))},
	}
	lib := scenarios.Library{FS: builtin, Dir: "."}
	if _, _, err := resolveScenario("replay", lib); err != nil {
		t.Fatalf("built-in scenario with a trace: %v", err)
	}
	_, _, err := resolveScenario("missing", lib)
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") || strings.Contains(err.Error(), os.TempDir()) {
		t.Errorf("missing trace: %v (want the built-in file named, no temporary path)", err)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A reload of a bad tenants file (one the simulator's scenario refuses
// too) keeps the last good configuration in use and is reported by
// vgpu_config_last_reload_successful; fixing the file and reloading again
// takes the new tenants.
func TestReloadKeepsLastGoodConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tenants.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tenants:\n  - name: solo\n    class: batch\n    selectors:\n      - executable: vllm\n")
	clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	svc, err := buildOn(testConfig(t, "--backend=sim", "--tenants.config="+p), clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	h := serviceHandler(t, svc, nil)
	step := func(what, reloadBody string, wantCode int, wantMetrics ...string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/-/reload", nil))
		if rec.Code != wantCode || !strings.Contains(rec.Body.String(), reloadBody) {
			t.Errorf("%s: reload answered %d %q, want %d with %q", what, rec.Code, rec.Body.String(), wantCode, reloadBody)
		}
		clock.Advance(time.Second)
		if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for _, m := range wantMetrics {
			if !strings.Contains(rec.Body.String(), m) {
				t.Errorf("%s: scrape lacks %q:\n%s", what, m, grepLines(rec.Body.String(), "vgpu_config_"))
			}
		}
	}
	step("good file", "Reloaded", 200, "vgpu_config_last_reload_successful 1", `tenant="solo"`)
	write("tenants:\n  - nmae: duo\n")
	step("bad file", p+":2", 500, "vgpu_config_last_reload_successful 0", `tenant="solo"`, "vgpu_config_reload_failures_total 1")
	// A reload is held to what a start on the simulator is: the SLOs the
	// scenario judges, sim:// sources it serves (both were installed).
	write("tenants:\n  - name: watcher\n    selectors:\n      - executable: vllm\n    latency_source: {url: \"sim://chta\", preset: vllm-e2e}\n")
	step("a sim:// source of no application", p+`:5: tenant "watcher": latency_source sim://chta`, 500, "vgpu_config_last_reload_successful 0", `tenant="solo"`, "vgpu_config_reload_failures_total 2")
	write("tenants:\n  - name: chat\n    class: latency\n    selectors:\n      - executable: vllm\n    slo: {quantile: 0.99, target: 2s}\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n")
	step("an SLO the scenario does not judge", p+":6 gives the tuner e2e quantile 0.99 <= 2s", 500, "vgpu_config_last_reload_successful 0", `tenant="solo"`, "vgpu_config_reload_failures_total 3")
	write("tenants:\n  - name: duo\n    class: batch\n    selectors:\n      - executable: vllm\n")
	step("fixed file", "Reloaded", 200, "vgpu_config_last_reload_successful 1", `tenant="duo"`)
}

// The --metering.* flags price the cost series while the tenants file has
// no metering section; a file's section replaces them on reload, and a
// reload of a file with bad prices fails naming the line and keeps the
// prices in use.
func TestPricesFromFlagsAndReload(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tenants.yaml")
	const tenants = "tenants:\n  - name: solo\n    selectors:\n      - executable: vllm\n"
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(tenants+content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	svc, err := buildOn(testConfig(t, "--backend=sim", "--tenants.config="+p, "--metering.currency=EUR", "--metering.price-per-gpu-hour=1.8"), clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	h := serviceHandler(t, svc, nil)
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil { // the counters' start
		t.Fatal(err)
	}
	costLine := regexp.MustCompile(`(?m)^vgpu_tenant_cost_total\{component="([a-z_]+)",currency="([A-Z]+)",.*tenant="solo".*\} ([0-9.e+-]+)$`)
	step := func(what string, wantCode int, want ...string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/-/reload", nil))
		if rec.Code != wantCode {
			t.Errorf("%s: reload answered %d %q, want %d", what, rec.Code, rec.Body.String(), wantCode)
		}
		clock.Advance(time.Second)
		if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		var got []string
		for _, m := range costLine.FindAllStringSubmatch(rec.Body.String(), -1) {
			if v, err := strconv.ParseFloat(m[3], 64); err != nil || v <= 0 {
				t.Errorf("%s: %s %s cost %s", what, m[2], m[1], m[3])
			}
			got = append(got, m[2]+" "+m[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: solo's cost series %q, want %q", what, got, want)
		}
	}
	step("the flags' prices", 200, "EUR gpu_time")
	write("metering: {currency: USD, price_per_kwh: 0.2}\n")
	step("the file's prices", 200, "EUR gpu_time", "USD energy")
	write("metering: {currency: USD, price_per_kwh: -0.2}\n")
	step("bad prices", 500, "EUR gpu_time", "USD energy")
}

// serviceHandler is the exporter's HTTP handler over svc with the real
// collector, at /metrics; self holds the exporter's own metrics (or nil).
func serviceHandler(tb testing.TB, svc *service, self *exposition.Self) http.Handler {
	tb.Helper()
	h, err := newHandler(handlerOptions{
		TelemetryPath: "/metrics",
		Self:          self,
		NewCollector: func(filters ...string) (prometheus.Collector, error) {
			return newCollector(svc.Snapshot, log.NewNopLogger(), filters...)
		},
		Reload:    svc.Reload,
		Version:   svc.Version,
		Subscribe: svc.Subscribe,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// A tenants file whose sim:// latency source the simulator could never
// answer is refused at start, by its line, instead of serving a tenant
// whose latency is never read; with the simulated settings kept in a file
// (--sim.settings-file) too.
func TestSimSourceOfNoTenantRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tenants.yaml")
	const file = "tenants:\n  - name: watcher\n    selectors:\n      - executable: vllm\n    latency_source: {url: \"sim://chta\", preset: vllm-e2e}\n"
	if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"settings in memory", nil},
		{"settings in a file", []string{"--sim.settings-file=" + filepath.Join(t.TempDir(), "settings.json")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
			svc, err := buildOn(testConfig(t, append([]string{"--backend=sim", "--tenants.config=" + p}, tc.args...)...), clock, log.NewNopLogger())
			if err == nil {
				svc.src.Close()
				t.Fatal("a sim:// source of no simulated application was accepted")
			}
			if want := p + `:5: tenant "watcher": latency_source sim://chta: sim: no tenant named "chta"`; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one containing %q", err, want)
			}
		})
	}
}

// The start's warning names the seed the simulator runs: the scenario's
// own without --sim.seed (it said seed=0), else the flag's.
func TestSimLogsSeedRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "seed=1"},
		{[]string{"--sim.seed=42"}, "seed=42"},
	} {
		var buf strings.Builder
		svc, err := buildOn(testConfig(t, append([]string{"--backend=sim", "--sim.scenario=h100-timeslice"}, tc.args...)...), gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)), log.NewLogfmtLogger(log.NewSyncWriter(&buf)))
		if err != nil {
			t.Fatal(err)
		}
		svc.src.Close()
		line := grepLines(buf.String(), "serving SIMULATED")
		if !strings.Contains(line, tc.want) {
			t.Errorf("%v: %q lacks %s", tc.args, line, tc.want)
		}
	}
}
