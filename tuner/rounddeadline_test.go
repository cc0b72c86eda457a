package tuner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// heldBackend is a host whose power-limit calls wait for a backend held
// by a sample stuck in a driver call: each gives up as busy when its
// context ends, as the NVML backend's lockFor does.
type heldBackend struct {
	recorder
	mu    sync.Mutex
	calls []time.Time
}

func (h *heldBackend) SetPowerLimit(ctx context.Context, uuid string, _ float64) error {
	h.mu.Lock()
	h.calls = append(h.calls, time.Now())
	h.mu.Unlock()
	<-ctx.Done()
	return fmt.Errorf("%w: SetPowerLimit on GPU %s gave up waiting for the NVML backend, which a sample holds: %w", gpu.ErrBusy, uuid, ctx.Err())
}

func (h *heldBackend) started() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.calls...)
}

// A round whose control call cannot get its GPU (the backend held by a
// stuck sample) gives up at its bound, RoundTimeout of the interval: the
// change is refused as busy, nothing rolled back, and the next round runs
// on its tick. Where an outside program's timeout is longer
// (SetCallTimeout), the bound is that timeout, the next round at the next
// whole interval. (The rounds' context had no deadline: the first round
// waited until the exporter exited, and no other ran.)
func TestRoundGivesUpOnAHeldBackend(t *testing.T) {
	const interval = 15 * time.Second
	for _, tc := range []struct {
		name  string
		call  time.Duration // SetCallTimeout
		bound time.Duration // the first round's, from its start
		calls []time.Duration
	}{
		{"four fifths of the interval", 0, 12 * time.Second, []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second, 60 * time.Second}},
		{"a longer call timeout", 20 * time.Second, 20 * time.Second, []time.Duration{15 * time.Second, 45 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				host := &heldBackend{}
				power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
				clk := gpu.RealClock{}
				tu, err := New(Options{Policy: fixed{power}, Guards: []Guard{}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
				if err != nil {
					t.Fatal(err)
				}
				r := NewRunner(tu, nil, clk, interval, func() *tenant.Snapshot { return emptySnap(time.Now()) }, nil)
				r.SetCallTimeout(tc.call)
				start := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { r.Run(ctx); close(done) }()

				time.Sleep(interval + tc.bound - time.Millisecond)
				synctest.Wait()
				if n := len(tu.Status().Recent); n != 0 {
					t.Fatalf("the first round ended before its bound: %d decisions", n)
				}
				time.Sleep(2 * time.Millisecond)
				synctest.Wait()
				st := tu.Status()
				if len(st.Recent) != 1 {
					t.Fatalf("after the first round's bound: %d decisions, want 1 (the round still waits)", len(st.Recent))
				}
				if d := st.Recent[0]; d.Outcome != OutcomeRefused || d.Applied || !strings.Contains(d.Reason, gpu.ErrBusy.Error()) {
					t.Errorf("decision = %s (applied %v): %s; want refused as busy, not applied", d.Outcome, d.Applied, d.Reason)
				}

				time.Sleep(time.Until(start.Add(tc.calls[len(tc.calls)-1] + time.Second)))
				synctest.Wait()
				var got []time.Duration
				for _, c := range host.started() {
					got = append(got, c.Sub(start))
				}
				if !slices.Equal(got, tc.calls) {
					t.Errorf("the rounds called the backend at %v, want %v", got, tc.calls)
				}
				for _, d := range tu.Status().Recent {
					if d.Outcome != OutcomeRefused || d.Applied {
						t.Errorf("decision %s (applied %v): %s; want refused", d.Outcome, d.Applied, d.Reason)
					}
				}
				cancel()
				<-done
			})
		})
	}
}
