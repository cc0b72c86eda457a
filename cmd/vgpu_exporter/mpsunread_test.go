package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// unreadMPS is a copy of r without the MPS fractions, as NVML reads them:
// not at all.
func unreadMPS(r *gpu.Readings) *gpu.Readings {
	if r == nil {
		return nil
	}
	c := *r
	c.Devices = append([]gpu.Device(nil), r.Devices...)
	for i := range c.Devices {
		ps := append([]gpu.Process(nil), c.Devices[i].Processes...)
		for j := range ps {
			ps[j].MPSActiveThreads = nil
		}
		c.Devices[i].Processes = ps
	}
	return &c
}

// On a host whose readings give no MPS fraction (NVML), the baselines cap
// each client once through the daemon and the restart hook, journal its
// original and set it back at exit; best-effort restarts nobody. Before,
// static-equal restarted every client again at every retry (a minute),
// best-effort too (to 100%), and nothing was journaled or set back.
func TestBaselinesOnUnreadMPSFractions(t *testing.T) {
	for _, tc := range []struct {
		policy           string
		restarts, resets int
	}{
		{"static-equal", 2, 2},
		{"best-effort", 0, 0},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f, _, journal, clock, svc, snapshot, r := nvmlHostRun(t, tc.policy, `exit 0`)
			for range 20 { // 5 minutes
				clock.Advance(15 * time.Second)
				if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Tuner().RunOnce(context.Background(), snapshot()); err != nil {
					t.Fatal(err)
				}
				settleHooks(t, r.Tuner(), snapshot) // (a hook that returns at once)
			}
			if n := len(f.Calls(t, "restart-hook")); n != tc.restarts {
				t.Errorf("%d client restarts in 5 minutes, want %d: %q", n, tc.restarts, f.Calls(t, "restart-hook"))
			}
			data, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), `"event":"original"`); n != tc.resets {
				t.Errorf("%d originals journaled, want %d", n, tc.resets)
			}
			before := len(f.Calls(t, "restart-hook"))
			if err := r.Restore(); err != nil {
				t.Fatal(err)
			}
			if n := len(f.Calls(t, "restart-hook")) - before; n != tc.resets {
				t.Errorf("%d clients restarted by the restore at exit, want %d", n, tc.resets)
			}
			if got := r.Status().Unrestored; got != 0 {
				t.Errorf("%d originals left unrestored", got)
			}
		})
	}
}

// nvmlHostRun is the exporter's tuner wired as on an NVML host (the MPS
// fractions unread) with policy, over the simulator's noisy-neighbour,
// through a fake MPS daemon and the restart hook hook (a shell body),
// journaling: the fake programs, the journal's path, the clock, the
// simulator's service, the snapshots the tuner reads and its runner.
func nvmlHostRun(t *testing.T, policy, hook string) (*commandtest.Fake, string, string, *gpu.ManualClock, *service, func() *tenant.Snapshot, *tuner.Runner) {
	t.Helper()
	f, pipe := fakeMPSDaemon(t)
	f.Script(t, "restart-hook", hook)
	f.OnPath(t)
	journal := filepath.Join(f.Dir, "tuner.jsonl")
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--mps.pipe-directory="+pipe,
		"--mps.restart-hook="+filepath.Join(f.Dir, "restart-hook"), "--nvidia-smi.path=")
	svc, err := buildOn(cfg, clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.src.Close() })
	host := *cfg
	host.Backend, host.Tuner.Mode, host.Tuner.Policy, host.Tuner.Journal = backendNVML, "enforce", policy, journal
	host.Tuner.NodeLock = filepath.Join(t.TempDir(), "tuner.lock") // not the node's
	host.Actuators.PauseCgroupRoot = ""
	snapshot := func() *tenant.Snapshot {
		s := *svc.Snapshot()
		s.Readings = unreadMPS(s.Readings)
		return &s
	}
	subscribe := func(f func(*gpu.Readings)) {
		svc.Sampler().Subscribe(func(r *gpu.Readings) { f(unreadMPS(r)) })
	}
	r, err := newTunerRunner(&host, sourceOnly{svc.src}, clock, snapshot, subscribe, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	return f, pipe, journal, clock, svc, snapshot, r
}

// In the exporter's wiring, the MPS controller's restart hook runs off
// the tuner's round: with a hook that waits until the test releases it,
// the rounds that start it and the one after return, the status lists the
// hooks running, and once released they are settled as applied. (Before,
// the round that started a hook returned when the hook did.)
func TestRestartHookOffTheRoundWired(t *testing.T) {
	f, _, _, clock, svc, snapshot, r := nvmlHostRun(t, "static-equal",
		`i=0; while [ ! -f "$D/release" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`)
	round := func() {
		t.Helper()
		clock.Advance(15 * time.Second)
		if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := r.Tuner().RunOnce(context.Background(), snapshot()); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the round waited for the restart hook")
		}
	}
	round()
	round()
	hooks := r.Status().Hooks
	if len(hooks) != 2 || hooks[0].Knob != gpu.KnobMPSActiveThreads {
		t.Fatalf("hooks running %+v, want the two clients' restarts", hooks)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	settleHooks(t, r.Tuner(), snapshot)
	applied := 0
	for _, d := range r.Status().Recent {
		if d.Knob == gpu.KnobMPSActiveThreads && d.Outcome == tuner.OutcomeApplied {
			applied++
		}
	}
	if n := len(f.Calls(t, "restart-hook")); n != 2 || applied != 2 {
		t.Errorf("%d hook runs, %d restarts applied; want 2 and 2", n, applied)
	}
}

// settleHooks runs rounds, without moving the clock, until no hook the
// tuner started off its round is left unsettled (they run in real time).
func settleHooks(t *testing.T, tu *tuner.Tuner, snapshot func() *tenant.Snapshot) {
	t.Helper()
	for i := 0; len(tu.Status().Hooks) > 0; i++ {
		if i == 3000 {
			t.Fatalf("hooks still running after 30 s: %+v", tu.Status().Hooks)
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := tu.RunOnce(context.Background(), snapshot()); err != nil {
			t.Fatal(err)
		}
	}
}
