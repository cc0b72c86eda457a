package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

const scenarioDir = "../scenarios"

func mustLoad(t testing.TB, path string) *Scenario {
	t.Helper()
	sc, err := LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func mustParse(t testing.TB, src string) *Scenario {
	t.Helper()
	sc, err := ParseScenario("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func mustNew(t testing.TB, sc *Scenario, opts Options) *Simulator {
	t.Helper()
	s, err := New(sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShippedScenarios: each shipped scenario parses, its tenants file names
// the same tenants, and every process shows SM activity.
func TestShippedScenarios(t *testing.T) {
	for _, name := range []string{"h200-mig", "h100-timeslice"} {
		t.Run(name, func(t *testing.T) {
			sc := mustLoad(t, filepath.Join(scenarioDir, name+".yaml"))
			s := mustNew(t, sc, Options{})
			ctx := context.Background()
			if _, err := s.Sample(ctx); err != nil {
				t.Fatal(err)
			}
			s.AdvanceTo(s.Now().Add(20 * time.Second))
			r, err := s.Sample(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Interval != 20*time.Second {
				t.Errorf("interval %v, want 20s", r.Interval)
			}
			procs := 0
			for _, d := range r.Devices {
				for _, p := range d.Processes {
					procs++
					if p.Cgroup == "" || p.PID == 0 {
						t.Errorf("process %+v lacks identity", p)
					}
					if d.MIGEnabled {
						if p.SMUtil != nil {
							t.Errorf("PID %d: per-process utilization on a MIG GPU", p.PID)
						}
						mi := d.MIGByGI(p.GPUInstanceID)
						if mi == nil || mi.Activity.SMActive == nil || *mi.Activity.SMActive <= 0 {
							t.Errorf("PID %d: no SM activity in its MIG instance", p.PID)
						}
						continue
					}
					if p.SMUtil == nil || *p.SMUtil <= 0 {
						t.Errorf("PID %d: no SM activity", p.PID)
					}
				}
				if d.Activity.SMActive == nil || *d.Activity.SMActive <= 0 {
					t.Errorf("GPU %d: no SM activity", d.Index)
				}
			}
			if procs != len(sc.Tenants) {
				t.Errorf("%d processes, want %d", procs, len(sc.Tenants))
			}
			// the companion tenants file names the scenario's tenants
			data, err := os.ReadFile(filepath.Join(scenarioDir, name+".tenants.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var tf struct {
				Tenants []struct {
					Name          string `yaml:"name"`
					LatencySource *struct {
						URL string `yaml:"url"`
					} `yaml:"latency_source"`
				} `yaml:"tenants"`
			}
			if err := yaml.Unmarshal(data, &tf); err != nil {
				t.Fatal(err)
			}
			want := s.Tenants()
			if len(tf.Tenants) != len(want) {
				t.Fatalf("tenants file has %d tenants, scenario %d", len(tf.Tenants), len(want))
			}
			for i, tt := range tf.Tenants {
				if tt.Name != want[i] {
					t.Errorf("tenants file tenant %d is %q, scenario has %q", i, tt.Name, want[i])
				}
				if tt.LatencySource != nil {
					var buf bytes.Buffer
					app := strings.TrimPrefix(tt.LatencySource.URL, "sim://")
					if err := s.AppMetrics(app, &buf); err != nil {
						t.Errorf("latency source %s: %v", tt.LatencySource.URL, err)
					}
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	base := func(gpus, tenants string) string {
		return "name: x\ngpus:\n" + gpus + "tenants:\n" + tenants
	}
	okGPU := "  - model: H100-SXM5-80GB\n"
	okTenant := "  - name: a\n    workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}\n"
	cases := []struct {
		name, src, want string
	}{
		{"unknown top key", "name: x\nbogus: 1\n" + "gpus:\n" + okGPU, `test.yaml:2: unknown key "bogus"`},
		{"unknown nested key", base("  - model: H100-SXM5-80GB\n    shareing: mps\n", okTenant), `test.yaml:4: unknown key "shareing"`},
		{"bad model", base("  - model: A100\n", okTenant), "test.yaml:3: unknown GPU model"},
		{"bad profile", base("  - model: H200-SXM5-141GB\n    sharing: mig\n    mig:\n      - profile: 3g.40gb\n", okTenant), "test.yaml:6: unknown MIG profile \"3g.40gb\""},
		{"profiles do not fit", base("  - model: H200-SXM5-141GB\n    sharing: mig\n    mig:\n      - profile: 4g.71gb\n      - profile: 4g.71gb\n", okTenant), "test.yaml:5: MIG profile 4g.71gb fits at most 1"},
		{"compute slices exceeded", base("  - model: H100-SXM5-80GB\n    sharing: mig\n    mig:\n      - profile: 4g.40gb\n      - profile: 3g.40gb\n      - profile: 1g.10gb\n", okTenant), "test.yaml:5: MIG profiles"},
		{"tenant on missing GPU", base(okGPU, "  - name: a\n    gpu: 3\n    workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}\n"), "test.yaml:6: tenant a on GPU 3"},
		{"missing MIG instance", base("  - model: H200-SXM5-141GB\n    sharing: mig\n    mig: [{profile: 7g.141gb}]\n", "  - name: a\n    mig_instance: 2\n    workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}\n"), "test.yaml:8: tenant a on MIG instance 2"},
		{"bad sharing", base("  - model: H100-SXM5-80GB\n    sharing: share\n", okTenant), "test.yaml:4: unknown sharing mode"},
		{"bad workload type", base(okGPU, "  - name: a\n    workload:\n      type: video\n"), "test.yaml:7: unknown workload type"},
		{"bad duration", "name: x\nduration: soon\ngpus:\n" + okGPU, "test.yaml:2:"},
		{"bad byte size", base(okGPU, "  - name: a\n    memory: lots\n"+okTenant[11:]), "test.yaml:6: bad byte size"},
		{"duplicate tenant", base(okGPU, okTenant+okTenant), "test.yaml:7: duplicate tenant name"},
		{"event for unknown tenant", base(okGPU, okTenant) + "events:\n  - {at: 1s, tenant: b, rate: 2}\n", "test.yaml:8: event for unknown tenant"},
		{"no gpus", "name: x\n", "test.yaml:1: a scenario needs at least one GPU"},
		{"empty gpus at its key", "name: x\ndescription: y\ngpus: []\n", "test.yaml:3: a scenario needs at least one GPU"},
		{"fractional xid code", base(okGPU, okTenant) + "events:\n  - {at: 1s, action: xid, gpu: 0, code: 1.5}\n", "test.yaml:8: code: `1.5` has a fraction, where an integer is wanted"},
		{"fractional seed", "name: x\nseed: 2.5\ngpus:\n" + okGPU, "test.yaml:2: seed: `2.5` has a fraction"},
		{"max_queue 0", base(okGPU, "  - name: a\n    workload: {type: dnn, flops: 1e9, max_queue: 0, arrival: {process: poisson, rate: 1}}\n"), "test.yaml:6: max_queue must be positive, got 0 (leave it out for the default, 10000)"},
		{"timeout 0", base(okGPU, "  - name: a\n    workload:\n      type: dnn\n      flops: 1e9\n      timeout: 0s\n      arrival: {process: poisson, rate: 1}\n"), "test.yaml:9: timeout must be positive, got 0 (leave it out for the default, 1m0s;"},
		{"speedup 0", base(okGPU, "  - name: a\n    workload: {type: llm, params: 8e9, arrival: {process: trace, file: /nonexistent.csv, speedup: 0}}\n"), "test.yaml:6: speedup must be positive, got 0 (leave it out for the default, 1)"},
		{"default_active_threads 0", base("  - model: H100-SXM5-80GB\n    sharing: mps\n    mps:\n      default_active_threads: 0\n", okTenant), "test.yaml:6: default_active_threads must be in (0,1], got 0 (leave it out for the default, 1)"},
		{"fractional event gpu", base(okGPU, okTenant) + "events:\n  - {at: 1s, action: gpu-lost, gpu: 0.5}\n", "test.yaml:8: gpu: `0.5` has a fraction"},
		{"syntax", "name: [x\n", "test.yaml:"},
		{"bad slo", base(okGPU, "  - name: a\n    slo: {quantile: 99, target: 1s}\n"+okTenant[11:]), "test.yaml:6: slo quantile"},
		{"missing trace", base(okGPU, "  - name: a\n    workload: {type: llm, params: 8e9, arrival: {process: trace, file: /nonexistent.csv}}\n"), "test.yaml:6:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("test.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// runDump runs a scenario for d, sampling every second, and serializes the
// readings and the windows.
func runDump(t *testing.T, sc *Scenario, seed int64, d time.Duration) []byte {
	t.Helper()
	s := mustNew(t, sc, Options{Seed: seed})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	ctx := context.Background()
	start := s.Now()
	for i := time.Duration(0); i <= d; i += time.Second {
		s.AdvanceTo(start.Add(i))
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		if i%(5*time.Second) == 0 {
			if err := enc.Encode(s.Window()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, app := range s.Tenants() {
		if err := s.AppMetrics(app, &buf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestDeterminism(t *testing.T) {
	for _, name := range []string{"h200-mig", "h100-timeslice"} {
		t.Run(name, func(t *testing.T) {
			sc := mustLoad(t, filepath.Join(scenarioDir, name+".yaml"))
			a := runDump(t, sc, 0, 15*time.Second)
			b := runDump(t, sc, 0, 15*time.Second)
			if !bytes.Equal(a, b) {
				t.Fatal("same seed gave different outputs")
			}
			c := runDump(t, sc, 12345, 15*time.Second)
			if bytes.Equal(a, c) {
				t.Fatal("different seeds gave identical outputs")
			}
		})
	}
}

func TestAppMetrics(t *testing.T) {
	sc := mustLoad(t, filepath.Join(scenarioDir, "h200-mig.yaml"))
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(10 * time.Second))
	var buf bytes.Buffer
	if err := s.AppMetrics("chat", &buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"# TYPE vllm:e2e_request_latency_seconds histogram",
		`vllm:e2e_request_latency_seconds_bucket{model_name="llama-3.1-8b-instruct",le="+Inf"}`,
		`vllm:e2e_request_latency_seconds_bucket{model_name="llama-3.1-8b-instruct",le="9"}`, // the SLO target
		"# TYPE vllm:time_to_first_token_seconds histogram",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("AppMetrics output lacks %q", want)
		}
	}
	if !strings.Contains(out, "# TYPE vllm:inter_token_latency_seconds histogram") || !strings.Contains(out, "vllm:generation_tokens_total{") {
		t.Error("LLM tenant lacks the inter-token histogram or token counters")
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("AppMetrics output does not parse: %v", err)
	}
	e2e := fams["vllm:e2e_request_latency_seconds"]
	if e2e == nil || e2e.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
		t.Fatal("no e2e observations after 10 s")
	}
	buf.Reset()
	if err := s.AppMetrics("vision", &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "time_to_first_token") {
		t.Error("a DNN tenant serves a TTFT histogram")
	}
	if err := s.AppMetrics("nobody", &buf); err == nil {
		t.Error("unknown app: no error")
	}
}

// TestTenantStreamsIndependent: each tenant draws from its own stream, so
// adding a tenant elsewhere leaves another's requests and latencies
// unchanged.
func TestTenantStreamsIndependent(t *testing.T) {
	a := "  - {name: a, gpu: 0, memory: 8GiB, workload: {type: llm, params: 1e9, arrival: {process: poisson, rate: 20}}}\n"
	z := "  - {name: z, gpu: 1, memory: 8GiB, workload: {type: dnn, flops: 1e11, arrival: {process: poisson, rate: 50}}}\n"
	head := "name: s\ngpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}, {model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]\ntenants:\n"
	lat := func(src string) []time.Duration {
		s := mustNew(t, mustParse(t, src), Options{})
		s.AdvanceTo(s.Now().Add(10 * time.Second))
		for _, tw := range s.Window().Tenants {
			if tw.Tenant == "a" {
				return tw.Latencies
			}
		}
		return nil
	}
	alone, with := lat(head+a), lat(head+a+z)
	if len(alone) == 0 || fmt.Sprint(alone) != fmt.Sprint(with) {
		t.Fatalf("tenant a's latencies changed when z was added (%d vs %d requests)", len(alone), len(with))
	}
}
