package tuner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// closer records its closes among the actuator's calls (under mu: the
// exit closes each in its own goroutine) and answers err.
type closer struct {
	mu    *sync.Mutex
	calls *fakeControl
	n     int
	err   error
}

func (c *closer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	_ = c.calls.Do("Close", "")
	return c.err
}

// cappedRunner is a Runner of a tuner in enforce that capped MPS client 7
// to 40% through host in one round.
func cappedRunner(t *testing.T, host any) (*Tuner, *Runner) {
	t.Helper()
	tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.4)}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	snap := emptySnap(t0)
	if _, err := tu.RunOnce(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	return tu, NewRunner(tu, nil, gpu.NewManualClock(t0), 0, func() *tenant.Snapshot { return snap }, nil)
}

// The restore at exit closes what CloseAtExit names, once each, after
// the originals are set back, and a close that fails makes it fail.
func TestRestoreAtExitCloses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errs    []error
		wantErr string
	}{
		{"none", nil, ""},
		{"one", []error{nil}, ""},
		{"two, the first fails", []error{errors.New("tenant t not thawed"), nil}, "tenant t not thawed"},
		{"two, the second fails", []error{nil, errors.New("tenant t not thawed")}, "tenant t not thawed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeControl{}
			_, r := cappedRunner(t, rec)
			var cs []*closer
			var mu sync.Mutex
			for _, e := range tc.errs {
				c := &closer{mu: &mu, calls: rec, err: e}
				cs = append(cs, c)
				r.CloseAtExit(c)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.Run(ctx) // returns at once: its context is done
			err := r.RestoreAtExit()
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("RestoreAtExit: %v, want an error containing %q", err, tc.wantErr)
			}
			for i, c := range cs {
				if c.n != 1 {
					t.Errorf("closer %d closed %d times, want 1", i, c.n)
				}
			}
			// the original set back first, then every close
			want := []string{"SetMPSActiveThreads(" + uuid0 + ",7,0.4000)", "RestartClient(" + uuid0 + ",7)",
				"SetMPSActiveThreads(" + uuid0 + ",7,1.0000)", "RestartClient(" + uuid0 + ",7)"}
			for range cs {
				want = append(want, "Close()")
			}
			if !slices.Equal(rec.Calls, want) {
				t.Errorf("calls %q, want %q", rec.Calls, want)
			}
		})
	}
}

// slowPolicy is a policy whose decisions are slow passes.
type slowPolicy struct{ *gpu.SlowPasses }

func (slowPolicy) Name() string { return "slow" }
func (p slowPolicy) Decide(*State) []Action {
	p.Pass()
	return nil
}

// The rounds start every interval, whatever each takes (an actuator's
// calls, a client's restart): a round that takes part of the interval
// does not push the next ones later, and one that takes longer than the
// interval is followed at the next whole interval from its start.
func TestRunnerKeepsItsCadence(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		took time.Duration
		want []time.Duration
	}{
		{0, []time.Duration{15 * s, 30 * s, 45 * s, 60 * s}},
		{4 * s, []time.Duration{15 * s, 30 * s, 45 * s, 60 * s}},
		{20 * s, []time.Duration{15 * s, 45 * s, 75 * s}},
	} {
		testutil.CheckCadence(t, "rounds", t0, s, tc.took, tc.want, func(ctx context.Context, passes *gpu.SlowPasses) func() {
			clk := passes.Clock
			tu, err := New(Options{Policy: slowPolicy{passes}, Actuators: ActuatorsOf(&fakeControl{}), Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			r := NewRunner(tu, nil, clk, 15*s, func() *tenant.Snapshot { return emptySnap(clk.Now()) }, nil)
			done := make(chan struct{})
			go func() { r.Run(ctx); close(done) }()
			return func() { <-done }
		})
	}
}

// slowRestart is a host whose client restarts take took of real time
// (a restart hook that has to start the successor).
type slowRestart struct {
	fakeControl
	took time.Duration
}

func (s *slowRestart) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	select {
	case <-time.After(s.took):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.fakeControl.RestartClient(ctx, uuid, pid, tenant)
}

// The restore at exit runs within the Runner's restore timeout
// (--tuner.restore-timeout): a restore whose client restart takes longer
// is cut, and its original left open for the next start; with a timeout
// above the restart's, it sets the original back. (Before, the 30 s were
// fixed whatever the restart hook's timeout.)
func TestRestoreWithinItsTimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		open    int
	}{
		{"shorter than the restart: cut, left open", 20 * time.Millisecond, 1},
		{"longer than the restart: set back", 10 * time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tu, r := cappedRunner(t, &slowRestart{took: 200 * time.Millisecond})
			r.SetRestoreTimeout(c.timeout)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.Run(ctx)
			err := r.RestoreAtExit()
			if (err != nil) != (c.open > 0) {
				t.Errorf("RestoreAtExit: %v, want an error %v", err, c.open > 0)
			}
			if got := tu.Status().Unrestored; got != c.open {
				t.Errorf("%d originals open after the restore, want %d", got, c.open)
			}
		})
	}
}
