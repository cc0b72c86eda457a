package autotune

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestClockLockUnknownNotOverwritten: NVML from R535 reports no lock the
// exporter did not set (ClocksLocked nil, docs/backends.md). An
// operator's lock is then not known: the energy saving and the DVFS lock
// are held back, saying why, rather than lock over it (at 1782 MHz, or
// at the maximum, the operator's low clock taken for DVFS) with
// "unlocked" journaled as the original, which the exit's restore would
// set. Where the tuner keeps the clock's original (its own lock), it
// goes on locking.
func TestClockLockUnknownNotOverwritten(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	operator := &tuner.ClockRange{MinMHz: 1400, MaxMHz: 1400}
	for _, tc := range []struct {
		name    string
		sc      scene
		kept    bool     // the tuner keeps the clock's original (unlocked)
		applied []string // "target=value" of each action not held
		held    []string // of each action held back as unknown
	}{
		{"deep slack under an operator's lock, state unknown: held",
			scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: operator}, false,
			nil, []string{"GPU-0/locked_clocks=1782-1782MHz"}},
		{"DVFS violation under an operator's low lock, state unknown: held",
			scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: operator}, false,
			nil, []string{"GPU-0/locked_clocks=1980-1980MHz"}},
		{"deep slack, state unknown, the original the tuner's: locked",
			scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980}, true,
			[]string{"GPU-0/locked_clocks=1782-1782MHz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			s.Snapshot.Readings.Devices[0].ClocksLocked = nil
			if tc.kept {
				s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}.String()] = tuner.ClockRange{}
			}
			var applied, held []string
			for _, a := range New().Decide(s) {
				at := a.Target.String() + "=" + a.Want.String()
				if a.Held == "" {
					applied = append(applied, at)
					continue
				}
				held = append(held, at)
				if !strings.Contains(a.Held, "lock is not known") || a.Current != nil {
					t.Errorf("%s held back as %q from %v, want the unknown lock said, from an unknown value", at, a.Held, a.Current)
				}
			}
			if !slices.Equal(applied, tc.applied) || !slices.Equal(held, tc.held) {
				t.Errorf("actions %q held %q, want %q held %q", applied, held, tc.applied, tc.held)
			}
		})
	}
}
