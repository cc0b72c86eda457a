package simrun_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
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

// TestITLSheddingJudgedNoBetter: the assistant of the built-in ITL
// scenario under bursts it cannot serve in time, served late (a queue of
// 1000) or shed (a queue of 16, which rejects a third of its requests):
// the shedding run must not judge better. Before, a rejected request was
// one missed token where serving it would have judged its 191 (attainment
// 93.5% shedding against 91.9% serving late on seed 1); each now misses
// the tokens it never produced.
func TestITLSheddingJudgedNoBetter(t *testing.T) {
	data, err := os.ReadFile(itlScenario)
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := os.ReadFile(strings.TrimSuffix(itlScenario, ".yaml") + ".tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(maxQueue int) (attainment float64, dropped int) {
		text := strings.Replace(string(data), "burst_rate: 6,", "burst_rate: 20,", 1)
		text = strings.Replace(text, "max_queue: 1000", fmt.Sprintf("max_queue: %d", maxQueue), 1)
		if !strings.Contains(text, "burst_rate: 20,") || !strings.Contains(text, fmt.Sprintf("max_queue: %d\n", maxQueue)) {
			t.Fatal("the scenario's arrivals or queue are not where the test expects them")
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "itl-shed.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "itl-shed.tenants.yaml"), tenants, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := simrun.Run(context.Background(), simrun.Config{Scenario: file, Policy: "best-effort", Seed: 1, SeedSet: true, Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range res.Recorder.Summary().Tenants {
			if ts.Tenant == "assistant" && ts.Attainment != nil {
				return *ts.Attainment, ts.Dropped
			}
		}
		t.Fatal("no attainment of the assistant")
		return 0, 0
	}
	served, servedDrops := run(1000)
	shed, shedDrops := run(16)
	t.Logf("served late: attainment %.4f, %d dropped; shed: %.4f, %d dropped", served, servedDrops, shed, shedDrops)
	if shedDrops < 300 || shedDrops < 10*servedDrops {
		t.Fatalf("%d requests dropped shedding, %d serving late: the test needs a queue that sheds", shedDrops, servedDrops)
	}
	if shed >= served {
		t.Errorf("shedding %d requests judged %.4f, serving them late %.4f: shedding must not judge better", shedDrops, shed, served)
	}
}
