package simrun_test

import (
	"os"
	"path/filepath"
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
// as it will be once started. A process of a judged tenant's pod that the
// scenario judges no SLO of (a sidecar) is one of its clients, as
// production attributes it: it loads; a judged one is refused.
func TestJudgedAttributionChecked(t *testing.T) {
	const (
		chatPod   = `"/kubepods.slice/*pod5b1e7c42_0a9d_4c3e_9f16_2d8b4a7e6c01*"`
		embedPod  = `"/kubepods.slice/*pod9c4d2e81_6b7f_4a05_8e3d_1f0a5c9b7d02*"`
		chatSrc   = `latency_source: {url: "sim://chat", preset: vllm-e2e}`
		westPod   = `"/kubepods.slice/*pod1d2e3f40_5a6b_4c7d_8e9f_0a1b2c3d4e02*"`
		tokenizer = `  - name: chat-tokenizer
    gpu: 0
    process: {pid: 61003, uid: 1000, executable: tokenizer, pod_uid: 5b1e7c42-0a9d-4c3e-9f16-2d8b4a7e6c01, qos: guaranteed}
    memory: 1GiB
    workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}
`
		judged = "    slo: {quantile: 0.9, target: 1s}\n"
	)
	// sidecar adds chat-tokenizer to noisy-neighbour, in chat's pod, with
	// the lines extra.
	sidecar := func(extra string) func(string) string {
		return func(s string) string { return strings.Replace(s, "events:\n", tokenizer+extra+"events:\n", 1) }
	}
	// tokenizerTenant adds a tenant chat-tokenizer to the tenants file,
	// matched by sel.
	tokenizerTenant := func(sel string) string {
		return "  - name: chat-tokenizer\n    class: latency\n    selectors: [" + sel + "]\n    slo: {quantile: 0.9, target: 1s}\n" +
			`    latency_source: {url: "sim://chat-tokenizer", preset: vllm-e2e}` + "\n"
	}
	for _, tc := range []struct {
		name, builtin string
		edit          func(string) string
		scEdit        func(string) string // the scenario's edit; nil: none
		want          string              // "" when it loads
	}{
		{"as shipped", "noisy-neighbour", func(s string) string { return s }, nil, ""},
		{"selectors swapped", "noisy-neighbour", func(s string) string {
			return strings.NewReplacer(chatPod, embedPod, embedPod, chatPod).Replace(s)
		}, nil, "tenant chat: its process (PID 61001) is attributed to tenant embed; the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match embed's (PID 61002) process"},
		{"chat matching no pod", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, chatPod, `"/kubepods.slice/*nosuchpod*"`, 1)
		}, nil, "tenant chat: its process (PID 61001) is attributed to no tenant (unassigned); the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match no process of the scenario"},
		{"chat holding embed's pod too", "noisy-neighbour", func(s string) string {
			return strings.NewReplacer(chatPod, `"/kubepods.slice/*pod*"`, embedPod, `"/kubepods.slice/*nosuchpod*"`).Replace(s)
		}, nil, "tenant chat: the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match embed's (PID 61002) process as well as its own"},
		{"chat reading embed's latency", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, chatSrc, `latency_source: {url: "sim://embed", preset: vllm-e2e}`, 1)
		}, nil, "tenant chat: noisy-neighbour.tenants.yaml:10 reads its latency from sim://embed, another tenant's application: a tenant the scenario judges must read its own (sim://chat)"},
		{"a tenant stopped at the start matching no pod", "diurnal-shift", func(s string) string {
			return strings.Replace(s, westPod, `"/kubepods.slice/*nosuchpod*"`, 1)
		}, nil, "tenant chat-west: its process (PID 62002) is attributed to no tenant (unassigned)"},
		{"a tenant stopped at the start", "diurnal-shift", func(s string) string { return s }, nil, ""},
		{"a sidecar in chat's pod", "noisy-neighbour", func(s string) string { return s }, sidecar(""), ""},
		{"a judged process in chat's pod, its tenant matching none", "noisy-neighbour", func(s string) string {
			return s + tokenizerTenant(`{cgroup: "/kubepods.slice/*nosuchpod*"}`)
		}, sidecar(judged), "tenant chat: the selectors of tenant chat (noisy-neighbour.tenants.yaml:3) match chat-tokenizer's (PID 61003) process as well as its own"},
		{"two judged tenants in one pod, told apart by executable", "noisy-neighbour", func(s string) string {
			return strings.Replace(s, "      - cgroup: "+chatPod+"\n", "      - cgroup: "+chatPod+"\n        executable: vllm\n", 1) +
				tokenizerTenant("{cgroup: "+chatPod+", executable: tokenizer}")
		}, sidecar(judged), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := scenarios.Find(tc.builtin)
			if err != nil {
				t.Fatal(err)
			}
			scenario, tp, data := copyBuiltin(t, b)
			edited := tc.edit(string(data))
			run := tc.builtin
			if tc.scEdit != nil {
				b, err := os.ReadFile(scenario)
				if err != nil {
					t.Fatal(err)
				}
				sc := tc.scEdit(string(b))
				if sc == string(b) {
					t.Fatalf("%s: the edit changed nothing", scenario)
				}
				// (and beside it with no tenants file of its own, for Run)
				run = filepath.Join(filepath.Dir(scenario), "edited.yaml")
				for _, p := range []string{scenario, run} {
					if err := os.WriteFile(p, []byte(sc), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.want != "" && tc.scEdit == nil && edited == string(data) {
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
			// The same file given to Run (vgpusim run --tenants) beside the
			// built-in (or the edited scenario).
			err = simrun.Config{Scenario: run, Tenants: tp, Policy: "none", Duration: 2 * time.Second, Step: time.Second}.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "--tenants: ") || !strings.Contains(err.Error(), want)):
				t.Fatalf("Run: error %v, want one containing %q", err, want)
			}
		})
	}
}
