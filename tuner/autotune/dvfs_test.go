package autotune

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A violation with a wide p99/p50 on an unlocked GPU is blamed on DVFS
// where the clock was read lowered at this round or one of the last
// minute, though this round's instant falls in a request (the clock at
// its maximum); a lowered reading under a lock, or older than a minute,
// does not count.
func TestDVFSLock(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	band := tuner.FastSLO{Over: time.Minute, Total: 200, Good: 199}     // burn 0.5: no action
	const max, low = 1980.0, 345.0
	for _, tc := range []struct {
		name       string
		before     float64       // MHz read at the earlier round (0: no earlier round)
		lockedThen bool          // under someone else's lock then
		ago        time.Duration // since the earlier round
		now        float64       // MHz read at this round
		want       []string
	}{
		{"lowered now", 0, false, 0, low, []string{"GPU-0/locked_clocks=1980-1980MHz"}},
		{"at the maximum now, lowered 30 s ago", low, false, 30 * time.Second, max, []string{"GPU-0/locked_clocks=1980-1980MHz"}},
		{"at the maximum now, lowered 2 min ago", low, false, 2 * time.Minute, max, nil},
		{"never lowered", max, false, 30 * time.Second, max, nil},
		{"lowered under a lock 30 s ago", low, true, 30 * time.Second, max, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			sc := scene{mode: gpu.SharingMPS, p99: 2, maxMHz: max}
			if tc.before > 0 {
				sc.fast = band
				s := sc.state()
				s.Now = s.Now.Add(-tc.ago)
				d := &s.Snapshot.Readings.Devices[0]
				d.SMClockHz, d.ClocksLocked = gpu.Float(tc.before*1e6), gpu.Bool(tc.lockedThen)
				if acts := p.Decide(s); len(acts) != 0 {
					t.Fatalf("the earlier round acted: %+v", acts)
				}
			}
			sc.fast = violating
			s := sc.state()
			s.Snapshot.Readings.Devices[0].SMClockHz = gpu.Float(tc.now * 1e6)
			var got []string
			acts := p.Decide(s)
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
			if len(acts) > 0 && !strings.Contains(acts[0].Reason, "between requests") {
				t.Errorf("reason %q", acts[0].Reason)
			}
		})
	}
}
