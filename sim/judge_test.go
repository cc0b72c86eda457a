package sim

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// endState counts, from the simulator's own per-request records at the
// end of a run, the requests still in flight that can no longer meet
// tenant t's SLO: queued or running ones older than the target, and
// under a TTFT SLO running ones whose first token came later than the
// target (their judged latency is already known).
func endState(s *Simulator, t *tenant) (late int) {
	target := int64(t.spec.SLO.Target)
	if t.spec.SLO.Metric == SLOMetricITL {
		// a stream whose next token is already later than the target
		for _, r := range t.seqs {
			if r.first >= 0 && s.now-t.lastIter > target {
				late++
			}
		}
		return late
	}
	for _, r := range t.queue[t.qhead:] {
		if s.now-r.arrival > target {
			late++
		}
	}
	for _, r := range t.seqs {
		switch {
		case r.first >= 0 && t.spec.SLO.Metric == SLOMetricTTFT:
			if r.first-r.arrival > target {
				late++
			}
		case s.now-r.arrival > target:
			late++
		}
	}
	return late
}

// TestJudgeRecomputed runs built-in scenarios with nothing acting on
// them and works out each SLO tenant's attainment from the latencies
// the windows keep (not their Good counts), the drops, and the requests
// left at the end as the simulator holds them; and each GPU's energy
// from its energy counter (not the windows' mean power).
func TestJudgeRecomputed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	for _, name := range []string{"bursty-llm-ttft", "bursty-llm-itl", "noisy-neighbour", "h100-timeslice", "eight-gpu-hot"} {
		t.Run(name, func(t *testing.T) {
			sc, err := LoadScenario("../scenarios/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(sc, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			type acc struct {
				lat                        []time.Duration
				good, judged, missed, over int // missed: by dropped requests
			}
			accs := map[string]*acc{}
			var powerJ float64
			start := s.Now()
			for i := 1; i <= 600; i++ {
				s.AdvanceTo(start.Add(time.Duration(i) * time.Second))
				w := s.Window()
				for _, tw := range w.Tenants {
					a := accs[tw.Tenant]
					if a == nil {
						a = &acc{}
						accs[tw.Tenant] = a
					}
					a.lat = append(a.lat, tw.Latencies...)
					a.good += tw.Good
					a.judged += tw.Judged()
					a.missed += tw.Ended() - tw.Judged()
					a.over = tw.Overdue
				}
				for _, g := range w.GPUs {
					powerJ += g.PowerW * w.End.Sub(w.Start).Seconds()
				}
			}
			var counterJ float64
			for _, g := range s.gpus {
				counterJ += g.energy
			}
			t.Logf("energy: windows %.6g J, counters %.6g J", powerJ, counterJ)
			if math.Abs(powerJ-counterJ) > 1e-6*counterJ {
				t.Errorf("energy: windows' power x seconds %.6g J, counters %.6g J", powerJ, counterJ)
			}
			for _, tn := range s.tenants {
				if tn.spec.SLO == nil {
					continue
				}
				a := accs[tn.spec.Name]
				target := time.Duration(tn.spec.SLO.Target)
				slices.Sort(a.lat)
				good, _ := slices.BinarySearch(a.lat, target+1)
				late := endState(s, tn)
				judge := float64(a.good) / float64(a.judged+a.missed+a.over)
				mine := float64(good) / float64(len(a.lat)+a.missed+late)
				t.Logf("%s: judge %d/(%d+%d+%d)=%.6f, recomputed %d/(%d+%d+%d)=%.6f",
					tn.spec.Name, a.good, a.judged, a.missed, a.over, judge, good, len(a.lat), a.missed, late, mine)
				if tn.spec.SLO.Metric == SLOMetricITL {
					// the tokens vLLM's histogram observed, and those
					// in the buckets up to the target (one of its bounds)
					var inTarget uint64
					for i, b := range tn.itl.bounds {
						if b <= target.Seconds() {
							inTarget += tn.itl.counts[i]
						}
					}
					t.Logf("%s: histogram %d tokens, %d within the target", tn.spec.Name, tn.itl.n, inTarget)
					if tn.itl.n != uint64(a.judged) || inTarget != uint64(a.good) {
						t.Errorf("%s: judged %d tokens, %d good; histogram %d, %d", tn.spec.Name, a.judged, a.good, tn.itl.n, inTarget)
					}
				}
				if a.good != good || a.judged != len(a.lat) || a.over != late {
					t.Errorf("%s: attainment %.6f, recomputed from the requests %.6f", tn.spec.Name, judge, mine)
				}
			}
		})
	}
}

// TestFailedRestartFailsRequests: a latency service whose restart fails
// (out of memory) is down, not gone: its clients' requests go on coming
// and fail, and count against its SLO, as while it is stopped. Before,
// they stopped coming, and the run judged it on what it served before.
func TestFailedRestartFailsRequests(t *testing.T) {
	sc, err := LoadScenario("../scenarios/noisy-neighbour.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := s.Now()
	var chat *tenant
	for _, tn := range s.tenants {
		if tn.spec.Name == "chat" {
			chat = tn
		}
	}
	s.AdvanceTo(start.Add(time.Minute))
	s.Window()
	uuid, pid := s.gpus[chat.gpu].uuid, chat.spec.Process.PID
	if err := s.SetMPSPinnedMemoryLimit(context.Background(), uuid, pid, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartClient(context.Background(), uuid, pid, ""); err == nil {
		t.Fatal("a restart over the pinned memory limit succeeded")
	}
	s.AdvanceTo(start.Add(10 * time.Minute))
	for _, tw := range s.Window().Tenants {
		if tw.Tenant != "chat" {
			continue
		}
		// about 6 requests a second for 9 minutes
		if tw.OOMs != 1 || tw.Completed != 0 || tw.Dropped < 2000 {
			t.Errorf("chat after a failed restart: %d OOMs, %d completed, %d dropped; want 1, 0 and its clients' requests", tw.OOMs, tw.Completed, tw.Dropped)
		}
	}
}

// TestLostGPUFailsRequests: while a GPU is lost, the services on it are
// down: their clients' requests go on coming and fail, and count against
// their SLOs. Before, they stopped coming until the GPU was back.
func TestLostGPUFailsRequests(t *testing.T) {
	sc := mustParse(t, `name: fault
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: a, gpu: 0, process: {pid: 10}, memory: 8GiB, slo: {quantile: 0.9, target: 1s}, workload: {type: dnn, flops: 1e11, arrival: {process: poisson, rate: 50}}}
events:
  - {at: 10s, action: gpu-lost, gpu: 0}
  - {at: 20s, action: gpu-restored, gpu: 0}
`)
	s := mustNew(t, sc, Options{})
	start := s.Now()
	s.AdvanceTo(start.Add(10 * time.Second))
	s.Window()
	s.AdvanceTo(start.Add(20 * time.Second))
	// about 50 requests a second for 10 s
	if w := s.Window().Tenants[0]; w.Completed != 0 || w.Dropped < 400 {
		t.Errorf("a while its GPU is lost: %d completed, %d dropped; want 0 and its clients' requests", w.Completed, w.Dropped)
	}
	s.AdvanceTo(start.Add(30 * time.Second))
	if w := s.Window().Tenants[0]; w.Completed < 400 || w.Dropped != 0 {
		t.Errorf("a after its GPU is back: %d completed, %d dropped; want its requests served", w.Completed, w.Dropped)
	}
}
