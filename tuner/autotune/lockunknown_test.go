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
// operator's lock is then not known: no lock is set over it (at 1782 MHz
// for energy, or at the maximum, the operator's low clock taken for
// DVFS) with "unlocked" journaled as the original, which the exit's
// restore would set. The DVFS lock is held back, saying why; energy is
// saved through the power limit, whose value is read, given back first
// on a violation. Where the tuner keeps the clock's original (its own
// lock), it goes on locking, and gives its own lock back on a violation.
func TestClockLockUnknownNotOverwritten(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	operator := &tuner.ClockRange{MinMHz: 1400, MaxMHz: 1400}
	for _, tc := range []struct {
		name    string
		sc      scene
		kept    bool     // the tuner keeps the clock's original (unlocked)
		lowered bool     // the tuner lowered the power limit from 300 W
		applied []string // "target=value" of each action not held
		held    []string // of each action held back as unknown
	}{
		{name: "deep slack under an operator's lock, state unknown: the power limit instead",
			sc:      scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: operator, power: 300},
			applied: []string{"GPU-0/power_limit=210W"}},
		{name: "deep slack, state unknown, no power limit read: nothing",
			sc: scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: operator}},
		{name: "a violation, state unknown, the power limit lowered: given back first",
			sc:      scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: operator, power: 210},
			lowered: true, applied: []string{"GPU-0/power_limit=300W"}},
		{name: "DVFS violation under an operator's low lock, state unknown: held",
			sc:   scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: operator},
			held: []string{"GPU-0/locked_clocks=1980-1980MHz"}},
		{name: "deep slack, state unknown, the original the tuner's: locked",
			sc: scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980}, kept: true,
			applied: []string{"GPU-0/locked_clocks=1782-1782MHz"}},
		// the exporter restarted under its own energy lock: its original
		// kept, the lock given back, not locked at the maximum over it
		{name: "a violation under the tuner's own lock, state unknown: given back",
			sc:      scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, lock: &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}, ours: true, clockAgo: 3 * time.Minute},
			applied: []string{"GPU-0/locked_clocks=unlocked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			s.Snapshot.Readings.Devices[0].ClocksLocked = nil
			if tc.kept {
				s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}.String()] = tuner.ClockRange{}
			}
			if tc.lowered {
				s.Originals[tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}.String()] = tuner.Watts(300)
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
