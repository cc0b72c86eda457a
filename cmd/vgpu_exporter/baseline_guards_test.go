package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// On a host a baseline's changes go through the tenants' bounds and the
// change budgets: static-equal on eight-gpu-hot (32 MPS clients) gets
// the rate's burst of 6 through its first round, not 32 restarts at
// once; and a tenant whose share.min is above the baseline's equal part
// keeps its share (the bounds guard refuses the cap).
func TestBaselineBehindHostGuards(t *testing.T) {
	for _, tc := range []struct {
		name, scenario string
		tenants        func(string) string // the scenario's tenants file, changed
		rounds         int
		wantApplied    int
		wantGuard      map[string]int // refusals by guard, at least
	}{
		{"32 clients, the rate's burst", "eight-gpu-hot", nil, 1, 6, map[string]int{tuner.GuardRate: 1}},
		{"share.min above the equal part", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, "share: {min: 0.3, max: 1.0}", "share: {min: 0.6, max: 1.0}", 1)
		}, 2, 1, map[string]int{tuner.GuardBounds: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--backend=sim", "--sim.scenario=" + tc.scenario, "--tuner.mode=enforce", "--tuner.policy=static-equal"}
			if tc.tenants != nil {
				b, err := scenarios.FS.ReadFile(tc.scenario + ".tenants.yaml")
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(t.TempDir(), "tenants.yaml")
				if err := os.WriteFile(file, []byte(tc.tenants(string(b))), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--tenants.config="+file)
			}
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			svc, err := buildOn(testConfig(t, args...), clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			simRounds(t, svc, clock, tc.rounds)
			st := svc.tuner.Status()
			if got := st.Counts.Actions[tuner.ActionKey{Knob: gpu.KnobMPSActiveThreads, Outcome: tuner.OutcomeApplied}]; got != uint64(tc.wantApplied) {
				t.Errorf("%d caps applied, want %d", got, tc.wantApplied)
			}
			for g, n := range tc.wantGuard {
				if got := st.Counts.Refusals[g]; got < uint64(n) {
					t.Errorf("%d refusals by %s, want at least %d (%v)", got, g, n, st.Counts.Refusals)
				}
			}
		})
	}
}

// With the kill switch engaged, a baseline that asks for its settings at
// every round has each change refused (and counted) once while its retry
// wait lasts, not once a round: noisy-neighbour's two caps over three
// rounds 15 s apart are two refusals, not six.
func TestBaselineKillSwitchCountsAChangeOnce(t *testing.T) {
	stop := filepath.Join(t.TempDir(), "stop")
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.mode=enforce", "--tuner.policy=static-equal", "--tuner.kill-switch-file="+stop)
	svc, err := buildOn(cfg, clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	simRounds(t, svc, clock, 3)
	st := svc.tuner.Status()
	if got := st.Counts.Refusals[tuner.GuardKillSwitch]; got != 2 {
		t.Errorf("%d kill-switch refusals over 3 rounds, want 2 (one a change)", got)
	}
	if got := st.Counts.Actions[tuner.ActionKey{Knob: gpu.KnobMPSActiveThreads, Outcome: tuner.OutcomeApplied}]; got != 0 {
		t.Errorf("%d caps applied with the kill switch engaged", got)
	}
}
