package autotune

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// On a GPU whose clock cannot be locked, the energy saving lowers the
// power limit only on measured slack (requests in the fast window and the
// SLO window), as the clock lock does: an idle window says nothing of
// what the lower limit would cost. A violation under the lowered limit
// gives it back as a revert, which the guards let through (the
// hysteresis guard refuses a change reversing the last one within two
// minutes, and the limit that costs the SLO would stay that long), once:
// a limit enforced below the one given back is another limiter's (a BMC's
// cap), which a revert each round would not lift.
func TestPowerLimitForEnergy(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}
	powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	tests := []struct {
		name    string
		sc      scene
		idle    bool // no request in the SLO window or the fast window
		lowered bool // the tuner lowered the limit from 700 W
		back    bool // and gave 700 W back, a cap enforcing less
		want    []string
		revert  bool
	}{
		{"deep slack, measured: lowered", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 700}, false, false, false, []string{"GPU-0/power_limit=490W"}, false},
		{"nothing measured yet: left", scene{mode: gpu.SharingMPS, fast: tuner.FastSLO{Over: time.Minute}, p99: 0.3, power: 700}, true, false, false, nil, false},
		{"a violation under the lowered limit: given back as a revert", scene{mode: gpu.SharingMPS, fast: violating, p99: 2, power: 490}, false, true, false, []string{"GPU-0/power_limit=700W"}, true},
		{"given back, a cap enforcing 500 W: not given back again", scene{mode: gpu.SharingMPS, fast: violating, p99: 2, power: 500}, false, true, true, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobLockedClocks: false}
			if tc.idle {
				s.Snapshot.SLOs[0].WindowRequests = 0
			}
			if tc.lowered {
				s.Originals[powT.String()] = tuner.Watts(700)
				s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-time.Minute), To: tuner.Watts(490)}
			}
			if tc.back {
				s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-time.Minute), From: tuner.Watts(490), To: tuner.Watts(700), Revert: true}
			}
			acts := New().Decide(s)
			checkActions(t, acts, tc.want, "")
			if len(acts) == 1 && acts[0].Revert != tc.revert {
				t.Errorf("revert %v, want %v", acts[0].Revert, tc.revert)
			}
		})
	}
}

// A power limit lowered while the clock's lock was not known (NVML from
// R535, or a pre-R535 driver's throttle reasons not read once) stays the
// energy saving once the lock is known again: a violation gives it back
// (it stayed lowered through the breach), and deep slack locks no clock on
// top of it; once given back, the clock is locked for energy.
func TestPowerLoweredLockKnownAgain(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}
	powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	tests := []struct {
		name string
		sc   scene
		back bool // the tuner gave 300 W back
		want []string
	}{
		{"a violation: the power limit given back", scene{mode: gpu.SharingMPS, fast: violating, p99: 2, maxMHz: 1980, power: 210}, false, []string{"GPU-0/power_limit=300W"}},
		{"deep slack: no clock lock on top", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, power: 210}, false, nil},
		{"deep slack, the limit given back: the clock locked", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, power: 300}, true, []string{"GPU-0/locked_clocks=1782-1782MHz"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			if s.Snapshot.Readings.Devices[0].ClocksLocked == nil {
				t.Fatal("the lock's state should be known")
			}
			s.Originals[powT.String()] = tuner.Watts(300)
			s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-10 * time.Minute), To: tuner.Watts(210)}
			if tc.back {
				s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-10 * time.Minute), From: tuner.Watts(210), To: tuner.Watts(300), Revert: true}
			}
			checkActions(t, New().Decide(s), tc.want, "")
		})
	}
}

// TestEnergySavingGivenBackBesideOthers: the SM clock locked at 50% for
// energy (or the power limit lowered, where the clock cannot be locked)
// while chat was alone with deep slack is given back, as on a violation,
// once batch work or a latency tenant whose latency is not measured runs
// beside it: no clock is lowered for energy beside them. Before, the
// lock stayed for as long as chat's slack stayed deep, and the tenant
// beside it ran at half clock. A lock at the maximum clock, set against
// DVFS, stays.
func TestEnergySavingGivenBackBesideOthers(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	half := &tuner.ClockRange{MinMHz: 990, MaxMHz: 990}
	top := &tuner.ClockRange{MinMHz: 1980, MaxMHz: 1980}
	powT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	tests := []struct {
		name   string
		sc     scene
		search bool // search, a latency tenant without an SLO status, joins (else embed, batch)
		power  bool // the power limit is the tuner's, lowered from 700 W
		want   []string
	}{
		{"the energy lock, search joins", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: half, ours: true, clockAgo: 10 * time.Minute}, true, false,
			[]string{"GPU-0/locked_clocks=unlocked"}},
		{"the energy lock, embed joins", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: half, ours: true, clockAgo: 10 * time.Minute}, false, false,
			[]string{"GPU-0/locked_clocks=unlocked"}},
		{"the lowered power limit, search joins", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, true, true,
			[]string{"GPU-0/power_limit=700W"}},
		{"the lowered power limit, embed joins", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, false, true,
			[]string{"GPU-0/power_limit=700W"}},
		{"a lock at the maximum clock stays", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: top, ours: true, clockAgo: 10 * time.Minute}, false, false,
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sc.state()
			d := &s.Snapshot.Readings.Devices[0]
			d.Processes = append(d.Processes, mpsProc(3, gpu.Float(1)))
			if tc.search {
				s.Snapshot.Usage = append(s.Snapshot.Usage, tenant.Usage{Tenant: "search", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{3}})
				s.Snapshot.Tenants = append(s.Snapshot.Tenants, tenant.Info{Name: "search", Class: gpu.ClassLatency, Priority: 10, ShareMax: 1})
			} else {
				s.Snapshot.Usage = append(s.Snapshot.Usage, tenant.Usage{Tenant: "embed", Class: gpu.ClassBatch, UUID: uuid0, PIDs: []uint32{3}})
			}
			if tc.power {
				s.Originals[powT.String()] = tuner.Watts(700)
				s.Changes[powT.DomainKey()] = tuner.Change{At: s.Now.Add(-10 * time.Minute), From: tuner.Watts(700), To: tuner.Watts(490)}
			}
			acts := New().Decide(s)
			reason := ""
			if tc.want != nil {
				reason = "no clock is lowered for energy beside"
			}
			checkActions(t, acts, tc.want, reason)
			if len(acts) > 0 && !acts[0].Revert {
				t.Errorf("not a revert: %+v", acts[0])
			}
		})
	}
}
