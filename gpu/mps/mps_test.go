package mps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// daemon answers like nvidia-cuda-mps-control talking to a daemon with two
// servers: 100 (clients 101, 102) and 200 (client 201). Percentages set on
// a server are kept in files and read back; it records the pipe directory
// it was given.
const daemon = `read -r cmd a b c < "$STDIN"
echo "$CUDA_MPS_PIPE_DIRECTORY" > "$D/pipe"
case "$cmd" in
get_server_list) printf '100\n200\n' ;;
get_client_list) case "$a" in 100) printf '101\n102\n' ;; 200) echo 201 ;; esac ;;
get_default_active_thread_percentage) echo 100.0 ;;
get_active_thread_percentage) if [ -f "$D/pct.$a" ]; then cat "$D/pct.$a"; else echo 100.0; fi ;;
set_active_thread_percentage) echo "$b.0" > "$D/pct.$a" ;;
set_device_pinned_mem_limit) ;;
*) echo "Unknown command $cmd" ;;
esac`

const uuid = "GPU-0"

type rig struct {
	fake *commandtest.Fake
	c    *Controller
	pipe string
}

func newRig(t *testing.T, daemonBody, hookBody string, mod func(*Options)) *rig {
	t.Helper()
	f := commandtest.New(t)
	pipe := filepath.Join(f.Dir, "mps-pipe")
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		ControlBinary: f.Script(t, "nvidia-cuda-mps-control", daemonBody),
		PipeDirectory: pipe,
		Timeout:       time.Second,
		Clock:         gpu.NewManualClock(time.Unix(1000, 0)),
		DeviceIndex:   func(u string) (int, bool) { return 3, u == uuid },
	}
	if hookBody != "" {
		opts.RestartHook = f.Script(t, "restart-hook", hookBody)
	}
	if mod != nil {
		mod(&opts)
	}
	return &rig{fake: f, c: New(opts), pipe: pipe}
}

// commands returns the daemon commands sent, in order.
func (r *rig) commands(t *testing.T) []string {
	t.Helper()
	s := strings.TrimSuffix(r.fake.Stdin(t, "nvidia-cuda-mps-control"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func fstr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// answerTimeout is the command timeout of a failure case: short where the
// fake program hangs (the case is about the timeout), generous where it
// answers, so that a loaded machine does not turn an answer into a timeout.
func answerTimeout(hangs bool) time.Duration {
	if hangs {
		return 300 * time.Millisecond
	}
	return 20 * time.Second
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, daemon, "", nil)
	if _, err := Detect(ctx, r.c.opts); err != nil {
		t.Fatalf("Detect: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(r.fake.Dir, "pipe")); strings.TrimSpace(string(got)) != r.pipe {
		t.Errorf("daemon saw CUDA_MPS_PIPE_DIRECTORY %q, want %s", got, r.pipe)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		body string
		want string
	}{
		{"no binary", func(o *Options) { o.ControlBinary = filepath.Join(r.fake.Dir, "absent") }, daemon, "--mps.control-binary"},
		{"binary not on PATH", func(o *Options) { o.ControlBinary = "no-such-mps-control-binary" }, daemon, "not found"},
		{"no pipe directory", func(o *Options) { o.PipeDirectory = filepath.Join(r.fake.Dir, "none") }, daemon, "--mps.pipe-directory"},
		{"daemon down", nil, `echo "Cannot find MPS control daemon process" >&2; exit 1`, "not answering"},
		{"garbage", nil, `echo '<html>'`, "unexpected reply"},
		{"hangs", nil, `sleep 30`, "killed after its timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := newRig(t, tc.body, "", func(o *Options) {
				o.Timeout = answerTimeout(tc.name == "hangs")
				if tc.mod != nil {
					tc.mod(o)
				}
			})
			c, err := Detect(ctx, rr.c.opts)
			if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Detect = %v, %v; want an error containing %q", c, err, tc.want)
			}
		})
	}
}

// A restart hook that cannot be run is said at detection, with the flag
// to fix, not first at a cap's failed restart; the MPS actuator is kept.
func TestDetectWarnsOfAnUnusableHook(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(hook string) string // the hook path given
		warn bool
	}{
		{"runs", func(h string) string { return h }, false},
		{"missing", func(h string) string { return h + ".absent" }, true},
		{"not on PATH", func(string) string { return "no-such-restart-hook" }, true},
		{"not executable", func(h string) string {
			if err := os.Chmod(h, 0o644); err != nil {
				t.Fatal(err)
			}
			return h
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := newRig(t, daemon, "exit 0", nil)
			opts := r.c.opts
			opts.RestartHook = tc.mod(opts.RestartHook)
			opts.Logger = log.NewLogfmtLogger(&buf)
			c, err := Detect(context.Background(), opts)
			if err != nil || c == nil {
				t.Fatalf("Detect = %v, %v", c, err)
			}
			warned := strings.Contains(buf.String(), "level=warn") && strings.Contains(buf.String(), "--mps.restart-hook") &&
				strings.Contains(buf.String(), opts.RestartHook)
			if warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, buf.String())
			}
		})
	}
}

func TestSetActiveThreads(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		pid      uint32
		fraction float64
		err      string
		sent     []string // daemon commands beyond the lookups
		states   string   // PID role pending effective, sorted
	}{
		{
			name: "server: set, read back, its clients pending", pid: 100, fraction: 0.454,
			sent:   []string{"set_active_thread_percentage 100 45", "get_active_thread_percentage 100"},
			states: "100 server nil 0.45; 101 client 0.45 nil; 102 client 0.45 nil",
		},
		{
			name: "client: pending only, nothing sent", pid: 201, fraction: 0.3,
			sent:   []string{"get_active_thread_percentage 200"},
			states: "201 client 0.3 nil",
		},
		{name: "not an MPS process", pid: 7, fraction: 0.5, err: "neither an MPS server nor an MPS client"},
		{name: "zero", pid: 100, fraction: 0, err: "outside (0, 1]"},
		{name: "above one", pid: 100, fraction: 1.5, err: "outside (0, 1]"},
		{name: "NaN", pid: 100, fraction: math.NaN(), err: "outside (0, 1]"},
		{name: "tiny rounds up to 1%", pid: 100, fraction: 0.001, sent: []string{"set_active_thread_percentage 100 1", "get_active_thread_percentage 100"},
			states: "100 server nil 0.01; 101 client 0.01 nil; 102 client 0.01 nil"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, daemon, "", nil)
			err := r.c.SetMPSActiveThreads(ctx, uuid, tc.pid, tc.fraction)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if len(r.c.States()) != 0 {
					t.Errorf("states %v after a refused change", r.c.States())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			for _, c := range r.commands(t) {
				if !strings.HasPrefix(c, "get_server_list") && !strings.HasPrefix(c, "get_client_list") {
					sent = append(sent, c)
				}
			}
			if fmt.Sprint(sent) != fmt.Sprint(tc.sent) {
				t.Errorf("sent %q, want %q", sent, tc.sent)
			}
			var got []string
			for _, s := range r.c.States() {
				got = append(got, fmt.Sprintf("%d %s %s %s", s.PID, s.Role, fstr(s.Pending), fstr(s.Effective)))
			}
			if strings.Join(got, "; ") != tc.states {
				t.Errorf("states %q, want %q", strings.Join(got, "; "), tc.states)
			}
		})
	}
}

func TestDaemonFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"exit status", `echo "connection refused" >&2; exit 1`, "exit status 1: connection refused"},
		{"garbage server list", `echo 'servers: a, b'`, "unexpected reply"},
		{"error reply with exit 0", `read -r cmd rest < "$STDIN"; case "$cmd" in get_server_list) echo 100;; get_client_list) ;; *) echo "Error: invalid percentage";; esac`, "refused by the daemon"},
		{"hang", `sleep 30`, "killed after its timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.body, "", func(o *Options) { o.Timeout = answerTimeout(tc.name == "hang") })
			err := r.c.SetMPSActiveThreads(ctx, uuid, 100, 0.5)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "MPS ") {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if len(r.c.States()) != 0 {
				t.Errorf("states %v after a failed change", r.c.States())
			}
		})
	}
}

func TestPinned(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, daemon, "", nil)
	if err := r.c.SetMPSPinnedMemoryLimit(ctx, uuid, 100, 3<<30+5); err != nil {
		t.Fatal(err)
	}
	if err := r.c.SetMPSPinnedMemoryLimit(ctx, uuid, 101, 1<<30); err != nil {
		t.Fatal(err)
	}
	var sets []string
	for _, c := range r.commands(t) {
		if strings.HasPrefix(c, "set_") {
			sets = append(sets, c)
		}
	}
	want := "[set_device_pinned_mem_limit 100 3 3072M]"
	if fmt.Sprint(sets) != want {
		t.Errorf("sent %v, want %s", sets, want)
	}
	if s, _ := r.c.State(uuid, 101); s.PendingPinnedBytes == nil || *s.PendingPinnedBytes != 1<<30 {
		t.Errorf("client 101 pinned limit pending %v, want 1 GiB", s.PendingPinnedBytes)
	}
	for _, tc := range []struct {
		name  string
		uuid  string
		bytes uint64
		want  error
		msg   string
	}{
		{"GPU without ordinal", "GPU-other", 1 << 30, gpu.ErrNotSupported, "ordinal"},
		{"below 1 MiB", uuid, 1000, nil, "at least 1 MiB"},
	} {
		err := r.c.SetMPSPinnedMemoryLimit(ctx, tc.uuid, 100, tc.bytes)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.msg)
		}
	}
	if got, want := fmt.Sprint(r.c.Capabilities(uuid)), "[mps_active_threads mps_pinned_memory]"; got != want {
		t.Errorf("Capabilities(%s) = %s, want %s", uuid, got, want)
	}
	if got, want := fmt.Sprint(r.c.Capabilities("GPU-other")), "[mps_active_threads]"; got != want {
		t.Errorf("Capabilities(GPU-other) = %s, want %s", got, want)
	}
}

// hook records its arguments (by commandtest) and the variables it gets.
const hookEnv = `env | grep -E '^(VGPU_|CUDA_MPS_)' | sort > "$D/hook.env"
`

func TestRestartClient(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		hook     string
		timeout  time.Duration
		err      string
		args     string
		env      string // substring of the sorted environment, lines joined by " "
		statePID uint32
		pending  string
		eff      string
	}{
		{
			name: "switch over to a new PID", hook: hookEnv + `echo "starting standby"; echo "pid=555"`,
			args:     "[tenant-201 201 GPU-0 0.3]",
			env:      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30 CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=3=2048M CUDA_MPS_PIPE_DIRECTORY=",
			statePID: 555, pending: "nil", eff: "0.3",
		},
		{
			name: "same PID when none printed", hook: hookEnv + `echo done`,
			args: "[tenant-201 201 GPU-0 0.3]", env: "VGPU_MPS_ACTIVE_THREAD_FRACTION=0.3 VGPU_PID=201 VGPU_TENANT=tenant-201",
			statePID: 201, pending: "nil", eff: "0.3",
		},
		{
			name: "hook fails", hook: `echo "standby has no memory" >&2; exit 3`,
			args: "[tenant-201 201 GPU-0 0.3]", err: "exit status 3: standby has no memory",
			statePID: 201, pending: "0.3", eff: "nil",
		},
		{
			name: "hook hangs", hook: `sleep 30`, timeout: 200 * time.Millisecond,
			args: "[tenant-201 201 GPU-0 0.3]", err: "killed after its timeout",
			statePID: 201, pending: "0.3", eff: "nil",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, daemon, tc.hook, func(o *Options) {
				if tc.timeout > 0 {
					o.RestartTimeout = tc.timeout
				}
			})
			if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, 0.3); err != nil {
				t.Fatal(err)
			}
			if err := r.c.SetMPSPinnedMemoryLimit(ctx, uuid, 201, 2<<30); err != nil {
				t.Fatal(err)
			}
			err := r.c.RestartClient(ctx, uuid, 201, "tenant-201")
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `tenant "tenant-201"`)) {
				t.Fatalf("error %v, want %q naming the tenant", err, tc.err)
			}
			if got := fmt.Sprint(r.fake.Calls(t, "restart-hook")); got != "["+tc.args+"]" {
				t.Errorf("hook calls %s, want [%s]", got, tc.args)
			}
			if tc.env != "" {
				data, _ := os.ReadFile(filepath.Join(r.fake.Dir, "hook.env"))
				env := strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", " ")
				if !strings.Contains(env, tc.env) {
					t.Errorf("hook environment %q lacks %q", env, tc.env)
				}
			}
			if succ, ok := r.c.Successor(uuid, 201); ok != (tc.statePID != 201) || (ok && succ != tc.statePID) {
				t.Errorf("Successor = %d %v, want %d", succ, ok, tc.statePID)
			}
			s, ok := r.c.State(uuid, tc.statePID)
			if !ok || fstr(s.Pending) != tc.pending || fstr(s.Effective) != tc.eff {
				t.Errorf("state of %d: %v %+v, want pending %s effective %s", tc.statePID, ok, s, tc.pending, tc.eff)
			}
			if tc.statePID != 201 {
				if _, ok := r.c.State(uuid, 201); ok {
					t.Error("the old PID is still tracked after the switch-over")
				}
			}
		})
	}
}

func TestRestartWithoutHook(t *testing.T) {
	r := newRig(t, daemon, "", nil)
	err := r.c.RestartClient(context.Background(), uuid, 201, "")
	if !errors.Is(err, gpu.ErrNotSupported) || !strings.Contains(err.Error(), "--mps.restart-hook") {
		t.Fatalf("error %v, want not supported naming the flag", err)
	}
}

// Without a restart hook a client's cap (or pinned memory limit) would
// never reach the client: the controller withholds both knobs, saying
// why; with one it withholds nothing. Before, it said nothing, and the
// tuner held such a cap pending for good.
func TestWithheldWithoutHook(t *testing.T) {
	for _, tc := range []struct {
		hook string
		want string
	}{{"", NoRestartHook}, {"echo ok", ""}} {
		c := newRig(t, daemon, tc.hook, nil).c
		for _, k := range []gpu.Knob{gpu.KnobMPSActiveThreads, gpu.KnobMPSPinnedMemory} {
			if got := c.Withheld(uuid, k); got != tc.want {
				t.Errorf("hook %q: %s withheld %q, want %q", tc.hook, k, got, tc.want)
			}
		}
		if got := c.Withheld(uuid, gpu.KnobPauseDuty); got != "" {
			t.Errorf("hook %q: %s withheld %q, want nothing", tc.hook, gpu.KnobPauseDuty, got)
		}
	}
}

func TestObserve(t *testing.T) {
	r := newRig(t, daemon, "", nil)
	if err := r.c.SetMPSActiveThreads(context.Background(), uuid, 201, 0.3); err != nil {
		t.Fatal(err)
	}
	r.c.Observe(uuid, 201, 0.5)
	if s, _ := r.c.State(uuid, 201); fstr(s.Pending) != "0.3" || fstr(s.Effective) != "0.5" {
		t.Errorf("after observing another value: %+v, want 0.3 pending, 0.5 effective", s)
	}
	r.c.Observe(uuid, 201, 0.3)
	if s, _ := r.c.State(uuid, 201); s.Pending != nil || fstr(s.Effective) != "0.3" {
		t.Errorf("after observing the pending value: %+v, want nothing pending", s)
	}
}

// Clients that have left their GPU's readings are forgotten a minute after
// they were last listed (or, never listed, after their state last changed);
// clients of a GPU the sample did not read, and servers, are kept.
func TestObserveReadingsForgetsExitedClients(t *testing.T) {
	const other = "GPU-other"
	type sample struct {
		after time.Duration
		pids  []uint32 // listed on uuid's device
		up    bool     // uuid's device read
	}
	listed := []uint32{201}
	for _, tc := range []struct {
		name    string
		samples []sample
		want    bool // 201's state kept
	}{
		{"listed", []sample{{0, listed, true}, {2 * time.Minute, listed, true}}, true},
		{"missing under a minute", []sample{{0, listed, true}, {59 * time.Second, nil, true}}, true},
		{"missing a minute", []sample{{0, listed, true}, {30 * time.Second, nil, true}, {30 * time.Second, nil, true}}, false},
		{"never listed, set a minute ago", []sample{{time.Minute, nil, true}}, false},
		{"never listed, set just now", []sample{{30 * time.Second, nil, true}}, true},
		{"its GPU not read", []sample{{0, listed, true}, {2 * time.Minute, nil, false}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(time.Unix(1000, 0))
			r := newRig(t, daemon, "", func(o *Options) { o.Clock = clock })
			if err := r.c.SetMPSActiveThreads(context.Background(), uuid, 201, 0.3); err != nil {
				t.Fatal(err)
			}
			r.c.Observe(other, 9, 0.5) // a client of a GPU these samples do not read
			for _, sm := range tc.samples {
				clock.Advance(sm.after)
				d := gpu.Device{UUID: uuid, Up: sm.up}
				for _, pid := range sm.pids {
					d.Processes = append(d.Processes, gpu.Process{PID: pid})
				}
				r.c.ObserveReadings(&gpu.Readings{Devices: []gpu.Device{d, {UUID: other}}})
			}
			if _, ok := r.c.State(uuid, 201); ok != tc.want {
				t.Errorf("201 kept %v, want %v", ok, tc.want)
			}
			if _, ok := r.c.State(other, 9); !ok {
				t.Error("the client of a GPU not read was forgotten")
			}
		})
	}
}

// A sampler subscriber: the readings give the effective fractions and the
// device ordinals (for pinned memory limits, without Options.DeviceIndex).
func TestObserveReadings(t *testing.T) {
	r := newRig(t, daemon, "", func(o *Options) { o.DeviceIndex = nil })
	if _, ok := r.c.deviceIndex(uuid); ok {
		t.Fatal("device ordinal known before any readings")
	}
	p := gpu.Process{PID: 201, MPSActiveThreads: gpu.Float(0.5)}
	r.c.ObserveReadings(&gpu.Readings{Devices: []gpu.Device{{UUID: uuid, Index: 5, Processes: []gpu.Process{p, {PID: 202}}}}})
	if i, ok := r.c.deviceIndex(uuid); !ok || i != 5 {
		t.Errorf("device ordinal %d %v, want 5", i, ok)
	}
	got := r.c.ClientStates()
	if len(got) != 1 || got[0].PID != 201 || fstr(got[0].Effective) != "0.5" || got[0].Pending != nil {
		t.Errorf("client states %+v, want PID 201 at 0.5 effective", got)
	}
}

func TestParsers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"", "[] <nil>"},
		{"100\n200\n", "[100 200] <nil>"},
		{" 100 200 \r\n", "[100 200] <nil>"},
		{"0", "[] unexpected reply"},
		{"100\nNo servers", "[] unexpected reply"},
		{"99999999999", "[] unexpected reply"},
	} {
		pids, err := parsePIDs(tc.in)
		if got := fmt.Sprint(pids, " ", err); !strings.HasPrefix(got, tc.want) {
			t.Errorf("parsePIDs(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"100.0\n", true}, {"45", true}, {"45%", true}, {"0", false}, {"101", false}, {"NaN", false}, {"", false}, {"50 50", false}} {
		if _, err := parsePercentage(tc.in); (err == nil) != tc.ok {
			t.Errorf("parsePercentage(%q): error %v, want ok %v", tc.in, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		pid  uint32
		isOK bool
	}{{"1234", 0, false}, {"log\npid=77\n", 77, true}, {"", 0, false}, {"pid=x", 0, false}, {"0", 0, false}} {
		if pid, ok := successorPID([]byte(tc.in)); pid != tc.pid || ok != tc.isOK {
			t.Errorf("successorPID(%q) = %d %v, want %d %v", tc.in, pid, ok, tc.pid, tc.isOK)
		}
	}
}

// The daemon's replies are parsed defensively: whatever it prints, the
// parsers return a valid value or an error, and never panic.
func FuzzParseReplies(f *testing.F) {
	for _, s := range []string{"", "100\n200\n", "100.0", "pid=5", "Error: x", "\x00\xff", "1e2", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if pids, err := parsePIDs(s); err == nil {
			for _, p := range pids {
				if p == 0 {
					t.Fatalf("parsePIDs(%q) gave PID 0", s)
				}
			}
		}
		if p, err := parsePercentage(s); err == nil && !(p > 0 && p <= 100) {
			t.Fatalf("parsePercentage(%q) = %v", s, p)
		}
		if pid, ok := successorPID([]byte(s)); ok && pid == 0 {
			t.Fatalf("successorPID(%q) gave PID 0", s)
		}
		_ = refused(s)
	})
}

// heldHook is a restart hook's body that notes its start and waits for
// the test's release (20 s at most).
const heldHook = `touch "$D/started"; i=0; while [ ! -f "$D/release" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done`

// heldRestart restarts the client pid through heldHook in the background
// once the hook has started, and returns the restart's outcome to come.
func (r *rig) heldRestart(t *testing.T, pid uint32) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.c.RestartClient(context.Background(), uuid, pid, "tenant-"+strconv.Itoa(int(pid))) }()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(r.fake.Dir, "started")); err == nil {
			return done
		}
		if i > 2000 {
			t.Fatal("the hook did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A restart hook runs outside the daemon's command lock: while it runs
// (minutes, on a host), the other clients' settings are made at once, and
// a value set for the restarted client meanwhile stays pending for its
// next restart, the successor having started with the one before it.
// (Before, every daemon command waited for the hook.)
func TestRestartHookOutsideCommandLock(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, daemon, heldHook+`; echo done`,
		func(o *Options) { o.RestartTimeout, o.Timeout = time.Minute, 20*time.Second })
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, 0.3); err != nil {
		t.Fatal(err)
	}
	done := r.heldRestart(t, 201)
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 101, 0.4); err != nil {
		t.Fatal(err)
	}
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, 0.2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the hook ended (%v) before the other settings were made: they waited for it", err)
	default:
	}
	if err := os.WriteFile(filepath.Join(r.fake.Dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, _ := r.c.State(uuid, 201); fstr(s.Pending) != "0.2" || fstr(s.Effective) != "0.3" {
		t.Errorf("client 201 after its restart: %+v, want 0.2 pending (set while the hook ran), 0.3 effective", s)
	}
	if s, _ := r.c.State(uuid, 101); fstr(s.Pending) != "0.4" {
		t.Errorf("client 101: %+v, want 0.4 pending", s)
	}
}

// A client whose restart hook runs is not forgotten, however long the
// hook keeps it off the readings: a hook that stops the old process at
// once and fails after more than forgetAfter leaves its pending value, as
// a quick one does. (Before, the readings' sweep dropped the client's
// state while the hook ran, and the failed restart lost the value.)
func TestClientKeptWhileItsHookRuns(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, daemon, heldHook+`; exit 3`,
		func(o *Options) { o.RestartTimeout = time.Minute })
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, 0.3); err != nil {
		t.Fatal(err)
	}
	done := r.heldRestart(t, 201)
	clk := r.c.opts.Clock.(*gpu.ManualClock)
	clk.Advance(2 * forgetAfter) // the GPU read, the client gone from it
	r.c.ObserveReadings(&gpu.Readings{Devices: []gpu.Device{{UUID: uuid, Up: true}}})
	if err := os.WriteFile(filepath.Join(r.fake.Dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the hook's exit 3 was not a failure")
	}
	if s, ok := r.c.State(uuid, 201); !ok || fstr(s.Pending) != "0.3" {
		t.Errorf("client 201 after its failed restart: %v %+v, want 0.3 still pending", ok, s)
	}
	r.c.ObserveReadings(&gpu.Readings{Devices: []gpu.Device{{UUID: uuid, Up: true}}})
	if _, ok := r.c.State(uuid, 201); ok {
		t.Error("client 201 still kept once its hook ended and it stayed gone")
	}
}
