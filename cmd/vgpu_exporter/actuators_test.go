package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/kubeevict"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/nvidiasmi"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/rebalance"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func parseActuatorFlags(t *testing.T, args ...string) (*config, error) {
	t.Helper()
	app := kingpin.New("test", "")
	c := addFlags(app)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func TestActuatorFlags(t *testing.T) {
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "")
	c, err := parseActuatorFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	want := actuatorConfig{
		MPSControlBinary: "nvidia-cuda-mps-control", MPSPipeDirectory: "/tmp/nvidia-mps", MPSTimeout: mps.DefaultTimeout,
		MPSRestartTimeout: mps.DefaultRestartTimeout, NvidiaSMIPath: "nvidia-smi", NvidiaSMITimeout: nvidiasmi.DefaultTimeout,
		RebalanceTimeout: rebalance.DefaultTimeout, PauseCgroupRoot: "/sys/fs/cgroup", PausePeriod: pause.DefaultPeriod,
		EvictAPIServer: "https://kubernetes.default.svc", EvictTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
		EvictCAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	}
	if c.Actuators != want {
		t.Errorf("defaults %+v, want %+v", c.Actuators, want)
	}
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia/mps")
	if c, _ := parseActuatorFlags(t); c.Actuators.MPSPipeDirectory != "/run/nvidia/mps" {
		t.Errorf("pipe directory %q, want the environment's", c.Actuators.MPSPipeDirectory)
	}
	for _, tc := range []struct {
		args      []string
		want, not string // not: a follow-on error, not told
	}{
		{[]string{"--mps.timeout=0s"}, "--mps.timeout must be positive", ""},
		{[]string{"--tuner.rebalance-hook.timeout=-1s"}, "--tuner.rebalance-hook.timeout must be positive", ""},
		{[]string{"--mps.control-binary=", "--mps.restart-hook=/bin/true"}, "--mps.restart-hook needs the MPS actuator", ""},
		{[]string{"--nvidia-smi.timeout=soon"}, "--nvidia-smi.timeout", ""},
		{[]string{"--pause.period=0s"}, "--pause.period must be at least 50ms", "--pause.max"},
		{[]string{"--pause.period=-1s"}, "--pause.period must be at least 50ms", "--pause.max"},
		{[]string{"--pause.max=1s"}, "--pause.max must be 0 (0.9 of --pause.period) or between 10ms and --pause.period", ""},
		{[]string{"--pause.max=-1s"}, "--pause.max must be 0 (0.9 of --pause.period) or between 10ms and --pause.period", ""},
	} {
		if _, err := parseActuatorFlags(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%v: error %v, want %q (and no %q)", tc.args, err, tc.want, tc.not)
		}
	}
}

// A pulse period shorter than a freeze takes to settle, and a cap on
// every pause that would hold each to a few milliseconds, are refused,
// each naming its flag: a period of a nanosecond froze and thawed in a
// busy loop (its pause, 0.9 of it, truncated to 0, the pause in force
// reading 0 all the while).
func TestPauseFlagFloors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the error; "" where accepted
	}{
		{[]string{"--pause.period=50ms"}, ""},
		{[]string{"--pause.period=50ms", "--pause.max=10ms"}, ""},
		{[]string{"--pause.period=50ms", "--pause.max=50ms"}, ""},
		{[]string{"--pause.max=0s"}, ""},
		{[]string{"--pause.period=1ns"}, "--pause.period must be at least 50ms (a shorter one would be spent freezing and thawing), got 1ns"},
		{[]string{"--pause.period=1us"}, "--pause.period must be at least 50ms"},
		{[]string{"--pause.period=49ms"}, "--pause.period must be at least 50ms"},
		{[]string{"--pause.period=1us", "--pause.max=1ns"}, "--pause.period must be at least 50ms"},
		{[]string{"--pause.max=1ns"}, "--pause.max must be 0 (0.9 of --pause.period) or between 10ms and --pause.period, got 1ns"},
		{[]string{"--pause.max=9ms"}, "--pause.max must be 0 (0.9 of --pause.period) or between 10ms and --pause.period, got 9ms"},
	} {
		_, err := parseActuatorFlags(t, tc.args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v refused: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// clockSource is a GPU source that also changes clocks (like NVML).
type clockSource struct{ gpu.Source }

func (clockSource) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (clockSource) SetPowerLimit(context.Context, string, float64) error    { return nil }

// placeSource is a GPU source that also moves processes (like the
// simulator).
type placeSource struct{ clockSource }

func (placeSource) MoveProcess(context.Context, uint32, string) error { return nil }

type wrapped struct{ gpu.Source }

func (w wrapped) Inner() gpu.Source { return w.Source }

func TestDetectActuators(t *testing.T) {
	f := commandtest.New(t)
	pipe := filepath.Join(f.Dir, "pipe")
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	mpsBin := f.Script(t, "mps-control", `echo 100.0`)
	smi := f.Script(t, "nvidia-smi", `echo "--set-timeslice"`)
	hook := f.Script(t, "hook", `exit 0`)
	broken := f.Script(t, "broken", `exit 1`)
	all := actuatorConfig{MPSControlBinary: mpsBin, MPSPipeDirectory: pipe, NvidiaSMIPath: smi, RebalanceHook: hook}
	// The built-in eviction needs a CA that holds a certificate.
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	srv.Close()
	ca := filepath.Join(f.Dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	evict := actuatorConfig{RebalanceHook: kubeevict.Name, EvictAPIServer: kubeevict.DefaultAPIServer, EvictTokenFile: "token", EvictCAFile: ca}
	noCA := evict
	noCA.EvictCAFile = filepath.Join(f.Dir, "absent")
	hybrid := filepath.Join(f.Dir, "cgroup") // a hybrid host's v2 hierarchy under unified/
	if err := os.MkdirAll(filepath.Join(hybrid, "unified"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hybrid, "unified", "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// What the log says of plans where the simulator's hook is not used:
	// they are still applied, in the simulation.
	logHas := map[string]string{
		"simulator: the built-in eviction without its CA":                   "rebalancing hook not usable; plans are applied in the simulation only",
		"simulator: no hook program":                                        "only builtin:kubernetes-evict runs here; plans are applied in the simulation only",
		"simulator: the built-in eviction, no process moves to model it by": "rebalancing hook not usable; plans are only recommended",
	}
	for _, tc := range []struct {
		name    string
		backend string
		src     gpu.Source
		act     actuatorConfig
		want    string
	}{
		{"everything", backendNVML, clockSource{}, all, "[nvml mps nvidia-smi rebalance-hook]"},
		{"through a wrapping source", backendNVML, wrapped{clockSource{}}, all, "[nvml mps nvidia-smi rebalance-hook]"},
		{"simulator: its own only", backendSim, clockSource{}, all, "[sim]"},
		{"simulator: the built-in Kubernetes eviction, modelled", backendSim, placeSource{}, evict, "[rebalance-hook sim]"},
		{"simulator: the built-in eviction, no process moves to model it by", backendSim, clockSource{}, evict, "[sim]"},
		{"simulator: the built-in eviction without its CA", backendSim, placeSource{}, noCA, "[sim]"},
		{"simulator: no hook program", backendSim, placeSource{}, actuatorConfig{RebalanceHook: hook}, "[sim]"},
		{"no pipe directory, broken nvidia-smi, missing hook", backendNVML, nil,
			actuatorConfig{MPSControlBinary: mpsBin, MPSPipeDirectory: filepath.Join(f.Dir, "none"), NvidiaSMIPath: broken, RebalanceHook: filepath.Join(f.Dir, "absent")}, "[]"},
		{"disabled by empty paths", backendNVML, nil, actuatorConfig{}, "[]"},
		{"the built-in Kubernetes eviction", backendNVML, nil, evict, "[rebalance-hook]"},
		{"the built-in Kubernetes eviction without its CA", backendNVML, nil, noCA, "[]"},
		{"a cgroup freezer", backendNVML, nil, actuatorConfig{PauseCgroupRoot: hybrid, PausePeriod: pause.DefaultPeriod}, "[pause]"},
		{"no cgroup freezer", backendNVML, nil, actuatorConfig{PauseCgroupRoot: pipe, PausePeriod: pause.DefaultPeriod}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config{Backend: tc.backend, Actuators: tc.act}
			var logs strings.Builder
			bs := detectActuators(context.Background(), cfg, tc.src, log.NewLogfmtLogger(&logs))
			if want := logHas[tc.name]; want != "" && (!strings.Contains(logs.String(), want) || !strings.Contains(want, "only recommended") && strings.Contains(logs.String(), "only recommended")) {
				t.Errorf("logs %s, want them to say %q", logs.String(), want)
			}
			var names []string
			for _, b := range bs {
				names = append(names, b.Name)
			}
			if got := fmt.Sprint(names); got != tc.want {
				t.Errorf("backends %s, want %s", got, tc.want)
			}
			for _, b := range bs {
				impl := b.Impl
				if m, ok := impl.(rebalance.Modelled); ok {
					if tc.backend != backendSim || any(m.Model) != any(tc.src) {
						t.Errorf("backend %s models moves in %T on --backend=%s", b.Name, m.Model, tc.backend)
					}
					impl = m.Hook
					if got := fmt.Sprint(tuner.DescribeActuators(bs)); !strings.Contains(got, "{placement rebalance-hook}") || !strings.Contains(got, "{mig_layout rebalance-hook}") {
						t.Errorf("on the simulator the plans' knobs are described as %s, want the rebalancing hook's", got)
					}
				} else if b.Name == "rebalance-hook" && tc.backend == backendSim {
					t.Errorf("the simulator's rebalancing hook %T models nothing", impl)
				}
				if _, builtin := impl.(*kubeevict.Evictor); builtin != (b.Name == "rebalance-hook" && tc.act.RebalanceHook == kubeevict.Name) {
					t.Errorf("backend %s is %T", b.Name, b.Impl)
				}
			}
			if len(tuner.ImplsOf(bs)) != len(bs) {
				t.Error("tuner.ImplsOf lost backends")
			}
		})
	}
}

// On a host, a start with the tuner off thaws a tenant the journal holds
// paused through the cgroup freezer under --pause.cgroup-root (here a
// pod's cgroup v2 left frozen), and closes its original; without a
// freezer the tenant stays paused, the original open, and the log says why.
func TestThawWithTunerOffOnAHost(t *testing.T) {
	const pod = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2c1a2b_3c4d_5e6f_7a8b_9c0d1e2f3a4b.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"
	for _, c := range []struct {
		name    string
		freezer bool
		freeze  string // the pod's cgroup.freeze after the start
		open    int
		log     string
	}{
		{"a cgroup v2 freezer", true, "0", 0, "tuner restored an original setting"},
		{"no freezer", false, "1", 1, "not thawed: no pause actuator on this host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cgroups, proc := filepath.Join(dir, "cgroup"), filepath.Join(dir, "proc")
			frozen := filepath.Join(cgroups, filepath.FromSlash(pod))
			for _, d := range []string{frozen, filepath.Join(proc, "4711")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			files := map[string]string{
				filepath.Join(frozen, "cgroup.freeze"): "1", filepath.Join(frozen, "cgroup.events"): "populated 1\nfrozen 1\n",
				filepath.Join(proc, "4711", "cgroup"): "0::" + pod + "\n",
				filepath.Join(dir, "journal"):         `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"pause_duty","pid":4711},"tenant":"train","from":{"kind":"duty","num":0},"pids":[4711]}` + "\n",
			}
			if c.freezer {
				files[filepath.Join(cgroups, "cgroup.controllers")] = ""
			}
			for p, s := range files {
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig(t, "--backend=nvml", "--tuner.journal="+filepath.Join(dir, "journal"), "--pause.cgroup-root="+cgroups, "--proc.root="+proc)
			var logs strings.Builder
			thawWithTunerOff(cfg, nil, gpu.RealClock{}, log.NewLogfmtLogger(&logs))
			if b, _ := os.ReadFile(filepath.Join(frozen, "cgroup.freeze")); strings.TrimSpace(string(b)) != c.freeze {
				t.Errorf("cgroup.freeze %q after the start, want %q", b, c.freeze)
			}
			if origs, err := tuner.ReadJournalOriginals(cfg.Tuner.Journal); err != nil || len(origs) != c.open {
				t.Errorf("%d open originals (%v), want %d", len(origs), err, c.open)
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("no %q in the log:\n%s", c.log, logs.String())
			}
		})
	}
}

// An outside program killed at its timeout says how long that was and the
// flag that sets it, through the options the flags make: nvidia-smi, the
// MPS control daemon's client, the MPS restart hook and the rebalancing
// hook; and the built-in Kubernetes eviction, under the rebalancing hook's
// timeout. (Before, each said only "killed after its timeout", and the
// eviction "context deadline exceeded".)
func TestTimeoutsNameTheirFlags(t *testing.T) {
	ctx := context.Background()
	f := commandtest.New(t)
	hang := f.Script(t, "hang", "sleep 30")
	answer := f.Script(t, "mps-control", "echo 100.0")
	c, err := parseActuatorFlags(t, "--nvidia-smi.path="+hang, "--nvidia-smi.timeout=200ms",
		"--mps.control-binary="+hang, "--mps.pipe-directory="+t.TempDir(), "--mps.timeout=210ms",
		"--mps.restart-hook="+hang, "--mps.restart-hook.timeout=220ms",
		"--tuner.rebalance-hook="+hang, "--tuner.rebalance-hook.timeout=230ms")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Actuators
	logger := log.NewNopLogger()
	_, smiErr := nvidiasmi.Detect(ctx, smiOptions(a, logger))
	_, mpsErr := mps.Detect(ctx, mpsOptions(a, c.ProcRoot, logger))
	withDaemon := a
	withDaemon.MPSControlBinary = answer
	hookErr := mps.New(mpsOptions(withDaemon, c.ProcRoot, logger)).RestartClient(ctx, "GPU-0", 7, "embed")
	r, err := rebalancer(a, logger)
	if err != nil {
		t.Fatal(err)
	}
	planErr := r.Rebalance(ctx, gpu.Plan{Moves: []gpu.Move{{Tenant: "embed", PID: 7, ToUUID: "GPU-1"}}})
	// the built-in eviction, whose API server never answers: once it sees
	// the client go, it drops the connection. (Returning would answer 200,
	// which the client could still read: at its deadline it sends TLS's
	// close_notify, which ends this handler, before it closes its socket,
	// and net/http takes a response that races the deadline.)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // (then the server sees the client go)
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	ca, token := filepath.Join(f.Dir, "ca.crt"), filepath.Join(f.Dir, "token")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.RebalanceHook, a.EvictAPIServer, a.EvictTokenFile, a.EvictCAFile = kubeevict.Name, srv.URL, token, ca
	e, err := rebalancer(a, logger)
	if err != nil {
		t.Fatal(err)
	}
	evictErr := e.Rebalance(ctx, gpu.Plan{Moves: []gpu.Move{{Tenant: "embed", Pod: &gpu.Pod{Namespace: "x", Name: "embed-0"}, ToUUID: "GPU-1"}}})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{smiErr, "killed after its timeout of 200ms (--nvidia-smi.timeout)"},
		{mpsErr, "killed after its timeout of 210ms (--mps.timeout)"},
		{hookErr, "killed after its timeout of 220ms (--mps.restart-hook.timeout)"},
		{planErr, "killed after its timeout of 230ms (--tuner.rebalance-hook.timeout)"},
		{evictErr, "stopped at its timeout of 230ms (--tuner.rebalance-hook.timeout)"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}

// On the simulator a --mps.restart-hook is not run, and the log says so,
// naming it, as it says of a --tuner.rebalance-hook program; before, it
// was ignored without a word.
func TestSimRestartHookWarned(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  actuatorConfig
		warn bool
	}{
		{"a restart hook", actuatorConfig{MPSRestartHook: "/usr/local/bin/restart-client"}, true},
		{"none", actuatorConfig{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			detectActuators(context.Background(), &config{Backend: backendSim, Actuators: tc.act}, clockSource{}, log.NewLogfmtLogger(&logs))
			warned := strings.Contains(logs.String(), `level=warn msg="MPS restart hook not run on the simulator`) &&
				strings.Contains(logs.String(), "hook=/usr/local/bin/restart-client")
			if warned != tc.warn {
				t.Errorf("logs %s, want the hook warned of: %v", logs.String(), tc.warn)
			}
		})
	}
}
