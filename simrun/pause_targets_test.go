package simrun_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// stepScenario is an H100 (MPS) with an LLM chat service at rate requests
// per second, doubled at 5 minutes, beside a training job, held to p95 <=
// target; 10 minutes.
func stepScenario(t *testing.T, rate float64, target string) string {
	t.Helper()
	dir := t.TempDir()
	sc := fmt.Sprintf(`name: load-step
seed: 1
duration: 10m
gpus:
  - model: H100-SXM5-80GB
    sharing: mps
tenants:
  - name: chat
    gpu: 0
    process: {pid: 66001, uid: 1000, executable: vllm, pod_uid: 5d0f2b48-6e7a-4c9d-9f4b-8a2e3c5d7f01, qos: guaranteed}
    memory: 40GiB
    slo: {quantile: 0.95, target: %[2]s}
    workload:
      type: llm
      model_name: llama-3.1-8b-instruct
      params: 8e9
      context_tokens: 1024
      generated_tokens: 192
      max_batch: 48
      max_queue: 2000
      arrival: {process: poisson, rate: %[1]g}
  - name: trainer
    gpu: 0
    process: {pid: 66002, uid: 1001, executable: python3, pod_uid: 5d0f2b48-6e7a-4c9d-9f4b-8a2e3c5d7f02, qos: besteffort}
    memory: 32GiB
    workload: {type: training, model_name: gpt-1.3b-pretrain, flops: 6e13, bytes: 6e10, occupancy: 0.8}
events:
  - {at: 5m, tenant: chat, action: rate, rate: %[3]g}
`, rate, target, 2*rate)
	tenants := fmt.Sprintf(`tenants:
  - name: chat
    class: latency
    priority: 10
    selectors: [{cgroup: "/kubepods.slice/*pod5d0f2b48_6e7a_4c9d_9f4b_8a2e3c5d7f01*"}]
    slo: {quantile: 0.95, target: %s}
    share: {min: 0.3, max: 1.0}
    latency_source: {url: "sim://chat", preset: vllm-e2e}
  - name: trainer
    class: batch
    priority: 1
    selectors: [{cgroup: "/kubepods.slice/*pod5d0f2b48_6e7a_4c9d_9f4b_8a2e3c5d7f02*"}]
    share: {min: 0.1, max: 1.0}
    restart_cost: 5m
`, target)
	path := filepath.Join(dir, "load-step.yaml")
	for name, body := range map[string]string{path: sc, filepath.Join(dir, "load-step.tenants.yaml"): tenants} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// pauseRun runs a scenario under autotune with the pause enabled.
func pauseRun(t *testing.T, scenario, policy string) *simrun.Result {
	t.Helper()
	var knobs []string
	if policy == "autotune" {
		knobs = []string{string(gpu.KnobPauseDuty)}
	}
	res, err := simrun.Run(context.Background(), simrun.Config{Scenario: scenario, Policy: policy, Step: time.Second, EnabledKnobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The target: after a 2x load step (the chat service's requests
// from 3 to 6 a second at 5 minutes), autotune with the pause is back
// inside the SLO within two control intervals: the chat's p95 over a
// sliding window of two intervals is at or under its target at every
// point from two intervals after the step to the end (a window with no
// request, NaN, counts as outside). The pause comes within those two
// intervals (the rounds fall 1 s into each interval here), and the
// window p95 after the step is at least 10% lower on average than with no
// control, which misses the target.
func TestPauseLoadStep(t *testing.T) {
	if testing.Short() {
		t.Skip("two 10-minute runs")
	}
	const (
		interval = tuner.DefaultInterval
		step     = 300.0 // s
		target   = 10.0  // s
	)
	within := (2 * interval).Seconds()
	path := stepScenario(t, 3, "10s")
	mean := map[string]float64{}
	for _, policy := range []string{"best-effort", "autotune"} {
		res := pauseRun(t, path, policy)
		pts := res.Recorder.WindowQuantiles("chat", 0.95, 2*interval)
		back, sum, n := -1.0, 0.0, 0
		for _, p := range pts {
			if p.T <= step {
				continue
			}
			sum, n = sum+p.V, n+1
			switch {
			case !(p.V <= target):
				back = -1
			case back < 0:
				back = p.T - step
			}
		}
		if n == 0 || (len(pts) > 0 && pts[len(pts)-1].T < step+within) {
			t.Fatalf("%s: no window p95 after the step up to %v after it (%d points)", policy, within, n)
		}
		mean[policy] = sum / float64(n)
		first := -1.0
		for _, d := range res.Decisions {
			if at := d.Time.Sub(res.Recorder.Meta().Start).Seconds(); d.Knob == gpu.KnobPauseDuty && d.Applied && at > step && first < 0 {
				first = at - step
			}
		}
		t.Logf("%s: window p95 after the step %.1f s on average; inside %.0f s for good from %.0f s after the step (-1: never); first pause %.0f s after the step (-1: none)",
			policy, mean[policy], target, back, first)
		if policy != "autotune" {
			continue
		}
		if back < 0 || back > within {
			t.Errorf("window p95 inside %.0f s for good from %.0f s after the step (-1: never), want within %.0f s", target, back, within)
		}
		if first < 0 || first > within+1 {
			t.Errorf("first pause %.0f s after the step (-1: none), want within %.0f s", first, within+1)
		}
	}
	if !(mean["autotune"] <= 0.9*mean["best-effort"]) {
		t.Errorf("window p95 after the step %.1f s with autotune, %.1f s with no control: want at least 10%% lower", mean["autotune"], mean["best-effort"])
	}
}

// With every SLO slack, no pause at all: the chat service far inside its
// target before and after its step, the trainer is never paused. The
// control: the same service held to a target it misses beside the
// trainer is paused.
func TestNoPauseWithSlack(t *testing.T) {
	const tightTarget = "3s"
	pauses := func(target string) int {
		n := 0
		for _, d := range pauseRun(t, stepScenario(t, 0.5, target), "autotune").Decisions {
			if d.Knob == gpu.KnobPauseDuty && d.Applied {
				n++
			}
		}
		return n
	}
	res := pauseRun(t, stepScenario(t, 0.5, "60s"), "autotune")
	for _, d := range res.Decisions {
		if d.Knob == gpu.KnobPauseDuty {
			t.Errorf("pause decided with every SLO slack: %+v", d)
		}
	}
	sum := res.Recorder.Summary()
	judged := 0
	for _, ts := range sum.Tenants {
		if ts.SLOMet == nil {
			continue
		}
		judged++
		if !*ts.SLOMet {
			t.Errorf("%s missed its SLO: the scenario is not slack", ts.Tenant)
		}
	}
	if judged == 0 {
		t.Error("no tenant judged against an SLO: the run cannot show slack")
	}
	if n := pauses(tightTarget); n == 0 {
		t.Errorf("no pause with the chat held to p95 <= %s: the test cannot tell a pause from none", tightTarget)
	}
}

// On a vGPU host whose scheduler cannot change while the VMs run
// (vgpu-scheduler: best effort, chat's VM held to half the GPU), the
// pause holds chat's SLO by pausing the training VM through its process
// on the host, which autotune without it misses (chat about 10%).
func TestPauseVGPUHost(t *testing.T) {
	const scenario = "../scenarios/vgpu-scheduler.yaml"
	met := func(res *simrun.Result) (bool, float64) {
		t.Helper()
		for _, ts := range res.Recorder.Summary().Tenants {
			if ts.Tenant == "chat" && ts.SLOMet != nil && ts.Attainment != nil {
				return *ts.SLOMet, *ts.Attainment
			}
		}
		t.Fatal("chat not judged")
		return false, 0
	}
	without, err := simrun.Run(context.Background(), simrun.Config{Scenario: scenario, Policy: "autotune", Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ok, att := met(without); ok {
		t.Fatalf("chat met its SLO without the pause (%.1f%%): the test cannot tell", 100*att)
	}
	res := pauseRun(t, scenario, "autotune")
	if ok, att := met(res); !ok {
		t.Errorf("chat missed its SLO with the VM paused: %.1f%%", 100*att)
	}
	paused := 0
	for _, a := range res.Actions {
		if a.Kind == string(gpu.KnobPauseDuty) {
			paused++
			if a.Tenant != "train" {
				t.Errorf("paused %s, want only the training VM", a.Tenant)
			}
		}
	}
	if paused == 0 {
		t.Error("the simulator took no pause")
	}
}
