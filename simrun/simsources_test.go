package simrun_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// TestSimSourcesChecked: a tenants file whose sim:// latency source the
// scenario's simulator could never answer (a misspelt application, a
// histogram it does not serve, matchers no series meets) is refused at
// load, by the tenants file's line, instead of leaving the tuner blind to
// that tenant's latency; the sources it can read load, also when the
// tenants file is given to Run.
func TestSimSourcesChecked(t *testing.T) {
	b, err := scenarios.Find("noisy-neighbour")
	if err != nil {
		t.Fatal(err)
	}
	const source = `latency_source: {url: "sim://chat", preset: vllm-e2e}`
	for _, tc := range []struct {
		name, source, want string // want "" when it loads
	}{
		{"as shipped", source, ""},
		{"matching the served model", `latency_source: {url: "sim://chat", preset: vllm-e2e, matchers: {model_name: llama-3.1-8b-instruct}}`, ""},
		{"the histogram by name", `latency_source: {url: "sim://chat", metric: vllm:e2e_request_latency_seconds}`, ""},
		{"a misspelt application", `latency_source: {url: "sim://chta", preset: vllm-e2e}`, `noisy-neighbour.tenants.yaml:10: tenant "chat": latency_source sim://chta: sim: no tenant named "chta"`},
		{"an application of no tenant", `latency_source: {url: "sim://embed-2", preset: vllm-e2e}`, `:10: tenant "chat": latency_source sim://embed-2`},
		{"a preset the simulator does not serve", `latency_source: {url: "sim://chat", preset: sglang-e2e}`, `:10: tenant "chat": latency_source sim://chat: no histogram [sglang:e2e_request_latency_seconds]`},
		{"triton", `latency_source: {url: "sim://chat", preset: triton}`, `:10: tenant "chat": latency_source sim://chat: no nv_inference_request_success`},
		{"matchers of another model", `latency_source: {url: "sim://chat", preset: vllm-e2e, matchers: {model_name: llama}}`, `:10: tenant "chat": latency_source sim://chat: vllm:e2e_request_latency_seconds has no series matching`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scenario, tp, data := copyBuiltin(t, b)
			if !strings.Contains(string(data), source) {
				t.Fatalf("%s lacks %s", tp, source)
			}
			if err := os.WriteFile(tp, []byte(strings.Replace(string(data), source, tc.source, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := simrun.LoadScenario(scenario)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			// The same file given to Run (vgpusim run --tenants) beside the built-in.
			_, err = simrun.Run(context.Background(), simrun.Config{Scenario: "noisy-neighbour", Tenants: tp, Policy: "none", Duration: 2 * time.Second, Step: time.Second})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want[strings.Index(tc.want, ":10:"):])):
				t.Fatalf("Run: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
