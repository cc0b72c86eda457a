package tenant

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

func TestLoadConfigExamples(t *testing.T) {
	for _, f := range []string{"tenants-k8s.yaml", "tenants-vgpu.yaml", "tenants-mps.yaml"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := LoadConfig(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Tenants) == 0 {
				t.Fatal("no tenants")
			}
		})
	}
}

func TestParseConfigFields(t *testing.T) {
	cfg, err := LoadConfig("testdata/tenants-k8s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != "testdata/tenants-k8s.yaml" || len(cfg.Tenants) != 3 {
		t.Fatalf("file %q tenants %d", cfg.File, len(cfg.Tenants))
	}
	chat := cfg.TenantByName("chat")
	if chat == nil || chat.Class != gpu.ClassLatency || chat.Priority != 10 || chat.Line != 3 {
		t.Fatalf("chat = %+v", chat)
	}
	if len(chat.Selectors) != 2 || chat.Selectors[0].Kubernetes.Namespace != "llm" || chat.Selectors[0].Kubernetes.Pod != "chat-*" ||
		chat.Selectors[0].Kubernetes.Container != "server" || chat.Selectors[1].Kubernetes.Labels["app"] != "chat" {
		t.Errorf("selectors %+v", chat.Selectors)
	}
	if s := chat.SLO; s == nil || s.Quantile != 0.99 || s.Target != 250*time.Millisecond || s.MinThroughput != 5 || s.Window != 5*time.Minute {
		t.Errorf("slo %+v", chat.SLO)
	}
	if s := chat.Share; s == nil || s.Min != 0.2 || s.Max != 0.8 {
		t.Errorf("share %+v", chat.Share)
	}
	l := chat.LatencySource
	if l == nil || l.URL != "http://10.0.0.5:8000/metrics" || l.Preset != latency.PresetVLLME2E || l.Matchers["model_name"] != "llama" || l.Timeout != 2*time.Second || l.MaxBytes != 4<<20 {
		t.Errorf("latency source %+v", l)
	}
	if train := cfg.TenantByName("train"); train.Class != gpu.ClassBatch || train.SLO != nil || train.LatencySource != nil || train.RestartCost != 5*time.Minute || chat.RestartCost != 0 {
		t.Errorf("train %+v", train)
	}
	if cfg.Defaults.SLOWindow != 5*time.Minute || cfg.Defaults.ScrapeInterval != 15*time.Second {
		t.Errorf("defaults %+v", cfg.Defaults)
	}
}

func TestParseConfigEmpty(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "tenants: []\n", "tenants:\n", "tenants: []\n---\n# end\n"} {
		cfg, err := ParseConfig("t.yaml", []byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if len(cfg.Tenants) != 0 || cfg.Defaults.SLOWindow != DefaultSLOWindow {
			t.Errorf("%q: %+v", in, cfg)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	const head = "tenants:\n  - name: a\n    selectors: [{executable: x}]\n"
	const source = "    latency_source: {url: \"sim://a\", preset: tgi}\n"
	tests := []struct {
		name, in string
		want     string // "file:line: ..." substring
	}{
		{"unknown top key", "tenant: []\n", "t.yaml:1: unknown key \"tenant\""},
		{"unknown tenant key", head + "    clas: batch\n", "t.yaml:4: unknown key \"clas\""},
		{"unknown selector key", "tenants:\n  - name: a\n    selectors:\n      - exe: x\n", "t.yaml:4: unknown key \"exe\""},
		{"bad duration", head + "    slo: {quantile: 0.9, target: 25xs}\n    latency_source: {url: \"sim://a\", preset: tgi}\n", "t.yaml:4: slo.target: bad duration \"25xs\""},
		{"bad default duration", "defaults:\n  slo_window: five\n", "t.yaml:2: defaults.slo_window: bad duration"},
		{"quantile 1", head + "    slo: {quantile: 1, target: 1s}\n    latency_source: {url: \"sim://a\", preset: tgi}\n", "t.yaml:4: slo.quantile 1 is outside (0,1)"},
		{"quantile 0", head + "    slo: {quantile: 0, target: 1s}\n    latency_source: {url: \"sim://a\", preset: tgi}\n", "t.yaml:4: slo.quantile 0 is outside (0,1)"},
		{"target zero", head + "    slo: {quantile: 0.5, target: 0s}\n    latency_source: {url: \"sim://a\", preset: tgi}\n", "t.yaml:4: slo.target must be > 0"},
		{"target negative", head + "    slo: {quantile: 0.5, target: -1s}\n    latency_source: {url: \"sim://a\", preset: tgi}\n", "t.yaml:4: slo.target must be > 0"},
		{"min > max", head + "    share: {min: 0.9, max: 0.2}\n", "t.yaml:4: share.min 0.9 is greater than share.max 0.2"},
		{"restart cost negative", head + "    restart_cost: -5m\n", "t.yaml:4: restart_cost -5m0s is outside [0, 24h0m0s]"},
		{"restart cost absurd", head + "    class: batch\n    restart_cost: 100h\n", "t.yaml:5: restart_cost 100h0m0s is outside"},
		{"restart cost bad", head + "    restart_cost: soon\n", "t.yaml:4: restart_cost: bad duration \"soon\""},
		{"share outside", head + "    share: {min: 0.1, max: 1.5}\n", "t.yaml:4: share.max 1.5 is outside [0,1]"},
		{"duplicate names", head + "  - name: a\n    selectors: [{executable: y}]\n", "t.yaml:4: duplicate tenant name \"a\" (first defined at line 2)"},
		{"empty selector", "tenants:\n  - name: a\n    selectors:\n      - {}\n", "t.yaml:4: a selector has no keys"},
		{"empty kubernetes", "tenants:\n  - name: a\n    selectors:\n      - kubernetes: {}\n", "t.yaml:4: kubernetes selector has no keys"},
		{"no selectors", "tenants:\n  - name: a\n", "t.yaml:2: tenant \"a\" has no selectors"},
		// a key given empty would match any namespace, pod or container
		{"empty namespace", "tenants:\n  - name: a\n    selectors:\n      - kubernetes:\n          namespace: \"\"\n          pod: chat-0\n", "t.yaml:5: kubernetes.namespace is empty"},
		{"empty container", "tenants:\n  - name: a\n    selectors: [{kubernetes: {namespace: llm, container: \"\"}}]\n", "t.yaml:3: kubernetes.container is empty"},
		{"empty pod_uid", "tenants:\n  - name: a\n    selectors: [{kubernetes: {pod_uid: \"\"}}]\n", "t.yaml:3: kubernetes.pod_uid is empty"},
		{"namespace of capitals", "tenants:\n  - name: a\n    selectors: [{kubernetes: {namespace: LLM}}]\n", "t.yaml:3: kubernetes.namespace \"LLM\" is not a Kubernetes namespace"},
		{"pod_uid not a uid", "tenants:\n  - name: a\n    selectors: [{kubernetes: {pod_uid: chat-0}}]\n", "t.yaml:3: kubernetes.pod_uid \"chat-0\" is not a pod UID"},
		{"empty label key", "tenants:\n  - name: a\n    selectors: [{kubernetes: {labels: {\"\": x}}}]\n", "t.yaml:3: kubernetes.labels: a label key is empty"},
		// the executable is matched by its name alone, never by its path
		{"executable path", "tenants:\n  - name: a\n    selectors:\n      - executable: /usr/bin/python3\n", "t.yaml:4: executable \"/usr/bin/python3\" holds a '/': it is matched against the executable's name without its directory (\"python3\")"},
		{"executable glob path", "tenants:\n  - name: a\n    selectors: [{executable: \"*/vllm\"}]\n", "t.yaml:3: executable \"*/vllm\" holds a '/'"},
		{"mig_uuid of a GPU", "tenants:\n  - name: a\n    selectors: [{mig_uuid: GPU-1}]\n", "t.yaml:3: mig_uuid \"GPU-1\" is not a MIG instance's UUID"},
		{"no name", "tenants:\n  - selectors: [{uid: 1}]\n", "t.yaml:2: tenant has no name"},
		{"name not the first key", "tenants:\n  - class: batch\n    name: \"bad name!\"\n    selectors: [{uid: 1}]\n", "t.yaml:3: tenant name \"bad name!\": use letters"},
		{"duplicate name not the first key", head + "  - selectors: [{uid: 1}]\n    name: a\n", "t.yaml:5: duplicate tenant name \"a\" (first defined at line 2)"},
		{"reserved name", "tenants:\n  - name: unassigned\n    selectors: [{uid: 1}]\n", "t.yaml:2: tenant name \"unassigned\" is reserved"},
		// a tenant's name is the MPS restart hook's first argument
		{"name an option", "tenants:\n  - name: -rf\n    selectors: [{uid: 1}]\n", "t.yaml:2: tenant name \"-rf\" begins with '-'"},
		// a class is read at each character it is tried on: one of 1 MiB
		// cost 0.26 s per pod name and sample
		{"long class", "tenants:\n  - name: a\n    selectors:\n      - executable: \"x[" + strings.Repeat("b", maxClassBytes+1) + "]\"\n", "t.yaml:4: executable: a class ([...]) of 257 bytes; at most 256"},
		{"long class in a pod glob", "tenants:\n  - name: a\n    selectors:\n      - kubernetes:\n          namespace: n\n          pod: \"*[" + strings.Repeat("b", 1<<20) + "]\"\n", "t.yaml:6: pod: a class ([...]) of 1048576 bytes; at most 256"},
		{"long class in a vm glob", "tenants:\n  - name: a\n    selectors: [{vgpu: {vm_name: \"[!" + strings.Repeat("b", maxClassBytes) + "]\"}}]\n", "t.yaml:3: vm_name: a class ([...]) of 257 bytes; at most 256"},
		// a name is a label of every series of the tenant: one of 1 MiB made
		// each scrape 8 MiB per GPU
		{"long name", "tenants:\n  - name: " + strings.Repeat("a", 1<<20) + "\n    selectors: [{uid: 1}]\n", "t.yaml:2: tenant name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 1048576 characters long; at most 253"},
		{"longest name", "tenants:\n  - name: " + strings.Repeat("a", 254) + "\n    selectors: [{uid: 1}]\n", "t.yaml:2: tenant name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"... is 254 characters long; at most 253"},
		{"bad class", head + "    class: realtime\n", "t.yaml:4: class \"realtime\" is not one of"},
		{"identical selectors", head + "  - name: b\n    selectors: [{executable: x}]\n", "t.yaml:5: selector of tenant \"b\" overlaps the selector of tenant \"a\" at line 3"},
		{"narrower selector overlaps", head + "  - name: b\n    selectors:\n      - {executable: x, uid: 7}\n", "t.yaml:6: selector of tenant \"b\" overlaps"},
		{"glob covers literal", "tenants:\n  - name: a\n    selectors: [{kubernetes: {namespace: llm, pod: \"chat-*\"}}]\n  - name: b\n    selectors: [{kubernetes: {namespace: llm, pod: chat-0}}]\n", "t.yaml:5: selector of tenant \"b\" overlaps"},
		{"same pod_uid in two cases", "tenants:\n  - name: a\n    selectors: [{kubernetes: {pod_uid: 0C8D2F6E-71B5-4A9D-8E3F-2A6B9C4D1E57}}]\n  - name: b\n    selectors: [{kubernetes: {pod_uid: 0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57}}]\n", "t.yaml:5: selector of tenant \"b\" overlaps"},
		{"same mig", "tenants:\n  - name: a\n    selectors: [{mig_uuid: MIG-1}]\n  - name: b\n    selectors: [{mig_uuid: MIG-1}]\n", "t.yaml:5: selector of tenant \"b\" overlaps"},
		// A problem of two values is at the line of the key it names first;
		// a value the tenant does not set is named with where it is set.
		{"slo without source", head + "    slo:\n      quantile: 0.9\n      target: 1s\n", "t.yaml:4: tenant \"a\" has an slo but no latency_source"},
		{"target longer than window", head + "    slo:\n      quantile: 0.9\n      target: 10m\n" + source,
			"t.yaml:6: tenant \"a\": slo.target 10m0s is not shorter than the SLO window 5m0s (the default); it cannot be observed"},
		{"target longer than its window", head + "    slo:\n      quantile: 0.9\n      target: 1m\n      window: 30s\n" + source,
			"t.yaml:6: tenant \"a\": slo.target 1m0s is not shorter than the SLO window 30s (slo.window)"},
		{"target longer than the defaults' window", "defaults:\n  slo_window: 1m\n" + head + "    slo:\n      quantile: 0.9\n      target: 2m\n" + source,
			"t.yaml:8: tenant \"a\": slo.target 2m0s is not shorter than the SLO window 1m0s (defaults.slo_window at line 2)"},
		{"window below two scrapes", head + "    slo:\n      quantile: 0.9\n      target: 1s\n      window: 20s\n" + source,
			"t.yaml:7: tenant \"a\": SLO window 20s (slo.window) holds fewer than two scrapes at scrape_interval 15s (the default)"},
		{"defaults' window below two scrapes", "defaults:\n  scrape_interval: 15s\n  slo_window: 20s\n" + head + "    slo:\n      quantile: 0.9\n      target: 1s\n" + source,
			"t.yaml:3: tenant \"a\": SLO window 20s (defaults.slo_window at line 3) holds fewer than two scrapes at scrape_interval 15s (defaults.scrape_interval at line 2)"},
		{"default window below two scrapes", "defaults:\n  scrape_interval: 3m\n" + head + "    slo:\n      quantile: 0.9\n      target: 1s\n" + source,
			"t.yaml:6: tenant \"a\": SLO window 5m0s (the default) holds fewer than two scrapes at scrape_interval 3m0s (defaults.scrape_interval at line 2)"},
		{"throughput too low for quantile", head + "    slo:\n      quantile: 0.999\n      target: 1s\n      min_throughput: 0.1\n" + source,
			"t.yaml:7: tenant \"a\": slo.min_throughput 0.1 req/s gives 30 requests per 5m0s window (the default), fewer than the 1000 a 0.999 quantile needs"},
		{"min negative", head + "    share: {min: -0.1}\n", "t.yaml:4: share.min -0.1 is outside [0,1]"},
		{"min not a number", head + "    share: {min: half}\n", "t.yaml:4: share.min must be a number, got \"half\""},
		{"max above one", head + "    share: {max: 1.01}\n", "t.yaml:4: share.max 1.01 is outside [0,1]"},
		{"bad url", head + "    latency_source: {url: \"ftp://x/metrics\", preset: tgi}\n", "t.yaml:4: latency_source.url \"ftp://x/metrics\": scheme must be"},
		{"bad preset", head + "    latency_source: {url: \"http://x/metrics\", preset: vllm}\n", "t.yaml:4: unknown latency_source.preset \"vllm\" (known: vllm-e2e, vllm-ttft, vllm-itl, sglang-e2e, sglang-ttft, sglang-itl, triton, tgi)"},
		{"no preset nor metric", head + "    latency_source: {url: \"http://x/metrics\"}\n", "t.yaml:4: latency_source needs a preset or a metric"},
		{"bad size", head + "    latency_source: {url: \"http://x/metrics\", preset: tgi, max_bytes: lots}\n", "t.yaml:4: latency_source.max_bytes: bad size \"lots\""},
		{"bad uid", "tenants:\n  - name: a\n    selectors: [{uid: root}]\n", "t.yaml:3: uid must be an integer"},
		{"quoted uid", "tenants:\n  - name: a\n    selectors: [{uid: \"01750\"}]\n", `t.yaml:3: uid must be an integer, got the string "01750": write the number without quotes`},
		{"uid with a leading 0", "tenants:\n  - name: a\n    selectors: [{uid: 01750}]\n", "t.yaml:3: uid: 01750 has a leading 0, which is ambiguous"},
		{"hexadecimal gpu_instance id", "tenants:\n  - name: a\n    selectors: [{gpu_instance: {gpu: 0, id: 0x10}}]\n", `t.yaml:3: gpu_instance.id must be a decimal integer, got "0x10"`},
		{"priority grouped by _", head + "    priority: 1_000\n", `t.yaml:4: priority must be a decimal integer, got "1_000"`},
		{"priority out of range", head + "    priority: 99999999999\n", "t.yaml:4: priority: 99999999999 is out of range, where an integer from -2147483648 to 2147483647 is wanted"},
		{"gpu_instance half", "tenants:\n  - name: a\n    selectors: [{gpu_instance: {gpu: 0}}]\n", "t.yaml:3: gpu_instance needs both gpu and id"},
		{"yaml syntax", "tenants:\n  - name: a\n   bad: [\n", "t.yaml:"},
		{"YAML 1.2 directive", "%YAML 1.2\n---\ntenants: []\n",
			"t.yaml:1: found incompatible YAML document (%YAML 1.2): only YAML 1.1 directives (%YAML 1.1) are read; the %YAML line can be deleted"},
		{"tenants not list", "tenants: {a: 1}\n", "t.yaml:1: tenants must be a list"},
		{"two documents", "tenants: []\n---\ntenants: []\n", "t.yaml:2: only one YAML document"},
		{"tenant after document end", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n...\n  - name: b\n    selectors: [{uid: 2}]\n",
			"t.yaml:5: only one YAML document is allowed: this line follows the document end (\"...\") above, and would be ignored"},
		{"document after document end", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n...\ntenants: []\n", "t.yaml:5: only one YAML document is allowed: this line follows"},
		{"garbage after document end", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n...\ngarbage: [\n", "t.yaml:5: only one YAML document is allowed: this line follows"},
		{"timeout not below interval", head + "    slo: {quantile: 0.9, target: 1s}\n    latency_source:\n      url: \"sim://a\"\n      preset: tgi\n      timeout: 20s\n",
			"t.yaml:8: tenant \"a\": latency_source.timeout 20s must be shorter than scrape_interval 15s (the default)"},
		{"default timeout not below interval", "defaults:\n  scrape_interval: 2s\n" + head + "    slo: {quantile: 0.9, target: 1s, window: 1m}\n    latency_source:\n      url: \"sim://a\"\n      preset: tgi\n",
			"t.yaml:7: tenant \"a\": latency_source.timeout 2s (the default) must be shorter than scrape_interval 2s (defaults.scrape_interval at line 2)"},
		{"min > max, max first", head + "    share:\n      max: 0.2\n      min: 0.9\n", "t.yaml:6: share.min 0.9 is greater than share.max 0.2"},
		{"triton with a metric", head + "    latency_source:\n      url: \"sim://a\"\n      preset: triton\n      metric: m_seconds\n",
			"t.yaml:7: latency_source.metric \"m_seconds\": preset triton reads fixed counters; drop metric or the preset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("t.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n%.2000v\nwant it to contain %q", err, tc.want)
			}
			if n := len(err.Error()); n > 4096 {
				t.Errorf("error of %d bytes", n)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "t.yaml:") || strings.Count(line, ":") < 2 {
					t.Errorf("error line %q is not file:line: problem", line)
				}
			}
		})
	}
}

// TestParseConfigEmptyKubernetesKey says that a key is empty, not also
// that the selector has no keys.
func TestParseConfigEmptyKubernetesKey(t *testing.T) {
	_, err := ParseConfig("t.yaml", []byte("tenants:\n  - name: a\n    selectors: [{kubernetes: {namespace: \"\"}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "kubernetes.namespace is empty") || strings.Contains(err.Error(), "no keys") {
		t.Fatalf("got %v; want only that kubernetes.namespace is empty", err)
	}
}

// TestParseConfigPresets accepts every preset the latency package knows.
func TestParseConfigPresets(t *testing.T) {
	for _, preset := range latency.Presets {
		t.Run(preset, func(t *testing.T) {
			in := "tenants:\n  - name: a\n    selectors: [{executable: x}]\n    slo: {quantile: 0.9, target: 1s}\n    latency_source: {url: \"http://127.0.0.1:30000/metrics\", preset: " + preset + "}\n"
			c, err := ParseConfig("t.yaml", []byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Tenants[0].LatencySource.Preset; got != preset {
				t.Fatalf("preset %q, want %q", got, preset)
			}
		})
	}
}

func TestParseConfigLongestName(t *testing.T) {
	name := strings.Repeat("a", maxNameLen)
	if _, err := ParseConfig("t.yaml", []byte("tenants:\n  - {name: "+name+", selectors: [{uid: 1}]}\n")); err != nil {
		t.Fatal(err)
	}
}

func TestParseConfigAllErrorsListed(t *testing.T) {
	in := "tenants:\n  - name: a\n    clas: x\n    selectors: [{exe: y}]\n"
	_, err := ParseConfig("t.yaml", []byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "t.yaml:3:") || !strings.HasPrefix(lines[1], "t.yaml:4:") {
		t.Fatalf("want one error per problem, got\n%v", err)
	}
}

func TestParseConfigNoFalseOverlap(t *testing.T) {
	in := `tenants:
  - name: a
    selectors: [{executable: vllm}, {uid: 1000}]
  - name: b
    selectors: [{executable: python}, {uid: 1001}, {kubernetes: {namespace: llm, pod: "chat-*"}}]
  - name: c
    selectors: [{kubernetes: {namespace: llm, pod: "search-*"}}, {mig_uuid: MIG-2}, {gpu_instance: {gpu: 0, id: 1}}]
  - name: d
    selectors: [{kubernetes: {labels: {gpu: ""}}}]
  - name: e
    selectors: [{kubernetes: {labels: {team: x}}}]
`
	if _, err := ParseConfig("t.yaml", []byte(in)); err != nil {
		t.Fatal(err)
	}
}

// TestParseConfigShares checks the share bounds the parser accepts. The
// tenants' share.min values are not summed across the file: a minimum is a
// guarantee on the GPU (or MIG instance) the tenant runs on, and which
// tenants share a GPU is known only at attribution time (Builder.Build
// checks the sum there).
func TestParseConfigShares(t *testing.T) {
	tenantsWithMin := func(n int, min string) string {
		var b strings.Builder
		b.WriteString("tenants:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - name: t%d\n    selectors: [{uid: %d}]\n    share: {min: %s}\n", i, i, min)
		}
		return b.String()
	}
	tests := []struct {
		name     string
		in       string
		min, max map[string]float64 // by tenant
	}{
		{"defaults", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    share: {}\n",
			map[string]float64{"a": 0}, map[string]float64{"a": 1}},
		{"bounds kept", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    share: {min: 0.25, max: 0.5}\n",
			map[string]float64{"a": 0.25}, map[string]float64{"a": 0.5}},
		{"min equal max", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    share: {min: 1, max: 1}\n",
			map[string]float64{"a": 1}, map[string]float64{"a": 1}},
		// Formerly rejected ("share.min add up to 1.2 > 1"): a and b may run
		// on different GPUs, where each guarantee can be met.
		{"mins above one across the file", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    share: {min: 0.6}\n  - name: b\n    selectors: [{uid: 3}]\n    share: {min: 0.6}\n",
			map[string]float64{"a": 0.6, "b": 0.6}, map[string]float64{"a": 1, "b": 1}},
		// 32 tenants over 8 GPUs, four per GPU: 6.4 in all, 0.8 per GPU.
		{"32 tenants with min 0.2", tenantsWithMin(32, "0.2"),
			map[string]float64{"t0": 0.2, "t31": 0.2}, map[string]float64{"t0": 1, "t31": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("t.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.min {
				tn := cfg.TenantByName(name)
				if tn == nil || tn.Share == nil {
					t.Fatalf("tenant %q: no share in %+v", name, cfg.Tenants)
				}
				if tn.Share.Min != want || tn.Share.Max != tc.max[name] {
					t.Errorf("tenant %q share %+v, want min %v max %v", name, *tn.Share, want, tc.max[name])
				}
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.yaml")
	_, err := LoadConfig(path)
	if err == nil || !os.IsNotExist(unwrapAll(err)) || strings.Count(err.Error(), path) != 1 {
		t.Fatalf("err = %v, want a not-exist error naming %s once", err, path)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// TestParseConfigBounded: files that repeat themselves through YAML
// aliases, or list many overlapping tenants, are rejected quickly with a
// bounded list of problems, each naming its line.
func TestParseConfigBounded(t *testing.T) {
	aliasSel := "[&s {executable: x}" + strings.Repeat(", *s", 59) + "]"
	aliasBomb := "tenants:\n  - &t {name: a, selectors: " + aliasSel + "}\n" + strings.Repeat("  - *t\n", 59)
	var overlapping strings.Builder
	overlapping.WriteString("tenants:\n")
	for i := range 200 {
		fmt.Fprintf(&overlapping, "  - {name: t%d, selectors: [{executable: x}]}\n", i)
	}
	manyTenants := "tenants:\n" + strings.Repeat("  - {name: a, selectors: [{uid: 1}]}\n", maxTenants+1)
	manyBroken := "tenants: [" + strings.Repeat("0, ", maxTenants+1) + "]\n"
	tests := []struct {
		name, in, want string
	}{
		{"alias bomb", aliasBomb, "alias references"},
		{"overlaps", overlapping.String(), "further problems from here on not listed"},
		{"too many tenants", manyTenants, fmt.Sprintf("t.yaml:2: %d tenants; at most %d", maxTenants+1, maxTenants)},
		// a list of tenants that each fail to decode is bounded alike (it
		// was not, and its overlap check grew with the square of its length)
		{"too many broken tenants", manyBroken, fmt.Sprintf("t.yaml:1: %d tenants; at most %d", maxTenants+1, maxTenants)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("t.yaml", []byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) > maxErrors+1 {
				t.Errorf("%d error lines, want at most %d", len(lines), maxErrors+1)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q:\n%s", tc.want, strings.Join(lines[:min(5, len(lines))], "\n"))
			}
			for _, l := range lines {
				if !strings.HasPrefix(l, "t.yaml:") {
					t.Errorf("error line %q does not name the file and line", l)
				}
			}
		})
	}
}

// TestParseConfigAliasedNodesBounded: a few aliases (within the budget
// of references) to a big subtree, here 300 tenants' pod labels each the
// same map of 2000, are refused at the alias past 100,000 repeated nodes,
// alone: nothing of the file is decoded. (Every alias was decoded:
// 600,000 labels from a file of 40 KB, 142 MB allocated, and the file
// taken.)
func TestParseConfigAliasedNodesBounded(t *testing.T) {
	var labels []string
	for i := range 2000 {
		labels = append(labels, fmt.Sprintf("k%d: v", i))
	}
	var b strings.Builder
	b.WriteString("tenants:\n  - {name: t0, selectors: [{kubernetes: {namespace: n0, labels: &l {" + strings.Join(labels, ", ") + "}}}]}\n")
	for i := 1; i < 300; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, selectors: [{kubernetes: {namespace: n%d, labels: *l}}]}\n", i, i)
	}
	_, err := ParseConfig("t.yaml", []byte(b.String()))
	// the alias at which the nodes pass the bound: 4001 each (the map,
	// and each label's key and value), past it at the 25th
	want := "t.yaml:27: alias references (*l) repeat more than 100000 nodes"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("ParseConfig: %.300v, want %q alone", err, want)
	}
}

// TestLatencySourceSLOMetric: the metric an SLO bounds is read from the
// histogram its source reads, by preset or by the metric's name as vLLM
// and SGLang name them.
func TestLatencySourceSLOMetric(t *testing.T) {
	for _, tc := range []struct {
		src  *LatencySource
		want string
	}{
		{nil, ""},
		{&LatencySource{Preset: "vllm-e2e"}, ""},
		{&LatencySource{Preset: "triton"}, ""},
		{&LatencySource{Preset: "vllm-ttft"}, "ttft"},
		{&LatencySource{Preset: "sglang-ttft"}, "ttft"},
		{&LatencySource{Preset: "vllm-itl"}, "itl"},
		{&LatencySource{Preset: "sglang-itl"}, "itl"},
		{&LatencySource{Metric: "vllm:e2e_request_latency_seconds"}, ""},
		{&LatencySource{Metric: "vllm:time_to_first_token_seconds"}, "ttft"},
		{&LatencySource{Metric: "vllm:inter_token_latency_seconds"}, "itl"},
		{&LatencySource{Metric: "vllm:time_per_output_token_seconds"}, "itl"},
		{&LatencySource{Metric: "sglang:inter_token_latency_seconds"}, "itl"},
		{&LatencySource{Metric: "sglang:time_per_output_token_seconds"}, "itl"},
		// a metric named beside a preset is what is read
		{&LatencySource{Preset: "vllm-e2e", Metric: "vllm:inter_token_latency_seconds"}, "itl"},
	} {
		if got := tc.src.SLOMetric(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.src, got, tc.want)
		}
		// and the snapshot's SLO status carries it
		if got := sloStatus(&Tenant{Name: "chat", LatencySource: tc.src}, latency.Status{}); got.Metric != tc.want || got.Tenant != "chat" {
			t.Errorf("%+v: SLO status %+v, want metric %q", tc.src, got, tc.want)
		}
	}
}

// The snapshot's SLO status carries the SLO's min_throughput, and is below
// that floor with requests slower than it over the window (not when idle).
func TestSLOStatusFloor(t *testing.T) {
	tn := &Tenant{Name: "web", SLO: &SLO{Quantile: 0.9, Target: 50 * time.Millisecond, MinThroughput: 5}, LatencySource: &LatencySource{Preset: "vllm-e2e"}}
	for _, tc := range []struct {
		requests float64
		below    bool
	}{{0, false}, {30, true}, {149, true}, {150, false}} {
		s := sloStatus(tn, latency.Status{Window: 30 * time.Second, WindowRequests: tc.requests})
		if s.MinThroughput != 5 || s.BelowFloor() != tc.below {
			t.Errorf("%v requests in 30s: min_throughput %v, below %v, want 5, %v", tc.requests, s.MinThroughput, s.BelowFloor(), tc.below)
		}
	}
}

// TestParseConfigListsEveryProblem: one pass lists every problem of the
// file, a tenant's whole-file ones beside those of its fields, and no
// problem that only follows from one listed: a value that failed is not
// also missing, nor read as its default.
func TestParseConfigListsEveryProblem(t *testing.T) {
	const source = "    latency_source: {url: \"sim://a\", preset: tgi}\n"
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name, in string
		want     []string // one problem a line, in order, each a prefix
	}{
		// a tenant's name repeated
		{"a duplicate without selectors", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n  - name: a\n    clas: latency\n", []string{
			`t.yaml:5: unknown key "clas" in a tenant`,
			`t.yaml:4: duplicate tenant name "a" (first defined at line 2)`,
			`t.yaml:4: tenant "a" has no selectors`}},
		{"a duplicate with an slo but no source", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n  - name: a\n    selectors: [{uid: 2}]\n    priority: high\n    slo: {quantile: 0.9, target: 1s}\n", []string{
			`t.yaml:6: priority must be an integer, got "high"`,
			`t.yaml:4: duplicate tenant name "a" (first defined at line 2)`,
			`t.yaml:7: tenant "a" has an slo but no latency_source`}},
		// a tenant or a selector repeated through a YAML alias: at the alias
		{"a tenant repeated through an alias", "tenants:\n  - &a\n    name: a\n    selectors: [{uid: 1}]\n  - {name: b, clas: x, selectors: [{uid: 2}]}\n  - *a\n", []string{
			`t.yaml:5: unknown key "clas" in a tenant`,
			`t.yaml:6: duplicate tenant name "a" (first defined at line 3)`,
			`t.yaml:6: selector of tenant "a" overlaps the selector of tenant "a" at line 4`}},
		{"a selector repeated through an alias", "tenants:\n  - name: a\n    selectors:\n      - &s {uid: 1}\n  - name: b\n    selectors:\n      - {uid: 2}\n      - *s\n", []string{
			`t.yaml:8: selector of tenant "b" overlaps the selector of tenant "a" at line 4`}},
		{"long names that differ are no duplicates", "tenants:\n  - {name: " + long(254) + ", selectors: [{uid: 1}]}\n  - {name: " + long(255) + ", selectors: [{uid: 2}]}\n", []string{
			`t.yaml:2: tenant name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 254 characters long`,
			`t.yaml:3: tenant name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 255 characters long`}},
		// a problem elsewhere in the file hides none of a tenant's
		{"the last tenant before a bad default", "tenants:\n  - name: a\ndefaults:\n  slo_window: five\n", []string{
			`t.yaml:4: defaults.slo_window: bad duration "five"`,
			`t.yaml:2: tenant "a" has no selectors`}},
		{"the last tenant before a syntax error", "tenants:\n  - name: a\ndefaults:\n  slo_window: [5m\n", []string{
			`t.yaml:4: did not find expected ',' or ']'`,
			`t.yaml:2: tenant "a" has no selectors`}},
		// what only follows from a problem listed is not listed
		{"selectors that failed are not missing", "tenants:\n  - name: a\n    selectors: {uid: 1}\n", []string{
			`t.yaml:3: selectors must be a list`}},
		{"selectors cut by a syntax error are not missing", "tenants:\n  - name: a\n    class: latency\n\t  selectors:\n      - executable: vllm\n", []string{
			`t.yaml:4: found a tab character`}},
		{"a name that failed is not missing", "tenants:\n  - name: [a]\n    selectors: [{uid: 1}]\n", []string{
			`t.yaml:2: name must be a string`}},
		{"no tenant at all", "tenants: [0]\n", []string{
			`t.yaml:1: a tenant must be a mapping`}},
		{"a window that failed is not the default", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    slo: {quantile: 0.9, target: 10m, window: soon}\n" + source, []string{
			`t.yaml:4: slo.window: bad duration "soon"`}},
		{"a window that is not positive", "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    slo: {quantile: 0.9, target: 1s, window: -1m}\n" + source, []string{
			`t.yaml:4: slo.window must be positive`}},
		{"a scrape interval that failed", "defaults:\n  scrape_interval: soon\ntenants:\n  - name: a\n    selectors: [{uid: 1}]\n    slo: {quantile: 0.9, target: 1s}\n    latency_source: {url: \"sim://a\", preset: tgi, timeout: 20s}\n", []string{
			`t.yaml:2: defaults.scrape_interval: bad duration "soon"`}},
		{"a timeout that failed", "defaults:\n  scrape_interval: 1s\ntenants:\n  - name: a\n    selectors: [{uid: 1}]\n    slo: {quantile: 0.9, target: 1s}\n    latency_source: {url: \"sim://a\", preset: tgi, timeout: soon}\n", []string{
			`t.yaml:7: latency_source.timeout: bad duration "soon"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("t.yaml", []byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", err, strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d: got %q, want %q", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestLabelKeyChecked: a kubernetes selector's label key is checked as
// --tenants.kubernetes-default's is: a name of at most 63 characters,
// after an optional DNS prefix of at most 253; a key no pod can have is
// refused, the problem naming the file, the line and the tenant (an
// alias's repeat at the alias).
func TestLabelKeyChecked(t *testing.T) {
	file := func(key string) string {
		return "tenants:\n  - name: a\n    selectors:\n      - kubernetes:\n          labels: {" + strconv.Quote(key) + ": x}\n"
	}
	name63, prefix253 := strings.Repeat("n", 63), strings.Repeat("p", 253)
	for _, tc := range []struct {
		name, in string
		want     []string // the problems' starts, one a line; none: accepted
	}{
		{"a name", file("app"), nil},
		{"a prefix and a name", file("app.kubernetes.io/part-of"), nil},
		{"a name of 63", file(name63), nil},
		{"a prefix of 253", file(prefix253 + "/" + name63), nil},
		{"a name of 64", file(name63 + "n"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "` + name63 + `n" (64 bytes)`}},
		{"a prefix of 254", file(prefix253 + "p/app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "` + prefix253[:64] + `"... (258 bytes)`}},
		{"a space", file("my app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "my app" (6 bytes) is not a Kubernetes label key`}},
		{"two slashes", file("a/b/c"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "a/b/c"`}},
		{"an upper-case prefix", file("Example.com/app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "Example.com/app"`}},
		{"two dots in the prefix", file("example..com/app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "example..com/app"`}},
		{"a prefix's label that ends with '-'", file("example-.com/app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "example-.com/app"`}},
		{"a name that begins with '-'", file("-app"), []string{`t.yaml:5: tenant "a": kubernetes.labels key "-app"`}},
		{"a selector repeated through an alias", "tenants:\n  - name: a\n    selectors:\n      - &s {kubernetes: {labels: {" + name63 + "nn: x}}}\n  - name: b\n    selectors:\n      - *s\n", []string{`t.yaml:4: tenant "a": kubernetes.labels key`, `t.yaml:7: tenant "b": kubernetes.labels key`, `t.yaml:7: selector of tenant "b" overlaps the selector of tenant "a" at line 4`}},
	} {
		_, err := ParseConfig("t.yaml", []byte(tc.in))
		if (err != nil) != (len(tc.want) > 0) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			continue
		}
		if err == nil {
			continue
		}
		got := strings.Split(err.Error(), "\n")
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%s: problem %d %q, want %q", tc.name, i+1, got[i], tc.want[i])
			}
		}
	}
}

// TestLatencySourceURLSecretsNotInErrors: the tenants file's errors about
// a latency_source url name it as everywhere else, its password and query
// values masked, also where url.Parse refuses it (its error quotes the
// whole URL, and may quote a piece of a password holding '/').
func TestLatencySourceURLSecretsNotInErrors(t *testing.T) {
	const head = "tenants:\n  - name: a\n    selectors: [{executable: x}]\n    latency_source: {preset: tgi, url: "
	tests := []struct{ name, url, want string }{
		{"scheme", `"ftp://u:hunter2@h/metrics?token=s3cr3t"`, `t.yaml:4: latency_source.url "ftp://u:xxxxx@h/metrics?token=xxxxx": scheme must be http, https or sim`},
		{"no host", `"http:///metrics?token=s3cr3t"`, `t.yaml:4: latency_source.url "http:///metrics?token=xxxxx" has no host`},
		{"unparsed", `"http://u:hun/ter2@h/metrics"`, `t.yaml:4: latency_source.url "http://u:xxxxx@h/metrics": invalid port "xxxxx" after host`},
		{"opaque", `"http:u:hunter2@h/metrics"`, `t.yaml:4: latency_source.url "http:u:xxxxx@h/metrics" has no host`},
		{"password holding '?'", `"http://u:hunter2?rest@h:8000/metrics"`, `t.yaml:4: latency_source.url "http://u:xxxxx@h:8000/metrics": invalid port`},
	}
	for _, tc := range tests {
		_, err := ParseConfig("t.yaml", []byte(head+tc.url+"}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") ||
			strings.Contains(err.Error(), "hun/") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error %v; want %q, no secret", tc.name, err, tc.want)
		}
	}
}

// TestLatencySourceURLRefusedAtCheck: a latency_source url that url.Parse
// takes but no scrape can use, a port out of range or a query with a bad
// %-escape, is refused by the check naming the line, where it passed and
// failed at every scrape; a good one passes.
func TestLatencySourceURLRefusedAtCheck(t *testing.T) {
	const head = "tenants:\n  - name: a\n    selectors: [{executable: x}]\n    latency_source: {preset: tgi, url: "
	for _, tc := range []struct{ name, url, want string }{
		{"port too big", `"http://h:99999/metrics"`, `t.yaml:4: latency_source.url "http://h:99999/metrics": port 99999 is not in 1-65535`},
		{"port 0", `"https://h:0/metrics"`, `t.yaml:4: latency_source.url "https://h:0/metrics": port 0 is not in 1-65535`},
		{"bad escape", `"http://h:8000/metrics?token=ab%zz"`, `t.yaml:4: latency_source.url "http://h:8000/metrics?token=xxxxx": its query holds a % not followed by two hex digits`},
		{"good", `"http://h:8000/metrics?token=ab%20c"`, ""},
		{"no port", `"http://h/metrics"`, ""},
	} {
		_, err := ParseConfig("t.yaml", []byte(head+tc.url+"}\n"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "zz"):
			t.Errorf("%s: the error quotes the query's escape: %v", tc.name, err)
		}
	}
}
