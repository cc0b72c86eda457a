package simrun_test

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// itlScenario is the built-in scenario whose LLM tenant has an
// inter-token latency SLO.
const itlScenario = "../scenarios/bursty-llm-itl.yaml"

// TestITLJudgedPerToken: under an ITL SLO the simulator judges every
// token after a request's first, as vLLM's inter-token histogram observes
// them, on the same run as the end-to-end SLO it replaces: the windows
// judge exactly the histogram's observations (count, and those within the
// target, a bound of the histogram), a window's latencies are its judged
// tokens' and its good ones those within the target.
func TestITLJudgedPerToken(t *testing.T) {
	data, err := os.ReadFile(itlScenario)
	if err != nil {
		t.Fatal(err)
	}
	const slo = "slo: {quantile: 0.99, target: 50ms, metric: itl}"
	if !strings.Contains(string(data), slo) {
		t.Fatal("the scenario's ITL SLO is not where the test expects it")
	}
	parse := func(s string) *sim.Scenario {
		sc, err := sim.ParseScenario("itl.yaml", []byte(strings.Replace(string(data), slo, s, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	itlSim, err := simrun.NewSimulator(parse(slo), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer itlSim.Close()
	itl := windowsOf(itlSim, "assistant", 3*time.Minute)
	e2e := windows(t, parse("slo: {quantile: 0.99, target: 50ms}"), "assistant", 3*time.Minute)
	tokens, good, completed := 0, 0, 0
	for i := range itl {
		w := itl[i]
		if w.Completed != e2e[i].Completed || w.Dropped != e2e[i].Dropped {
			t.Fatalf("window %d: the SLO's metric changed the run: %d/%d completed, %d/%d dropped", i, w.Completed, e2e[i].Completed, w.Dropped, e2e[i].Dropped)
		}
		if w.SLOMetric != sim.SLOMetricITL || e2e[i].Tokens != 0 {
			t.Fatalf("window %d: metric %q, %d tokens judged end to end", i, w.SLOMetric, e2e[i].Tokens)
		}
		if len(w.Latencies) != w.Tokens || w.Good > w.Tokens {
			t.Fatalf("window %d: %d tokens judged, %d latencies, %d good", i, w.Tokens, len(w.Latencies), w.Good)
		}
		n := 0
		for _, l := range w.Latencies {
			if l <= 50*time.Millisecond {
				n++
			}
		}
		if n != w.Good {
			t.Fatalf("window %d: %d tokens within the target, %d counted good", i, n, w.Good)
		}
		tokens, good, completed = tokens+w.Tokens, good+w.Good, completed+w.Completed
	}
	if completed < 100 || tokens < 100*completed {
		t.Fatalf("%d tokens judged for %d completed requests", tokens, completed)
	}
	// the judged tokens are the observations of the histogram the tuner
	// reads, the target one of its bounds
	fams, err := itlSim.AppMetricFamilies("assistant")
	if err != nil {
		t.Fatal(err)
	}
	h := fams["vllm:inter_token_latency_seconds"].GetMetric()[0].GetHistogram()
	if int(h.GetSampleCount()) != tokens {
		t.Errorf("the histogram observed %d tokens, the windows judged %d", h.GetSampleCount(), tokens)
	}
	atTarget := -1
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 0.05 {
			atTarget = int(b.GetCumulativeCount())
		}
	}
	if atTarget != good {
		t.Errorf("the histogram has %d tokens at or under 50 ms, the windows %d good", atTarget, good)
	}
	if good == 0 || good == tokens {
		t.Errorf("%d of %d tokens good: the test needs a target inside the distribution", good, tokens)
	}
}

// TestITLSLOReachesTheTuner: the built-in ITL scenario loads with its
// tenants file (the same SLO on both sides), and the attainment the
// tuner's snapshot reads from vLLM's inter-token histogram is the one the
// simulator judges; the end-to-end histogram read at the same target
// gives another figure, and the scenario refuses it.
func TestITLSLOReachesTheTuner(t *testing.T) {
	sc, cfg, err := simrun.LoadScenario(itlScenario)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		t.Fatalf("%s has no companion tenants file", itlScenario)
	}
	if _, _, metric, _, _ := cfg.GivenSLO("assistant"); metric != sim.SLOMetricITL {
		t.Fatalf("the tenants file gives the tuner a %q SLO", metric)
	}
	judged, read := attainments(t, sc, cfg)
	t.Logf("ITL attainment: judged %.4f, read by the tuner %.4f", judged, read)
	if math.Abs(read-judged) > 0.005 {
		t.Errorf("the tuner reads attainment %.4f, the simulator judges %.4f", read, judged)
	}
	if judged < 0.5 {
		t.Errorf("judged attainment %.3f: the test needs an ITL SLO mostly met", judged)
	}
	cfg.TenantByName("assistant").LatencySource.Preset = "vllm-e2e"
	if err := simrun.CheckTenants(sc, cfg); err == nil || !strings.Contains(err.Error(), "judges itl quantile 0.99 <= 50ms, but") {
		t.Errorf("an end-to-end source for an ITL SLO: %v", err)
	}
	if _, e2e := attainments(t, sc, cfg); e2e > judged-0.3 {
		t.Errorf("end-to-end attainment %.3f at the ITL target, ITL %.3f: the test cannot tell them apart", e2e, judged)
	}
}
