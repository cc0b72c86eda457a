package rebalance

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A restart of the exporter (a rollout, a crash), its journal kept, keeps
// the slow loop's cool-down and holds: the plans are those of a run
// without a restart. They were kept in memory alone, so a start planned
// again once the dwell had passed, and moved again the tenant just moved:
// a crash-looping exporter evicted the same pod every few minutes. So for
// a plan applied, one applied in part (its move made held), and one
// refused (its cool-down); a later start finds them in the journal an
// earlier start compacted (at 2m30s: the plans of train and embed, two
// records each, the first planned record no longer needed).
func TestSlowLoopResumesAcrossRestarts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ac       func() any      // the host's placement, fresh
		restarts []time.Duration // after t0
		want     string          // the placement decisions: time, tenant, outcome
	}{
		{"applied", func() any { return &recordingPlacement{} }, []time.Duration{time.Minute},
			"[40s train applied 2m10s embed applied 3m40s chat applied]"},
		{"applied, restarted three times", func() any { return &recordingPlacement{} }, []time.Duration{time.Minute, 150 * time.Second, 3 * time.Minute},
			"[40s train applied 2m10s embed applied 3m40s chat applied]"},
		{"applied in part", func() any { return &partialHook{} }, []time.Duration{time.Minute, 150 * time.Second, 3 * time.Minute},
			"[40s train failed 2m10s embed applied 3m40s chat applied]"},
		{"refused", func() any { return &refusingHook{refusals: 1000} }, []time.Duration{time.Minute, 3 * time.Minute},
			"[40s train refused 2m10s train refused 3m40s train refused]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			ac := tc.ac()
			if h, ok := ac.(*refusingHook); ok {
				h.clock = clock
			}
			path := filepath.Join(t.TempDir(), "journal")
			var j *tuner.Journal
			start := func() *tuner.Tuner {
				t.Helper()
				if j != nil {
					j.Close() // the process ends
				}
				var err error
				if j, err = tuner.OpenJournal(path); err != nil {
					t.Fatal(err)
				}
				r := Default()
				r.Every, r.Dwell, r.CoolDown, r.Hold = 10*time.Second, 30*time.Second, 90*time.Second, 30*time.Minute
				tu, err := tuner.New(tuner.Options{Policy: noDecide{}, Clock: clock, Mode: tuner.ModeEnforce, Actuators: tuner.ActuatorsOf(ac), Rebalance: r,
					Guards: tuner.DefaultGuards(nil, nil), Journal: j})
				if err != nil {
					t.Fatal(err)
				}
				return tu
			}
			tu := start()
			defer func() { j.Close() }()
			restarts := tc.restarts
			var decisions []string
			for range 4 * 12 { // 4 minutes, a round every 5 s
				if len(restarts) > 0 && clock.Now().Sub(t0) >= restarts[0] {
					tu, restarts = start(), restarts[1:]
				}
				decisions = append(decisions, placementRound(t, tu, clock, 10*(clock.Now().Sub(t0).Seconds()+5))...)
				clock.Advance(5 * time.Second)
			}
			if fmt.Sprint(decisions) != tc.want {
				t.Errorf("decisions %v, want %s", decisions, tc.want)
			}
		})
	}
}
