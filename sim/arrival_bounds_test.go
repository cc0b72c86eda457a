package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTraceReplayOutOfRangeNeverArrives: a replay slow enough that its
// loops run past int64's range (each loop within the bound, 127 years),
// or one whose offsets convert out of it (a speedup load refuses), has no
// arrival after the last in range. The conversion used to wrap to a time
// in the past: arrive queued what had not come yet, or looped for good.
func TestTraceReplayOutOfRangeNeverArrives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slow.csv")
	// two requests 1 s apart: a span of 2 s, 4e18 ns at speedup 5e-10
	rows := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,100,10\n2023-11-16 18:15:47,100,10\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		speedup float64 // after load
		queued  int
	}{
		{"loops out of range", 5e-10, 5}, // at 0, 2e18, 4e18, 6e18 and 8e18
		{"offset out of range", 1e-300, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, mustParse(t, `
name: slow
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: a, workload: {type: llm, params: 8e9, arrival: {process: trace, file: `+path+`, speedup: 5e-10}}}
`), Options{})
			tn := s.tenants[0]
			tn.w.Arrival.Speedup = c.speedup
			done := make(chan struct{})
			go func() {
				defer close(done)
				tn.arrive(9e18)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("arrive has not returned: an arrival out of range wrapped into the past")
			}
			if tn.nextArr != never || tn.queued() != c.queued {
				t.Errorf("next arrival %d, %d queued; want never, %d", tn.nextArr, tn.queued(), c.queued)
			}
		})
	}
}

// TestBurstyFarArrivalNeverArrives: a bursty process whose next arrival
// lies past a drawn time's bound (a burst in a million brings a request,
// a calm lasts a week: about 19,000 years) has none. The state's end
// used to run out of int64's range and wrap, and requests arrived in the
// past, counted as dropped (2, 3, 2, 1 in 10 minutes for seeds 1 to 4).
func TestBurstyFarArrivalNeverArrives(t *testing.T) {
	for seed := 1; seed <= 4; seed++ {
		sc := mustParse(t, `
name: far
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - name: a
    workload:
      type: dnn
      flops: 1e9
      arrival: {process: bursty, rate: 0, burst_rate: 0.001, burst_mean: 1ms, calm_mean: 7d}
`)
		sc.Seed = int64(seed)
		s := mustNew(t, sc, Options{})
		s.AdvanceTo(s.Now().Add(10 * time.Minute))
		for _, tw := range s.Window().Tenants {
			if tw.Dropped != 0 || tw.Completed != 0 {
				t.Errorf("seed %d: tenant %s: %d dropped, %d completed in 10 minutes; want none", seed, tw.Tenant, tw.Dropped, tw.Completed)
			}
		}
		if tn := s.tenants[0]; tn.nextArr != never {
			t.Errorf("seed %d: next arrival at %d, want never", seed, tn.nextArr)
		}
	}
}
