package tuner

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

var (
	_ MPSResolver       = (*mps.Controller)(nil)
	_ MPSCachedResolver = (*mps.Controller)(nil)
)

// mpsDaemon is an MPS controller of a daemon whose server 100 runs at
// server% active threads (a shell word) with clients 7 and 8, restarting a
// client with hook ("": no restart hook), on clk; its fake records the
// hook's calls.
func mpsDaemon(t *testing.T, server, hook string, clk gpu.Clock) (*mps.Controller, *commandtest.Fake) {
	t.Helper()
	f := commandtest.New(t)
	pipe := filepath.Join(f.Dir, "pipe")
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	daemon := `read -r cmd a b c < "$STDIN"
case "$cmd" in
get_server_list) echo 100 ;;
get_client_list) printf '7\n8\n' ;;
get_default_active_thread_percentage|get_active_thread_percentage) echo ` + server + ` ;;
*) echo "Unknown command $cmd" ;;
esac`
	return mps.New(mps.Options{
		ControlBinary: f.Script(t, "nvidia-cuda-mps-control", daemon),
		PipeDirectory: pipe,
		Timeout:       10 * time.Second,
		RestartHook:   restartHook(t, f, hook),
		Clock:         clk,
	}), f
}

// restartHook is the path of a restart hook script running hook, none
// where hook is "".
func restartHook(t *testing.T, f *commandtest.Fake, hook string) string {
	if hook == "" {
		return ""
	}
	return f.Script(t, "restart-hook", hook)
}

// TestMPSSetBackUnderServerBelowFull: NVML reads no per-process MPS
// fraction, so the tuner takes a client nobody capped as at 1
// (MPSFraction) and journals 1 as its original. Where the client's server
// runs at 50% (set_default_active_thread_percentage 50), a cap to 30% goes
// through; 1 set back is the server's 50%: at exit the client is restarted
// with it and its original closed, and after a failed restart the pending
// value set back is the server's, not the cap. Before, the controller
// refused 1 as above the server's 50%: the restore failed at every exit,
// the client kept the tuner's cap for good.
func TestMPSSetBackUnderServerBelowFull(t *testing.T) {
	tests := []struct {
		name string
		hook string
		// client 8's pending and effective fractions once the cap is
		// settled, and after the exit ("": the exit's restore fails too)
		settled, exit string
	}{
		{"restored at exit", `echo restarted`, "nil 0.3", "nil 0.5"},
		{"set back after a failed restart", `echo "no standby" >&2; exit 3`, "0.5 nil", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := gpu.NewManualClock(t0)
			c, _ := mpsDaemon(t, "50.0", tc.hook, clk)
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			t.Cleanup(func() { j.Close() })
			cap30 := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "batch",
				Current: Fraction(1), Want: Fraction(0.3), Restart: true, Reason: "test"}
			tu, err := New(Options{Policy: fixed{cap30}, Actuators: ActuatorsOf(c), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			procs := []proc{{7, "embed"}, {8, "batch"}}
			if _, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), procs...)); err != nil {
				t.Fatal(err)
			}
			waitHookEnded(t, tu)
			tu.o.Policy = fixed(nil)
			clk.Advance(15 * time.Second)
			ds, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), procs...))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if strings.Contains(d.Reason, "setting back") {
					t.Errorf("the set-back after the failed restart failed: %s", d.Reason)
				}
			}
			state := func() string {
				st, _ := c.State(uuid0, 8)
				return orNil(st.Pending) + " " + orNil(st.Effective)
			}
			if got := state(); got != tc.settled {
				t.Errorf("client 8 pending, effective: %s once settled, want %s", got, tc.settled)
			}
			if tc.exit == "" {
				return
			}
			if _, err := tu.Restore(ctx); err != nil {
				t.Errorf("restore at exit: %v", err)
			}
			if got := state(); got != tc.exit {
				t.Errorf("client 8 pending, effective: %s after the exit, want %s (the server's 50%%, not the cap)", got, tc.exit)
			}
			if o := j.Originals(); len(o) != 0 {
				t.Errorf("originals left open after the exit: %+v", o)
			}
		})
	}
}

// orNil is *p as text, "nil" for none.
func orNil(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// thousandthCap decides as autotune's capOthers does: client 8's share
// rounded to a thousandth, asked where the client's fraction is not
// already, at the MPS actuator's resolution (State.MPSHeld), that share.
type thousandthCap float64

func (thousandthCap) Name() string { return "thousandth-cap" }
func (p thousandthCap) Decide(s *State) []Action {
	t := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}
	per := Fraction(math.Round(float64(p)*1000) / 1000)
	cur := s.MPSFraction(t, nil)
	if cur.Distance(s.MPSHeld(t, per)) < 1e-6 || !s.Changeable(t) {
		return nil
	}
	return []Action{{Target: t, Tenant: "batch", Current: cur, Want: per, Restart: true, Reason: "test"}}
}

// TestMPSCapHeldAtWholePercent: the MPS controller sends a whole
// percentage (0.125 as 13%) and reports 0.13 in force; a policy asking
// thousandths compares what the controller holds for its value
// (State.MPSHeld), so the cap is asked, and the client restarted, once.
// Before, 0.13 was not 0.125: the client was restarted again at every
// round the guards let through.
func TestMPSCapHeldAtWholePercent(t *testing.T) {
	tests := []struct {
		name     string
		share    thousandthCap
		restarts int
		in       float64 // client 8's fraction in force at the end
	}{
		{"a thousandth: held as the whole percentage", 0.125, 1, 0.13},
		{"a whole percentage", 0.3, 1, 0.3},
		{"above the server's: held as the server's", 0.8, 1, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := gpu.NewManualClock(t0)
			c, f := mpsDaemon(t, "50.0", `echo ok`, clk)
			tu, err := New(Options{Policy: tc.share, Actuators: ActuatorsOf(c), MPSStates: c, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 6 {
				if _, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
					t.Fatal(err)
				}
				waitHookEnded(t, tu)
				clk.Advance(10 * time.Minute)
			}
			if got := len(f.Calls(t, "restart-hook")); got != tc.restarts {
				t.Errorf("client 8 restarted %d times in 6 rounds, want %d", got, tc.restarts)
			}
			if st, _ := c.State(uuid0, 8); orNil(st.Effective) != fmt.Sprint(tc.in) {
				t.Errorf("client 8 at %s, want %v", orNil(st.Effective), tc.in)
			}
		})
	}
}

// TestMPSServerRaisedAfterClamp: client 8 is held at its server's 50%
// (0.8 asked); the operator then sets the server to another value by
// hand. The policy still asks 0.8, which the controller holds back by the
// server's value read again (HeldFraction): raised to 100% or 70%, the
// client is restarted once with 0.8 or 0.7; left at 50%, it is not
// restarted again. Before, the value last read (50%) held 0.8 back for
// the client's life: never asked again, the tenant stayed at 50%.
func TestMPSServerRaisedAfterClamp(t *testing.T) {
	tests := []struct {
		name     string
		raised   string // the server's percentage set by hand
		restarts int
		in       string // client 8's fraction in force at the end
	}{
		{"raised to 100%: 0.8", "100.0", 2, "0.8"},
		{"raised to 70%: 0.7", "70.0", 2, "0.7"},
		{"left at 50%: not restarted again", "50.0", 1, "0.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pct := filepath.Join(t.TempDir(), "server_pct")
			if err := os.WriteFile(pct, []byte("50.0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			clk := gpu.NewManualClock(t0)
			c, f := mpsDaemon(t, `"$(cat '`+pct+`')"`, `echo ok`, clk)
			tu, err := New(Options{Policy: thousandthCap(0.8), Actuators: ActuatorsOf(c), MPSStates: c, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rounds := func(n int) {
				for range n {
					if _, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
						t.Fatal(err)
					}
					waitHookEnded(t, tu)
					clk.Advance(10 * time.Minute)
				}
			}
			rounds(3)
			if st, _ := c.State(uuid0, 8); orNil(st.Effective) != "0.5" {
				t.Fatalf("client 8 at %s under its server's 50%%, want 0.5", orNil(st.Effective))
			}
			if err := os.WriteFile(pct, []byte(tc.raised+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rounds(4)
			if got := len(f.Calls(t, "restart-hook")); got != tc.restarts {
				t.Errorf("client 8 restarted %d times, want %d", got, tc.restarts)
			}
			if st, _ := c.State(uuid0, 8); orNil(st.Effective) != tc.in {
				t.Errorf("client 8 at %s, want %s", orNil(st.Effective), tc.in)
			}
		})
	}
}

// TestMPSExitSetBackReadsNoServer: at exit a restart hook still runs (client
// 8 capped to 30% under its server's 50%) and the server's value was last
// read two minutes ago. Whether the exit waits for the hook (awaitedAtExit:
// does it set the original back, compared as the controller holds it)
// takes the server's value as last read: a restore whose deadline has
// passed sends the daemon nothing. Before, the comparison read the
// server's value again (HeldFraction), with no context but the command's
// timeout, under the tuner's lock: a daemon that hung held the exit for
// that timeout past the restore's deadline.
func TestMPSExitSetBackReadsNoServer(t *testing.T) {
	clk := gpu.NewManualClock(t0)
	started := filepath.Join(t.TempDir(), "started")
	c, f := mpsDaemon(t, "50.0", `touch '`+started+`'; sleep 30`, clk)
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	tu, err := New(Options{Policy: thousandthCap(0.3), Actuators: ActuatorsOf(c), MPSStates: c, Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // (the cap is pending, the server's value read, once the hook runs)
		if _, err := os.Stat(started); err == nil {
			break
		}
		if i == 600 {
			t.Fatal("the restart hook did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := c.State(uuid0, 8); orNil(st.Server) != "0.5" || !st.ServerRead.Equal(t0) {
		t.Fatalf("client 8's server value %s read at %v, want 0.5 read at %v", orNil(st.Server), st.ServerRead, t0)
	}
	clk.Advance(2 * time.Minute)
	sent := f.Stdin(t, "nvidia-cuda-mps-control")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the restore's deadline has passed
	tu.Restore(ctx)
	waitHookEnded(t, tu)
	if got := strings.TrimPrefix(f.Stdin(t, "nvidia-cuda-mps-control"), sent); got != "" {
		t.Errorf("the exit, its deadline passed, sent the daemon %q; want nothing", got)
	}
}
