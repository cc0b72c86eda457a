package simrun_test

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// ttftScenario is the built-in scenario whose LLM tenant has a TTFT SLO.
const ttftScenario = "../scenarios/bursty-llm-ttft.yaml"

// windows runs sc for d and returns tenant's windows of every 10 s.
func windows(t *testing.T, sc *sim.Scenario, name string, d time.Duration) []sim.TenantWindow {
	t.Helper()
	s, err := simrun.NewSimulator(sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return windowsOf(s, name, d)
}

// windowsOf advances s to d from simrun.Start and returns tenant's windows
// of every 10 s.
func windowsOf(s *sim.Simulator, name string, d time.Duration) []sim.TenantWindow {
	var out []sim.TenantWindow
	for at := 10 * time.Second; at <= d; at += 10 * time.Second {
		s.AdvanceTo(simrun.Start.Add(at))
		for _, tw := range s.Window().Tenants {
			if tw.Tenant == name {
				out = append(out, tw)
			}
		}
	}
	return out
}

// TestTTFTJudged: under a TTFT SLO the simulator judges each request's
// time to first token, on the same requests as the end-to-end SLO it
// replaces: every order statistic is at most the end-to-end one, the
// median well under it, and at least as many requests are good.
func TestTTFTJudged(t *testing.T) {
	data, err := os.ReadFile(ttftScenario)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(slo string) *sim.Scenario {
		text := strings.Replace(string(data), "slo: {quantile: 0.95, target: 200ms, metric: ttft}", slo, 1)
		if text == string(data) && !strings.Contains(slo, "ttft") {
			t.Fatal("the scenario's TTFT SLO is not where the test expects it")
		}
		sc, err := sim.ParseScenario("ttft.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	ttft := windows(t, parse("slo: {quantile: 0.95, target: 200ms, metric: ttft}"), "assistant", 3*time.Minute)
	e2e := windows(t, parse("slo: {quantile: 0.95, target: 200ms}"), "assistant", 3*time.Minute)
	var lt, le []time.Duration
	var gt, ge, completed int
	for i := range ttft {
		if ttft[i].Completed != e2e[i].Completed || ttft[i].Dropped != e2e[i].Dropped {
			t.Fatalf("window %d: the SLO's metric changed the run: %d/%d completed, %d/%d dropped", i, ttft[i].Completed, e2e[i].Completed, ttft[i].Dropped, e2e[i].Dropped)
		}
		if ttft[i].SLOMetric != sim.SLOMetricTTFT || e2e[i].SLOMetric != "" {
			t.Fatalf("window %d: metrics %q and %q", i, ttft[i].SLOMetric, e2e[i].SLOMetric)
		}
		lt, le = append(lt, ttft[i].Latencies...), append(le, e2e[i].Latencies...)
		gt, ge, completed = gt+ttft[i].Good, ge+e2e[i].Good, completed+ttft[i].Completed
	}
	if completed < 100 {
		t.Fatalf("%d requests completed", completed)
	}
	slices.Sort(lt)
	slices.Sort(le)
	for i := range lt {
		if lt[i] > le[i] {
			t.Fatalf("order statistic %d: TTFT %v above end-to-end %v", i, lt[i], le[i])
		}
	}
	if m, e := lt[len(lt)/2], le[len(le)/2]; 4*m > e {
		t.Errorf("median TTFT %v not well under the median end-to-end latency %v", m, e)
	}
	if gt <= ge {
		t.Errorf("good requests: %d by TTFT, %d end to end", gt, ge)
	}
}

// TestTTFTSLOReachesTheTuner: the built-in TTFT scenario loads with its
// tenants file (the same SLO on both sides), and the attainment the
// tuner's snapshot reads from the latency source (vLLM's TTFT histogram)
// is the one the simulator judges, where the end-to-end histogram would
// read a very different one.
func TestTTFTSLOReachesTheTuner(t *testing.T) {
	sc, cfg, err := simrun.LoadScenario(ttftScenario)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		t.Fatalf("%s has no companion tenants file", ttftScenario)
	}
	if _, _, metric, _, _ := cfg.GivenSLO("assistant"); metric != sim.SLOMetricTTFT {
		t.Fatalf("the tenants file gives the tuner a %q SLO", metric)
	}
	judged, read := attainments(t, sc, cfg)
	t.Logf("TTFT attainment: judged %.4f, read by the tuner %.4f", judged, read)
	// the histogram counts a request at its first token, the simulator at
	// its end: they differ by the requests in flight
	if math.Abs(read-judged) > 0.02 {
		t.Errorf("the tuner reads attainment %.3f, the simulator judges %.3f", read, judged)
	}
	if judged < 0.5 {
		t.Errorf("judged attainment %.3f: the test needs a TTFT SLO mostly met", judged)
	}
	// the same target read from the end-to-end histogram is another figure
	cfg.TenantByName("assistant").LatencySource.Preset = "vllm-e2e"
	if err := simrun.CheckTenants(sc, cfg); err == nil || !strings.Contains(err.Error(), "judges ttft quantile 0.95 <= 200ms, but") {
		t.Errorf("an end-to-end source for a TTFT SLO: %v", err)
	}
	if _, e2e := attainments(t, sc, cfg); e2e > judged-0.3 {
		t.Errorf("end-to-end attainment %.3f at the TTFT target, TTFT %.3f: the test cannot tell them apart", e2e, judged)
	}
}

// attainments runs sc with cfg for 4 minutes (inside the SLO window, which
// then holds every request) and returns assistant's attainment as the
// simulator judges it (over requests, or tokens under an ITL SLO) and as
// the tuner's snapshot reads it.
func attainments(t *testing.T, sc *sim.Scenario, cfg *tenant.Config) (judged, read float64) {
	t.Helper()
	h := simtest.Start(t, sc, cfg)
	defer h.Close()
	ctx := context.Background()
	var good, ended int
	var snap *tenant.Snapshot
	for range 24 {
		snap = h.Build(ctx, h.Sample(ctx, 10*time.Second))
		for _, tw := range h.Sim.Window().Tenants {
			if tw.Tenant == "assistant" {
				good, ended = good+tw.Good, ended+tw.Ended()
			}
		}
	}
	if ended < 100 {
		t.Fatalf("%d judged (requests, or tokens under an ITL SLO) ended", ended)
	}
	for _, st := range snap.SLOs {
		if st.Tenant == "assistant" && st.Attainment != nil {
			return float64(good) / float64(ended), *st.Attainment
		}
	}
	t.Fatal("the tuner's snapshot has no attainment for assistant")
	return 0, 0
}

// TestSLOMetricValidated: a TTFT or ITL SLO needs an LLM workload, and an
// SLO metric is e2e, ttft or itl.
func TestSLOMetricValidated(t *testing.T) {
	data, err := os.ReadFile("../scenarios/energy-slack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ slo, want string }{
		{"slo: {quantile: 0.99, target: 200ms, metric: e2e}", ""},
		{"slo: {quantile: 0.99, target: 200ms, metric: ttft}", "needs an llm workload"},
		{"slo: {quantile: 0.99, target: 200ms, metric: itl}", "slo metric itl needs an llm workload"},
		{"slo: {quantile: 0.99, target: 200ms, metric: tpot}", `unknown slo metric "tpot"`},
	} {
		text := strings.Replace(string(data), "slo: {quantile: 0.99, target: 200ms}", tc.slo, 1)
		if text == string(data) {
			t.Fatal("energy-slack's vision SLO is not where the test expects it")
		}
		_, err := sim.ParseScenario("s.yaml", []byte(text))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.slo, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.slo, err, tc.want)
		}
	}
}
