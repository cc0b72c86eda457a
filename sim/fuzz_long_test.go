package sim

import (
	"context"
	"math"
	"testing"
	"time"
)

// longHorizon and longStep are the model time and the step a parsed case
// of FuzzParseScenarioLong runs at most: minutes, where FuzzParseScenario
// runs 50 ms, for what only a long run reaches (counters that overflow,
// queues that grow, events late in the run).
const (
	longHorizon = 20 * time.Minute
	longStep    = 10 * time.Second
	// longBudget bounds a case's steps times its tenants and GPUs, for
	// one case to stay well under a second of CPU: a scenario of many
	// tenants runs a shorter horizon.
	longBudget = 1000
)

// FuzzParseScenarioLong: a scenario that parses runs for minutes of model
// time at a coarse step without panicking, and its readings stay what a
// real host could report (checkDevice), its window's figures finite.
func FuzzParseScenarioLong(f *testing.F) {
	addScenarioSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario("fuzz.yaml", data)
		if err != nil {
			return // FuzzParseScenario checks the errors
		}
		s, err := New(sc, Options{})
		if err != nil {
			t.Fatalf("parsed scenario rejected by New: %v", err)
		}
		steps := min(int(longHorizon/longStep), longBudget/(len(sc.Tenants)+len(sc.GPUs)+1))
		ctx := context.Background()
		prevCS := map[int]uint64{}
		prevE := map[int]float64{}
		start := s.Now()
		for i := 1; i <= steps; i++ {
			s.AdvanceTo(start.Add(time.Duration(i) * longStep))
			r, err := s.Sample(ctx)
			if err != nil {
				t.Fatalf("t=%v: %v", time.Duration(i)*longStep, err)
			}
			pids := map[uint32]bool{}
			for j := range r.Devices {
				checkDevice(t, i*int(longStep/time.Second), &r.Devices[j], pids, prevCS, prevE)
			}
			w := s.Window()
			for _, g := range w.GPUs {
				for _, v := range []float64{g.SMActive, g.DRAMActive, g.PowerW, g.SMClockMHz} {
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Fatalf("t=%v: GPU %d window %+v", time.Duration(i)*longStep, g.Index, g)
					}
				}
			}
			for _, tw := range w.Tenants {
				bad := tw.Completed < 0 || tw.Good < 0 || tw.Tokens < 0 || tw.Dropped < 0 || tw.Redo < 0 || tw.Overdue < 0
				for _, v := range []float64{tw.SMShare, tw.BWShare, tw.Work} {
					bad = bad || math.IsNaN(v) || math.IsInf(v, 0) || v < 0
				}
				if bad {
					t.Fatalf("t=%v: tenant %s window %+v", time.Duration(i)*longStep, tw.Tenant, tw)
				}
			}
		}
	})
}
