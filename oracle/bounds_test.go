package oracle

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// boundsScenario is one MPS GPU with tenants a and b (each with an SLO)
// and the training job t, each tenant of boundsTenants by its executable;
// with b left out, two tenants.
func boundsScenario(t *testing.T, withB bool) (*sim.Scenario, *tenant.Config) {
	t.Helper()
	src := `name: s
duration: 1m
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, process: {pid: 11, executable: a}, memory: 8GiB, slo: {quantile: 0.9, target: 60ms}, workload: {type: dnn, flops: 2e12, max_batch: 8, arrival: {process: poisson, rate: 50}}}
  - {name: t, process: {pid: 13, executable: t}, memory: 8GiB, workload: {type: training, flops: 2e13}}
`
	if withB {
		src += `  - {name: b, process: {pid: 12, executable: b}, memory: 1GiB, slo: {quantile: 0.9, target: 1s}, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}
`
	}
	sc, err := sim.ParseScenario("s.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.ParseConfig("s.tenants.yaml", []byte(boundsTenants))
	if err != nil {
		t.Fatal(err)
	}
	return sc, cfg
}

// boundsTenants guarantees a 35% of the GPU and lets b take at most 80%,
// t 60%.
const boundsTenants = `tenants:
  - name: a
    class: latency
    selectors: [{executable: a}]
    share: {min: 0.35}
  - name: b
    class: latency
    selectors: [{executable: b}]
    share: {max: 0.8}
  - name: t
    class: batch
    selectors: [{executable: t}]
    share: {max: 0.6}
`

// TestOracleCapsWithinShareBounds: the caps the oracle's search tries are
// those the tuner's Bounds guard admits, the grid clipped to each
// tenant's share bounds (a's 0.1, 0.2 and 0.3 tried as its share.min,
// t's 0.75 and "uncapped" as its share.max, b's "uncapped" as its own), in both the combined
// search of two tenants and the staged one of three, where a tenant not
// yet staged (b) runs at its share.max, not uncapped; without a tenants file
// the grid is the whole of it.
func TestOracleCapsWithinShareBounds(t *testing.T) {
	bounds := map[uint32][2]float64{11: {0.35, 1}, 12: {0, 0.8}, 13: {0, 0.6}}
	for _, tc := range []struct {
		name  string
		withB bool
		cfg   bool
		want  map[uint32][]float64 // the caps tried, by PID
	}{
		{"two tenants", false, true, map[uint32][]float64{11: {0.35, 0.5, 0.75, 1}, 13: {0.1, 0.2, 0.3, 0.5, 0.6}}},
		{"two tenants, no tenants file", false, false, map[uint32][]float64{11: capGridFew, 13: capGridFew}},
		{"three tenants", true, true, map[uint32][]float64{11: {0.35, 0.5, 1}, 12: {0.1, 0.25, 0.5, 0.8}, 13: {0.1, 0.25, 0.5, 0.6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, cfg := boundsScenario(t, tc.withB)
			if !tc.cfg {
				cfg = nil
			}
			o := &oracleSearch{sc: sc, phases: phaseBounds(sc, time.Minute)}
			var err error
			if o.shares, err = shares(sc, cfg); err != nil {
				t.Fatal(err)
			}
			p := &Plan{Phases: o.phases}
			tried := map[uint32]map[float64]bool{}
			for stage := 0; ; stage++ {
				c := o.primaryCandidates(p, 0, stage)
				if c == nil {
					break
				}
				for _, s := range c[0] {
					for pid, f := range s.Caps {
						if tried[pid] == nil {
							tried[pid] = map[float64]bool{}
						}
						tried[pid][f] = true
						if b := bounds[pid]; tc.cfg && (f < b[0]-1e-9 || f > b[1]+1e-9) {
							t.Errorf("stage %d tries PID %d at %v, outside its share bounds %v", stage, pid, f, b)
						}
					}
					for pid, b := range bounds {
						if _, ok := s.Caps[pid]; tc.cfg && !ok && b[1] < 1 && (pid != 12 || tc.withB) {
							t.Errorf("stage %d leaves PID %d uncapped, above its share.max %v", stage, pid, b[1])
						}
					}
				}
				if stage > 0 && len(c[0]) > 0 {
					// keep the last candidate, as a search may
					p.Phases[0].GPUs[0] = c[0][len(c[0])-1]
				}
			}
			for pid, want := range tc.want {
				if len(tried[pid]) != len(want) {
					t.Errorf("PID %d tried at %v, want %v", pid, tried[pid], want)
					continue
				}
				for _, f := range want {
					if !tried[pid][f] {
						t.Errorf("PID %d tried at %v, want %v", pid, tried[pid], want)
						break
					}
				}
			}
		})
	}
}

// TestOracleFindWithinShareBounds: the plan the oracle finds gives every
// tenant a cap within its share bounds and caps the training job, whose
// share.max is below 1, at or below it in every phase (uncapped, it would
// run at what the tuner may not give it): without the bounds, the best
// plan leaves it uncapped.
func TestOracleFindWithinShareBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("a search over a virtual minute")
	}
	sc, cfg := boundsScenario(t, false)
	p, err := Find(context.Background(), sc, cfg, 1, sc.Duration, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pi, ph := range p.Phases {
		caps := ph.GPUs[0].Caps
		if f, ok := caps[13]; !ok || f > 0.6+1e-9 {
			t.Errorf("phase %d caps the training job at %v (set: %v), want at most its share.max 0.6", pi, f, ok)
		}
		if f, ok := caps[11]; ok && f < 0.35-1e-9 {
			t.Errorf("phase %d caps a at %v, below its share.min 0.35", pi, f)
		}
	}
}
