package testutil

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// CheckCadence checks that a loop keeps its cadence whatever its work
// takes. run starts the loop on ctx, its slow work being passes (each
// takes took of passes.Clock, a manual clock set at start), and returns
// the wait for the loop's end; the clock is driven by step until the loop
// has begun len(want) passes and parked, and the passes must have begun
// at want after start. what names the passes in the failures ("scrapes").
func CheckCadence(t *testing.T, what string, start time.Time, step, took time.Duration, want []time.Duration,
	run func(ctx context.Context, passes *gpu.SlowPasses) (wait func())) {
	t.Helper()
	clk := gpu.NewManualClock(start)
	passes := &gpu.SlowPasses{Clock: clk, Took: took}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := run(ctx, passes)
	err := clk.Drive(step, func() bool { return len(passes.Starts()) >= len(want) }, 10*time.Second)
	cancel()
	wait()
	if err != nil {
		t.Fatalf("the loop of %s never parked: %v", what, err)
	}
	got := passes.Starts()
	for i := range got {
		got[i] -= start.Sub(time.Unix(0, 0))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s of %v started at %v, want %v", what, took, got, want)
	}
}
