package simrun_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// TestJudgedAttributionChecked: a tenants file that names a judged tenant
// and gives it the judged SLO, but whose selectors attribute that
// tenant's process elsewhere (to another tenant, to none), attribute
// another tenant's process to it, or whose sim:// source reads another
// tenant's application, is refused at load and when given to Run, by
// the tenant and what its selectors matched: the run would score the
// tuner on the tenant's SLO while the tuner attached it to other work. A
// tenant stopped at the start (diurnal-shift's chat-west) is attributed
// as it will be once started.
func TestJudgedAttributionChecked(t *testing.T) {
	const (
		chatPod  = `"/kubepods.slice/*pod5b1e7c42_0a9d_4c3e_9f16_2d8b4a7e6c01*"`
		embedPod = `"/kubepods.slice/*pod9c4d2e81_6b7f_4a05_8e3d_1f0a5c9b7d02*"`
		chatSrc  = `latency_source: {url: "sim://chat", preset: vllm-e2e}`
		westPod  = `"/kubepods.slice/*pod1d2e3f40_5a6b_4c7d_8e9f_0a1b2c3d4e02*"`
	)
	for _, tc := range []struct {
		name, builtin string
		edit          func(string) string
		want          string // "" when it loads
	}{
		{"as shipped", "noisy-neighbour", func(s string) string { return s }, ""},
		{"selectors swapped", "noisy-neighbour", func(s string) string {
			return strings.NewReplacer(chatPod, embedPod, embedPod, chatPod).Replace(s)
		}, "tenant chat: its process (PID 61001) is attributed to tenant embed; the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match embed's (PID 61002) process"},
		{"chat matching no pod", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, chatPod, `"/kubepods.slice/*nosuchpod*"`, 1)
		}, "tenant chat: its process (PID 61001) is attributed to no tenant (unassigned); the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match no process of the scenario"},
		{"chat holding embed's pod too", "noisy-neighbour", func(s string) string {
			return strings.NewReplacer(chatPod, `"/kubepods.slice/*pod*"`, embedPod, `"/kubepods.slice/*nosuchpod*"`).Replace(s)
		}, "tenant chat: the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match embed's (PID 61002) process as well as its own"},
		{"chat reading embed's latency", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, chatSrc, `latency_source: {url: "sim://embed", preset: vllm-e2e}`, 1)
		}, "tenant chat: noisy-neighbour.tenants.yaml:10 reads its latency from sim://embed, another tenant's application: a tenant the scenario judges must read its own (sim://chat)"},
		{"a tenant stopped at the start matching no pod", "diurnal-shift", func(s string) string {
			return strings.Replace(s, westPod, `"/kubepods.slice/*nosuchpod*"`, 1)
		}, "tenant chat-west: its process (PID 62002) is attributed to no tenant (unassigned)"},
		{"a tenant stopped at the start", "diurnal-shift", func(s string) string { return s }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := scenarios.Find(tc.builtin)
			if err != nil {
				t.Fatal(err)
			}
			scenario, tp, data := copyBuiltin(t, b)
			edited := tc.edit(string(data))
			if tc.want != "" && edited == string(data) {
				t.Fatalf("%s: the edit changed nothing", tp)
			}
			if err := os.WriteFile(tp, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "noisy-neighbour.tenants.yaml", tp)
			_, _, err = simrun.LoadScenario(scenario)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want one containing %q", err, want)
			}
			// The same file given to Run (vgpusim run --tenants) beside the built-in.
			err = simrun.Config{Scenario: tc.builtin, Tenants: tp, Policy: "none", Duration: 2 * time.Second, Step: time.Second}.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "--tenants: ") || !strings.Contains(err.Error(), want)):
				t.Fatalf("Run: error %v, want one containing %q", err, want)
			}
		})
	}
}
