package simrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestRunSizeBounded: a run whose series would be over maxSeriesRows is
// refused before it starts, naming --duration and --step (--step 1ns over
// 10 s was 10^10 steps, out of memory in 40 s; --duration 2562047h at 1s
// overflowed the count of steps).
func TestRunSizeBounded(t *testing.T) {
	sc, _, err := LoadScenario("../scenarios/h100-timeslice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dur, step time.Duration
		steps     int64
		err       string
	}{
		{10 * time.Minute, time.Second, 600, ""},
		{1500 * time.Millisecond, time.Second, 2, ""},
		{7 * 24 * time.Hour, time.Second, 604800, ""},
		{10 * time.Second, time.Nanosecond, 0, "--duration 10s at --step 1ns is 10000000000 steps of 3 tenants and 1 GPUs: a run's series holds at most 4194304 rows (steps x (tenants + GPUs + 2 a step)), this one 699050 steps at the most"},
		{2562047 * time.Hour, time.Second, 0, "is 9223369200 steps"},
	} {
		steps, err := runSteps(sc, c.dur, c.step, false)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v at %v: %v, want %q", c.dur, c.step, err, c.err)
			}
			continue
		}
		if err != nil || steps != c.steps {
			t.Errorf("%v at %v: %d steps, %v; want %d", c.dur, c.step, steps, err, c.steps)
		}
	}
	_, err = Run(context.Background(), Config{Scenario: "../scenarios/h100-timeslice.yaml", Policy: "best-effort", Duration: 10 * time.Second, Step: time.Nanosecond})
	if err == nil || !strings.Contains(err.Error(), "shorten --duration") {
		t.Fatalf("--step 1ns: %v", err)
	}
}

// TestRunLatencyBudget: a run's windows keep what is left of its budget of
// latencies over its tenants, within [minWindowLatencies, the simulator's
// default] (a tenant at 1e6 requests a second kept 4 MB a step before: 2.4
// GB in 10 minutes, out of memory with a few such tenants), and a run
// within the budget keeps every latency.
func TestRunLatencyBudget(t *testing.T) {
	for _, c := range []struct {
		left    int64
		tenants int
		want    int
	}{
		{maxRunLatencies, 3, sim.DefaultWindowLatencies},
		{maxRunLatencies, 256, maxRunLatencies / 256},
		{maxRunLatencies, 0, sim.DefaultWindowLatencies},
		{1000, 10, 100},
		{100, 10, minWindowLatencies},
		{-5, 10, minWindowLatencies},
	} {
		if got := windowLatencies(c.left, c.tenants); got != c.want {
			t.Errorf("%d left over %d tenants: %d, want %d", c.left, c.tenants, got, c.want)
		}
	}
	var kept, completed int
	cfg := Config{Scenario: "../scenarios/h100-timeslice.yaml", Policy: "best-effort", Duration: time.Minute, Step: time.Second,
		observe: func(_ *tenant.Snapshot, _ []tuner.Decision, w *sim.WindowStats) {
			for _, tw := range w.Tenants {
				kept += len(tw.Latencies)
				completed += tw.Completed
			}
		}}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if kept == 0 || kept != completed {
		t.Fatalf("kept %d latencies of %d requests", kept, completed)
	}
}

// TestRunSizeCountsSteps: the row limit counts a step's own cost besides
// its tenants and GPUs: a scenario of one GPU and no tenants was allowed
// 4,194,304 steps, 1.94 GB at its peak without --out and 7.34 GB with it.
func TestRunSizeCountsSteps(t *testing.T) {
	for _, c := range []struct {
		tenants, gpus int
		want          int64
	}{
		{0, 1, 4194304 / 3},
		{1, 1, 4194304 / 4},
		{3, 1, 4194304 / 6},
		{16, 1, 4194304 / 19},
	} {
		if got := maxRunSteps(c.tenants, c.gpus); got != c.want {
			t.Errorf("%d tenants, %d GPUs: at most %d steps, want %d", c.tenants, c.gpus, got, c.want)
		}
	}
	sc, err := sim.ParseScenario("empty", []byte("name: empty\ngpus: [{model: H100-SXM5-80GB}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dur  time.Duration
		want string
	}{
		{1398101 * time.Microsecond, ""},
		{1398102 * time.Microsecond, "this one 1398101 steps at the most"},
		{4194304 * time.Microsecond, "is 4194304 steps of 0 tenants and 1 GPUs"},
	} {
		_, err := runSteps(sc, c.dur, time.Microsecond, false)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v at 1us: %v, want %q", c.dur, err, c.want)
		}
	}
}
