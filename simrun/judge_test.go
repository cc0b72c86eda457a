package simrun

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// judgeRecount is a tenant's figures over a run, counted from its
// windows as they came.
type judgeRecount struct {
	lat                                   []time.Duration
	completed, judged, good, missed, over int
	work                                  float64
	steps                                 []stepWork
	quantile                              float64
	target                                time.Duration
	metric                                string
}

// stepWork is a tenant's work in one step, on the GPU it was on.
type stepWork struct {
	minute int
	gpu    string
	work   float64
}

// TestSummaryRecomputed runs built-in scenarios under the tuner and the
// baselines and works the summary's figures out again from the windows
// the run recorded: attainment and MET from the judged latencies (not
// the windows' Good), percentiles by nearest rank over every latency,
// work per second, energy from the GPUs' power, and goodput and the
// GPU-minutes held from each minute's ended requests on each GPU and
// those overdue at its end.
func TestSummaryRecomputed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	runs := []struct{ scenario, policy string }{
		{"noisy-neighbour", "autotune"}, {"noisy-neighbour", "static-equal"},
		{"bursty-llm-ttft", "autotune"}, {"bursty-llm-ttft", "static-equal"},
		{"bursty-llm-itl", "autotune"}, {"bursty-llm-training", "autotune"},
		{"h100-timeslice", "autotune"},
		{"h100-timeslice", "static-equal"}, {"eight-gpu-hot", "static-equal"},
	}
	for _, rn := range runs {
		t.Run(rn.scenario+"/"+rn.policy, func(t *testing.T) {
			acc := map[string]*judgeRecount{}
			var energy float64
			// per minute and tenant: its work by GPU, its ended and
			// good requests, the GPU it was on and its overdue
			// requests at the minute's end
			type tm struct {
				good, ended, over int
				gpu               string
				work              map[string]float64
			}
			minutes := map[int]map[string]*tm{}
			step := 0
			cfg := Config{Scenario: rn.scenario, Policy: rn.policy, Duration: 10 * time.Minute, Seed: 1, SeedSet: true, Step: time.Second,
				observe: func(_ *tenant.Snapshot, _ []tuner.Decision, w *sim.WindowStats) {
					m := step / 60
					step++
					if minutes[m] == nil {
						minutes[m] = map[string]*tm{}
					}
					secs := w.End.Sub(w.Start).Seconds()
					for _, g := range w.GPUs {
						energy += g.PowerW * secs
					}
					for _, tw := range w.Tenants {
						a := acc[tw.Tenant]
						if a == nil {
							a = &judgeRecount{}
							acc[tw.Tenant] = a
						}
						a.lat = append(a.lat, tw.Latencies...)
						a.completed += tw.Completed
						a.judged += tw.Judged()
						a.good += tw.Good
						a.missed += missedBy(tw)
						a.over = tw.Overdue
						a.work += tw.Work
						a.steps = append(a.steps, stepWork{m, tw.GPU, tw.Work})
						a.quantile, a.target, a.metric = tw.SLOQuantile, tw.SLOTarget, tw.SLOMetric
						x := minutes[m][tw.Tenant]
						if x == nil {
							x = &tm{work: map[string]float64{}}
							minutes[m][tw.Tenant] = x
						}
						x.gpu = tw.GPU
						x.work[tw.GPU] += tw.Work
						x.ended += tw.Judged() + missedBy(tw)
						x.over = tw.Overdue
						// good counted from the latencies, not tw.Good
						if tw.SLOTarget > 0 {
							for _, l := range tw.Latencies {
								if l <= tw.SLOTarget {
									x.good++
								}
							}
						}
					}
				}}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Recorder.Summary()
			elapsed := s.Seconds
			// goodput, independently: a GPU holds in a minute unless a
			// tenant on it at the minute's end with an SLO ended requests
			// or had some overdue at the minute's end, and fewer than its
			// quantile of those were good
			gpuMinutes, held := 0, 0
			brokenAt := map[int]map[string]bool{}
			for m := 0; m < len(minutes); m++ {
				broken := map[string]bool{}
				brokenAt[m] = broken
				gpus := map[string]bool{}
				for name, x := range minutes[m] {
					for g := range x.work {
						gpus[g] = true
					}
					if a := acc[name]; a.target > 0 && x.ended+x.over > 0 && float64(x.good)/float64(x.ended+x.over) < a.quantile {
						broken[x.gpu] = true
					}
				}
				for g := range gpus {
					gpuMinutes++
					if !broken[g] {
						held++
					}
				}
			}
			lost := map[string]int{}
			for _, ac := range res.Actions {
				lost[ac.Tenant] += ac.Lost
			}
			// a training job's steps are work less those restarts threw
			// away and it did not redo: the last it counted, taken back
			// step by step from the end; goodput is the work left in
			// the steps whose GPU held in their minute
			goodWork := map[string]float64{}
			for name, a := range acc {
				var drop float64
				if a.work <= float64(a.completed) {
					drop = a.work - float64(a.completed-lost[name])
				}
				for i := len(a.steps) - 1; i >= 0; i-- {
					st := a.steps[i]
					take := min(drop, st.work)
					drop -= take
					if !brokenAt[st.minute][st.gpu] {
						goodWork[name] += st.work - take
					}
				}
			}
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(math.Abs(a), math.Abs(b)) }
			if f := float64(held) / float64(gpuMinutes); s.HeldFraction == nil {
				t.Errorf("GPU-minutes held: summary null, recounted %d/%d = %.6f", held, gpuMinutes, f)
			} else if !near(f, *s.HeldFraction) {
				t.Errorf("GPU-minutes held: summary %.6f, recounted %d/%d = %.6f", *s.HeldFraction, held, gpuMinutes, f)
			}
			if !near(energy, s.EnergyJ) {
				t.Errorf("energy: summary %.6g J, recounted %.6g J", s.EnergyJ, energy)
			}
			for _, ts := range s.Tenants {
				a := acc[ts.Tenant]
				lat := slices.Clone(a.lat)
				slices.Sort(lat)
				rank := func(q float64) float64 {
					i := int(math.Ceil(q*float64(len(lat)))) - 1
					return lat[max(i, 0)].Seconds()
				}
				if len(lat) > 0 && (!near(*ts.P50, rank(0.5)) || !near(*ts.P99, rank(0.99))) {
					t.Errorf("%s: P50/P99 summary %g/%g, recounted %g/%g", ts.Tenant, *ts.P50, *ts.P99, rank(0.5), rank(0.99))
				}
				work := a.work
				if work <= float64(a.completed) {
					// training: every step completed, less those
					// restarts threw away (their redoing is among
					// the completed)
					work = float64(a.completed - lost[ts.Tenant])
				}
				if w := work / elapsed; !near(w, ts.WorkRate) {
					t.Errorf("%s: work/s summary %g, recounted %g", ts.Tenant, ts.WorkRate, w)
				}
				if w := goodWork[ts.Tenant] / elapsed; !near(w, ts.Goodput) {
					t.Errorf("%s: goodput/s summary %g, recounted %g", ts.Tenant, ts.Goodput, w)
				}
				if ts.Requests != a.completed {
					t.Errorf("%s: requests summary %d, recounted %d", ts.Tenant, ts.Requests, a.completed)
				}
				if a.target == 0 {
					continue
				}
				good, _ := slices.BinarySearch(lat, a.target+1)
				den := len(lat) + a.missed + a.over
				att := float64(good) / float64(den)
				t.Logf("%s: attainment summary %.6f met %v, recounted %d/(%d+%d+%d) = %.6f; P50 %g P99 %g; work/s %g goodput/s %g",
					ts.Tenant, *ts.Attainment, *ts.SLOMet, good, len(lat), a.missed, a.over, att, *ts.P50, *ts.P99, ts.WorkRate, ts.Goodput)
				if !near(att, *ts.Attainment) || (att >= a.quantile) != *ts.SLOMet || a.judged != len(lat) {
					t.Errorf("%s: attainment summary %.6f (met %v), recounted %.6f", ts.Tenant, *ts.Attainment, *ts.SLOMet, att)
				}
			}
			t.Logf("held %d/%d GPU-minutes, energy %.6g J (summary %.6g)", held, gpuMinutes, energy, s.EnergyJ)
		})
	}
}

// missedBy is the observations tw's dropped requests missed: one each,
// under an ITL SLO every token each will never produce.
func missedBy(tw sim.TenantWindow) int {
	if tw.SLOMetric == sim.SLOMetricITL {
		return tw.DroppedTokens
	}
	return tw.Dropped
}
