package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/policies"
	slowloop "github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
)

// With --backend=sim and the tuner on, the exporter serves the tuner's
// metrics (and only then), its --tuner.interval and the simulator's pause
// period among them, and a clean
// exit restores and closes the journal.
func TestExporterServesTunerMetrics(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "tuner.jsonl")
	for _, tc := range []struct {
		name     string
		args     []string
		serve    bool
		interval string // vgpu_tuner_interval_seconds served
	}{
		{"off", nil, false, ""},
		{"enforce", []string{"--tuner.mode=enforce", "--tuner.journal=" + journal}, true, "15"},
		{"recommend on GPU 0 only, every 10 minutes", []string{"--tuner.gpu-mode=0=recommend", "--tuner.interval=10m"}, true, "600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour"}, tc.args...)...)
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			if (svc.tuner != nil) != tc.serve {
				t.Fatalf("tuner built: %v, want %v", svc.tuner != nil, tc.serve)
			}
			simRounds(t, svc, clock, 3)
			h, err := newHandler(handlerOptions{TelemetryPath: "/metrics", NewCollector: func(filters ...string) (prometheus.Collector, error) {
				return svc.withTuner(newCollector, log.NewNopLogger(), filters)
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"", "?collect[]=tuner", "?collect[]=tuner&collect[]=gpu"} {
				rr := httptest.NewRecorder()
				h.ServeHTTP(rr, httptest.NewRequest("GET", "/metrics"+q, nil))
				body := rr.Body.String()
				ms := []string{`vgpu_tuner_info{policy="autotune"} 1`, `vgpu_tuner_guard_refusals_total{guard="dwell"} 0`, `vgpu_tuner_actions_total{knob="mps_active_threads",outcome="failed"} 0`, "vgpu_tuner_interval_seconds", "\nvgpu_tuner_pause_period_seconds 0.5\n"}
				if tc.interval != "" {
					ms = append(ms, "\nvgpu_tuner_interval_seconds "+tc.interval+"\n")
				}
				for _, m := range ms {
					if strings.Contains(body, m) != tc.serve {
						t.Errorf("%s: serves %q: %v, want %v", q, m, !tc.serve, tc.serve)
					}
				}
				if q == "?collect[]=tuner" && tc.serve && strings.Contains(body, "vgpu_gpu_") {
					t.Errorf("collect[]=tuner serves GPU metrics")
				}
			}
			if svc.tuner != nil {
				if err := svc.tuner.Restore(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if _, err := os.Stat(journal); err != nil {
		t.Errorf("journal not created: %v", err)
	}
}

func TestTunerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--tuner.mode=enforce", "--tuner.interval=5s"}, ""},
		{[]string{"--tuner.mode=sometimes"}, "--tuner.mode"},
		{[]string{"--tuner.interval=0s"}, "--tuner.interval must be positive"},
		{[]string{"--tuner.gpu-mode=0"}, "want GPU=MODE"},
		{[]string{"--tuner.gpu-mode=0=fast"}, "unknown tuner mode"},
		{[]string{"--tuner.enable-knob=pause_duty", "--tuner.disable-knob=pause_duty"}, "--tuner.enable-knob and --tuner.disable-knob both name pause_duty"},
		{[]string{"--tuner.enable-knob=pause_duty", "--tuner.disable-knob=locked_clocks"}, ""},
		{[]string{"--tuner.policy=static-equal"}, ""},
		{[]string{"--tuner.slow-loop.every=5s", "--tuner.slow-loop.dwell=30s", "--tuner.slow-loop.cool-down=2m", "--tuner.slow-loop.hold=1h"}, ""},
		{[]string{"--tuner.slow-loop.every=0s"}, "--tuner.slow-loop.every must be positive"},
		{[]string{"--tuner.slow-loop.dwell=-1s"}, "--tuner.slow-loop.dwell must be positive"},
		{[]string{"--tuner.slow-loop.cool-down=0s"}, "--tuner.slow-loop.cool-down must be positive"},
		{[]string{"--tuner.slow-loop.hold=0s"}, "--tuner.slow-loop.hold must be positive"},
		{[]string{"--tuner.slow-loop.dwell=soon"}, "--tuner.slow-loop.dwell"},
		{[]string{"--tuner.policy=none"}, `--tuner.policy: unknown tuner policy "none" (known: autotune, best-effort, static-equal)`},
		{[]string{"--tuner.autotune-param=pause_max=0.5", "--tuner.autotune-param=pause_window=30s"}, ""},
		{[]string{"--tuner.autotune-param=pause_max=1.5"}, "--tuner.autotune-param: pause_max is a share, between 0 and 1"},
		// only the last of two values would hold, and the start's log
		// listed both
		{[]string{"--tuner.autotune-param=gain=1", "--tuner.autotune-param=gain=2"}, "--tuner.autotune-param: gain given twice: give it once"},
		{[]string{"--tuner.autotune-param=pause_mx=0.5"}, `--tuner.autotune-param: unknown parameter "pause_mx"`},
		{[]string{"--tuner.policy=static-equal", "--tuner.autotune-param=pause_max=0.5"}, `only the autotune policy has parameters, not "static-equal"`},
	} {
		cfg, err := parseArgs(t, tc.args...)
		if err == nil {
			err = cfg.validate()
		}
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
	}
}

// The --tuner.slow-loop.* flags set the autotune policy's planner; without
// them it keeps the planner's defaults, and a policy without a slow loop
// is left as it is.
func TestSlowLoopFlags(t *testing.T) {
	d := slowloop.Default()
	for _, tc := range []struct {
		name   string
		args   []string
		policy string
		want   *slowloop.Planner // nil: no slow loop
	}{
		{"defaults", nil, "autotune", d},
		{"shortened", []string{"--tuner.slow-loop.every=5s", "--tuner.slow-loop.dwell=30s", "--tuner.slow-loop.cool-down=90s", "--tuner.slow-loop.hold=2m"}, "autotune",
			func() *slowloop.Planner {
				p := *d
				p.Every, p.Dwell, p.CoolDown, p.Hold = 5*time.Second, 30*time.Second, 90*time.Second, 2*time.Minute
				return &p
			}()},
		{"a baseline has none", []string{"--tuner.slow-loop.dwell=30s"}, "static-equal", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseArgs(t, append(tc.args, "--tuner.policy="+tc.policy)...)
			if err == nil {
				err = cfg.validate()
			}
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policies.NewEngine(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			opts := pol.Configure(tuner.Options{}, nil)
			cfg.Tuner.SlowLoop.Apply(opts.Rebalance)
			got, _ := opts.Rebalance.(*slowloop.Planner)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("planner %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The exporter runs a baseline through the same engine: static-equal in
// enforce mode gives noisy-neighbour's two MPS tenants half each, and
// restores the originals at exit.
func TestExporterRunsAnyPolicy(t *testing.T) {
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.mode=enforce", "--tuner.policy=static-equal")
	svc, err := buildOn(cfg, clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	simRounds(t, svc, clock, 2)
	st := svc.tuner.Status()
	if st.Policy != baseline.StaticEqualName {
		t.Errorf("policy %q, want %s", st.Policy, baseline.StaticEqualName)
	}
	var got []string
	for _, d := range st.Recent {
		got = append(got, fmt.Sprintf("%s %s %s %s", d.Tenant, d.Knob, d.To, d.Outcome))
	}
	want := "[chat mps_active_threads 50% applied embed mps_active_threads 50% applied]"
	if fmt.Sprint(got) != want {
		t.Errorf("decisions %v, want %s", got, want)
	}
	decs, err := svc.tuner.Tuner().Restore(context.Background())
	if err != nil || len(decs) != 2 {
		t.Errorf("restore: %v, %v; want the two fractions set back", decs, err)
	}
}

// violating returns the snapshots of snapshot with chat missing its p99
// SLO: 10% of its 10 requests/s too slow.
func violating(snapshot func() *tenant.Snapshot, clock gpu.Clock) func() *tenant.Snapshot {
	start := clock.Now()
	return func() *tenant.Snapshot {
		s := *snapshot()
		n := 10 * clock.Now().Sub(start).Seconds()
		s.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 2, Window: 5 * time.Minute,
			Quantiles: map[float64]float64{0.99: 3}, RequestsTotal: n, GoodRequestsTotal: 0.9 * n, GoodKnown: true, SourceUp: true, SourceRead: true, Measured: true, WindowRequests: 3000}}}
		return &s
	}
}

// sourceOnly hides every actuator of the source it wraps: the readings
// of a host whose GPU backend changes nothing itself.
type sourceOnly struct{ gpu.Source }

// On a host whose MPS control daemon, nvidia-smi and rebalancing hook are
// fakes on PATH, the tuner detects them, exports which drives what, and in
// enforce mode an MPS cap reaches the daemon and the restart hook; in
// recommend mode no fake runs after detection.
func TestTunerDrivesOutsideActuators(t *testing.T) {
	for _, mode := range []string{"enforce", "recommend"} {
		t.Run(mode, func(t *testing.T) {
			f, pipe := fakeMPSDaemon(t)
			f.Script(t, "nvidia-smi", `echo "--set-timeslice"`)
			f.Script(t, "restart-hook", `exit 0`)
			f.Script(t, "rebalance-hook", `exit 0`)
			t.Setenv("PATH", f.Dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--mps.pipe-directory="+pipe,
				"--mps.restart-hook="+filepath.Join(f.Dir, "restart-hook"), "--tuner.rebalance-hook="+filepath.Join(f.Dir, "rebalance-hook"))
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			host := *cfg
			host.Backend, host.Tuner.Mode = backendNVML, mode
			host.Tuner.NodeLock = filepath.Join(t.TempDir(), "tuner.lock") // not the node's
			host.Actuators.PauseCgroupRoot = ""                            // whatever freezer this machine has
			snapshot := violating(svc.Snapshot, clock)
			var logged testutil.SyncBuffer // the hooks log from their own goroutines
			r, err := newTunerRunner(&host, sourceOnly{svc.src}, clock, snapshot, svc.Sampler().Subscribe, log.NewLogfmtLogger(&logged))
			if err != nil {
				t.Fatal(err)
			}
			// the defaults: a 30 s restore, a 2-minute restart hook
			if warned := strings.Contains(logged.String(), "is shorter than --mps.restart-hook.timeout"); warned != (mode == "enforce") {
				t.Errorf("the short restore deadline warned %v in %s (log %q)", warned, mode, logged.String())
			}
			got := map[string]string{}
			for _, a := range r.Status().Actuators {
				got[string(a.Knob)] = a.Backend
			}
			want := map[string]string{"mps_active_threads": "mps", "compute_timeslice": "nvidia-smi", "placement": "rebalance-hook", "mig_layout": "rebalance-hook"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("actuators %v, want %v", got, want)
			}
			detected := len(f.Calls(t, "nvidia-cuda-mps-control")) + len(f.Calls(t, "nvidia-smi"))
			// In enforce, the cap restarts the client through the hook, off the
			// round and in real time: its outcome is the first round's after
			// the hook returns. Each round waits for the hooks it started to be
			// settled, so that the hook is not given only the wall time the
			// rest of the 40 rounds take (a fraction of a second).
			mpsDecided := func() bool {
				return slices.ContainsFunc(r.Status().Recent, func(d tuner.Decision) bool {
					return d.Knob == gpu.KnobMPSActiveThreads && d.Outcome != tuner.OutcomeGuarded
				})
			}
			for i := 0; i < 40 && !mpsDecided(); i++ {
				clock.Advance(15 * time.Second)
				if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Tuner().RunOnce(context.Background(), snapshot()); err != nil {
					t.Fatal(err)
				}
				settleHooks(t, r.Tuner(), snapshot)
			}
			if !mpsDecided() {
				t.Fatal("the tuner never decided an MPS cap in 10 minutes of noisy-neighbour")
			}
			hooks := f.Calls(t, "restart-hook")
			calls := len(f.Calls(t, "nvidia-cuda-mps-control")) + len(f.Calls(t, "nvidia-smi")) + len(hooks) + len(f.Calls(t, "rebalance-hook"))
			switch mode {
			case "enforce":
				stdin, _ := os.ReadFile(filepath.Join(f.Dir, "nvidia-cuda-mps-control.stdin"))
				if !strings.Contains(string(stdin), "get_client_list 100") {
					t.Errorf("the daemon was not asked for the client: %q", stdin)
				}
				if len(hooks) == 0 || len(hooks[0]) != 4 || hooks[0][0] != "embed" || hooks[0][1] != "61002" || hooks[0][3] == "" {
					t.Errorf("restart hook calls %q, want embed 61002 GPU FRACTION", hooks)
				}
			case "recommend":
				if calls != detected {
					t.Errorf("recommend mode ran outside programs: %d calls after detection's %d", calls, detected)
				}
			}
			if err := r.Restore(); err != nil && mode == "recommend" {
				t.Fatal(err)
			}
		})
	}
}

// fakeMPSDaemon writes a fake MPS control daemon's client into a new fake
// directory, with its pipe directory: one server (PID 100) with
// noisy-neighbour's two clients, every percentage 100.
func fakeMPSDaemon(t *testing.T) (*commandtest.Fake, string) {
	t.Helper()
	f := commandtest.New(t)
	pipe := filepath.Join(f.Dir, "pipe")
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	f.Script(t, "nvidia-cuda-mps-control", `case "$(cat "$STDIN")" in
get_server_list*) echo 100 ;;
get_client_list*) printf '61001\n61002\n' ;;
*) echo 100.0 ;;
esac`)
	return f, pipe
}

// closeCounter is an actuator that holds something of its own.
type closeCounter struct{ n int }

func (c *closeCounter) Close() error { c.n++; return nil }

// The restore at exit closes the actuators that hold something of their
// own, never the GPU backend nor a source it wraps (the NVML backend under
// dcgm-exporter's, which detectActuators finds by unwrapping): the
// shutdown closes those after the pipeline stops.
func TestClosersAtExit(t *testing.T) {
	inner := &fakeSource{}
	wrapped, err := wrapDCGM(testConfig(t, "--backend=nvml", "--backend.dcgm-exporter.url=http://127.0.0.1:9400/metrics"), inner, log.NewNopLogger())
	if err != nil || wrapped == gpu.Source(inner) {
		t.Fatalf("wrapDCGM: %v, wrapped %v", err, wrapped != gpu.Source(inner))
	}
	pause := &closeCounter{}
	for _, tc := range []struct {
		name     string
		backends []tuner.NamedActuator
		want     []io.Closer
	}{
		{"the backend", []tuner.NamedActuator{{Name: "sim", Impl: inner}}, nil},
		{"the backend under dcgm-exporter's, and the pause",
			[]tuner.NamedActuator{{Name: "nvml", Impl: inner}, {Name: "pause", Impl: pause}}, []io.Closer{pause}},
		{"the wrapper", []tuner.NamedActuator{{Name: "nvml", Impl: wrapped}}, nil},
		{"nothing to close", []tuner.NamedActuator{{Name: "mps", Impl: struct{}{}}}, nil},
	} {
		if got := closersAtExit(tc.backends); !slices.Equal(got, tc.want) {
			t.Errorf("%s: closes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// --tuner.autotune-param sets the parameters of the policy the tuner runs.
func TestAutotuneParamFlag(t *testing.T) {
	cfg, err := parseArgs(t, "--tuner.autotune-param=pause_max=0.5", "--tuner.autotune-param=pause_step_max=0.4")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := cfg.Tuner.policy()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := pol.Decider.(*autotune.Autotune)
	if !ok {
		t.Fatalf("policy %T", pol.Decider)
	}
	want := autotune.DefaultParams()
	want.PauseMax, want.PauseStepMax = 0.5, 0.4
	if a.P != want {
		t.Errorf("params %+v, want %+v", a.P, want)
	}
}

// A kill-switch file whose directory is not there is warned of at start
// (the file could not be created when it is needed); one in a directory
// that exists is not.
func TestKillSwitchDirWarned(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file   string
		warned bool
	}{
		{filepath.Join(dir, "stop"), false},
		{filepath.Join(dir, "missing", "stop"), true},
		{filepath.Join(notDir, "stop"), true},
	} {
		var out strings.Builder
		warnKillSwitchDir(log.NewLogfmtLogger(&out), c.file)
		if got := strings.Contains(out.String(), "kill-switch-file is not there"); got != c.warned {
			t.Errorf("%s: warned %v, want %v (log %q)", c.file, got, c.warned, out.String())
		}
	}
}

// A --tuner.kill-switch-file that names a directory (a '/' at its end,
// '.', '..', a ConfigMap volume's ..data, a directory there or a link to
// one) is refused at start, naming the flag: a directory is always there,
// and the kill switch was engaged for good with no error. A file, there
// or not, is taken.
func TestKillSwitchFileNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stop")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		err  string
	}{
		{dir, "is a directory"},
		{filepath.Join(dir, "current"), "is a directory"},
		{dir + "/", "names a directory"},
		{dir + "/.", "names a directory"},
		{dir + "/..", "names a directory"},
		{dir + "/..data", "names a directory"},
		{dir + "/off/", "names a directory"},
		{"off/", "names a directory"},
		{file, ""},
		{filepath.Join(dir, "off"), ""},
		{filepath.Join(dir, ".off"), ""},
		{filepath.Join(dir, "missing", "off"), ""},
	} {
		_, err := parseArgs(t, "--tuner.kill-switch-file="+c.file)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), fmt.Sprintf("--tuner.kill-switch-file %q %s", c.file, c.err))) {
			t.Errorf("--tuner.kill-switch-file=%s: error %v, want %q", c.file, err, c.err)
		}
	}
}

// --tuner.restore-timeout reaches the tuner's runner (30 s without it).
func TestRestoreTimeoutFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 30 * time.Second},
		{[]string{"--tuner.restore-timeout=150s"}, 150 * time.Second},
	} {
		r := simRunner(t, c.args...)
		if got := r.RestoreTimeout(); got != c.want {
			t.Errorf("%v: restore timeout %v, want %v", c.args, got, c.want)
		}
	}
}

// simRunner is the tuner's runner of a simulated host in recommend mode
// with the flags args.
func simRunner(t *testing.T, args ...string) *tuner.Runner {
	t.Helper()
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.mode=recommend"}, args...)...)
	svc, err := buildOn(cfg, clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	r, err := newTunerRunner(cfg, sourceOnly{svc.src}, clock, svc.Snapshot, svc.Sampler().Subscribe, log.NewNopLogger())
	svc.src.Close()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A round's calls are bounded by four fifths of --tuner.interval, never
// below the longest of --mps.timeout and --nvidia-smi.timeout (a program
// a round's call runs is cut by its own timeout, not by the round's).
func TestRoundTimeoutFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 12 * time.Second},
		{[]string{"--tuner.interval=1s"}, 10 * time.Second},
		{[]string{"--tuner.interval=1s", "--nvidia-smi.timeout=2s", "--mps.timeout=3s"}, 3 * time.Second},
		{[]string{"--tuner.interval=1m"}, 48 * time.Second},
	} {
		r := simRunner(t, c.args...)
		if got := r.RoundTimeout(); got != c.want {
			t.Errorf("%v: round timeout %v, want %v", c.args, got, c.want)
		}
	}
}

// A restore deadline whose share for the hooks (four fifths) is shorter
// than one run of the MPS restart hook is warned of at start, the advice
// what the exit needs (5/4 of the hook's timeout per client, and the flag's
// help says so); one at least as long is not. (The advice was "longer than
// the hook takes", too short by a fifth.)
func TestRestoreTimeoutBelowRestartHookWarned(t *testing.T) {
	for _, c := range []struct {
		restore, hook time.Duration
		warned        bool
	}{
		{30 * time.Second, 2 * time.Minute, true},
		{2 * time.Minute, 2 * time.Minute, true}, // (the exit waits four fifths of it for a hook)
		{150 * time.Second, 2 * time.Minute, false},
		{5 * time.Minute, 2 * time.Minute, false},
		{30 * time.Second, 10 * time.Second, false},
	} {
		var out strings.Builder
		warnRestoreTimeout(log.NewLogfmtLogger(&out), c.restore, c.hook)
		if got := strings.Contains(out.String(), "restore-timeout (the exit's wait for a hook) is shorter than --mps.restart-hook.timeout"); got != c.warned {
			t.Errorf("restore %v, hook %v: warned %v, want %v (log %q)", c.restore, c.hook, got, c.warned, out.String())
		}
		if c.warned && !strings.Contains(out.String(), "at least 5/4 of the hook's timeout for every client") {
			t.Errorf("restore %v, hook %v: the warning's advice %q, want 5/4 of the hook's timeout per client", c.restore, c.hook, out.String())
		}
	}
	app := kingpin.New("vgpu_exporter", "")
	addFlags(app)
	if help := app.GetFlag("tuner.restore-timeout").Model().Help; !strings.Contains(help, "at least 5/4 of --mps.restart-hook.timeout for every MPS client") {
		t.Errorf("--tuner.restore-timeout's help %q, want 5/4 of the hook's timeout per client", help)
	}
}
