package latency

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// TestCheckSim: a sim:// source that could never be read is named with
// why, one that can is not, and a source of another scheme is not read.
func TestCheckSim(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}
	src := func(url, preset, metric string, matchers map[string]string) *Source {
		return &Source{URL: url, Preset: preset, Metric: metric, Matchers: matchers, Timeout: time.Second, MaxBytes: 1 << 20}
	}
	for _, tc := range []struct {
		name string
		src  *Source
		want string // "" when it reads
	}{
		{"the preset read", src("sim://chat", PresetVLLME2E, "", map[string]string{"model_name": "llama"}), ""},
		{"without matchers", src("sim://chat", PresetVLLME2E, "", nil), ""},
		{"a metric instead of a preset", src("sim://chat", "", "vllm:e2e_request_latency_seconds", nil), ""},
		{"an http source is not read", src("http://127.0.0.1:1/metrics", PresetVLLME2E, "", nil), ""},
		{"an application not served", src("sim://chta", PresetVLLME2E, "", nil), "sim://chta: "},
		{"a histogram not served", src("sim://chat", PresetSGLangE2E, "", nil), "sim://chat: no histogram [sglang:e2e_request_latency_seconds]"},
		{"matchers no series meets", src("sim://chat", PresetVLLME2E, "", map[string]string{"model_name": "mistral"}), "sim://chat: vllm:e2e_request_latency_seconds has no series matching"},
		{"triton's counters not served", src("sim://chat", PresetTriton, "", nil), "sim://chat: no nv_inference_request_success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSim(tc.src, app)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
