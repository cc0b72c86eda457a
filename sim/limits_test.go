package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// TestScenarioLimits: a scenario over one of the limits on its size
// (docs/simulator.md, Limits) is refused at load, the error naming the
// file, the line and the field. Each of these loaded before and took the
// machine's memory or ran for hours (or made a time out of int64's range).
func TestScenarioLimits(t *testing.T) {
	dir := t.TempDir()
	// two requests at one instant: a replay that loops in no time
	sameInstant := filepath.Join(dir, "same.csv")
	// two requests 100ns apart: at speedup 1e4 their loop takes 0.02ns
	fast := filepath.Join(dir, "fast.csv")
	// a request of 1e11 prompt tokens: its reads ran the tenant's
	// bandwidth share to 3608x the GPU's (9e18 overflowed the KV sums)
	tokens := filepath.Join(dir, "tokens.csv")
	for path, rows := range map[string]string{
		sameInstant: "2023-11-16 18:15:46.6805900,100,10\n2023-11-16 18:15:46.6805900,100,10\n",
		fast:        "2023-11-16 18:15:46.6805900,100,10\n2023-11-16 18:15:46.6805901,100,10\n",
		tokens:      "2023-11-16 18:15:46,10000000,10000000\n2023-11-16 18:15:47,99999999999,10\n",
	} {
		if err := os.WriteFile(path, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"+rows), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const dnn = "type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}"
	scenario := func(top, gpus, tenants string) string {
		return "name: x\n" + top + "gpus:\n" + gpus + "tenants:\n" + tenants
	}
	oneGPU := "  - {model: H100-SXM5-80GB}\n"
	tenant := func(extra, workload string) string {
		return "  - {name: a, " + extra + "workload: {" + workload + "}}\n"
	}
	for _, c := range []struct {
		name, src, want string
	}{
		{"gpus", scenario("", strings.Repeat(oneGPU, maxGPUs+1), tenant("", dnn)),
			"x.yaml:67: a scenario has at most 64 GPUs (one host), this one 65"},
		{"tenants", func() string {
			var b strings.Builder
			for i := range maxTenants + 1 {
				fmt.Fprintf(&b, "  - {name: t%d, workload: {%s}}\n", i, dnn)
			}
			return scenario("", oneGPU, b.String())
		}(), "x.yaml:1029: a scenario has at most 1024 tenants, this one 1025"},
		{"max_queue total", scenario("", oneGPU,
			"  - {name: a, workload: {"+dnn+", max_queue: 6000000}}\n  - {name: b, workload: {"+dnn+", max_queue: 6000000}}\n"),
			"x.yaml:6: the tenants' max_queue add up to 12000000 by tenant b, over the 10485760 waiting requests a scenario may hold (the default is 10000 a tenant)"},
		{"memory", scenario("", oneGPU, tenant("memory: 2000TB, ", dnn)), "x.yaml:5: memory must be at most 1e+15 bytes"},
		{"default memory", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, kv_bytes_per_token: 1GB, context_tokens: 10000000, max_batch: 4096, arrival: {process: poisson, rate: 1}")),
			"x.yaml:5: tenant a's default memory (weights and a KV cache for max_batch sequences of context_tokens + generated_tokens) is 4.096052e+19 bytes, over 1e+15: give memory"},
		{"default memory of training", scenario("", oneGPU, tenant("", "type: training, flops: 1e9, bytes: 1e15")),
			"x.yaml:5: tenant a's default memory (weights_bytes, bytes and 1 GiB of context) is 1.000001e+15 bytes, over 1e+15: give memory"},
		{"weights_bytes", scenario("", oneGPU, tenant("", dnn+", weights_bytes: 2000000000000000")), "x.yaml:5: weights_bytes must be in [0, 1e+15]"},
		{"kv_bytes_per_token", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, kv_bytes_per_token: 9000000000000000000, arrival: {process: poisson, rate: 1}")),
			"x.yaml:5: kv_bytes_per_token must be in [0, 1e+09]"},
		{"duration", scenario("duration: 100000h\n", oneGPU, tenant("", dnn)), "x.yaml:2: duration must be in [0, 168h0m0s], got 100000h0m0s"},
		{"min_job_time", scenario("", oneGPU, tenant("", dnn+", min_job_time: 106751d")), "x.yaml:5: min_job_time must be in [0, 168h0m0s]"},
		{"timeout", scenario("", oneGPU, tenant("", dnn+", timeout: 8d")), "x.yaml:5: timeout must be in [0, 168h0m0s]"},
		{"checkpoint_interval", scenario("", oneGPU, tenant("", "type: training, flops: 1e9, checkpoint_interval: 8d")), "x.yaml:5: checkpoint_interval must be in"},
		{"iteration_overhead", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, iteration_overhead: 8d, arrival: {process: poisson, rate: 1}")), "x.yaml:5: iteration_overhead must be in"},
		{"sequence_overhead", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, sequence_overhead: 106751d, arrival: {process: poisson, rate: 1}")), "x.yaml:5: sequence_overhead must be in"},
		{"calm_mean", scenario("", oneGPU, tenant("", "type: dnn, flops: 1e9, arrival: {process: bursty, rate: 1, burst_rate: 5, burst_mean: 1s, calm_mean: 106751d}")), "x.yaml:5: calm_mean must be in"},
		{"burst_rate", scenario("", oneGPU, tenant("", "type: dnn, flops: 1e9, arrival: {process: bursty, rate: 0, burst_rate: 1e-9, burst_mean: 1ms, calm_mean: 1ms}")),
			"x.yaml:5: bursty arrivals need burst_rate of at least 0.001"},
		{"mig_drain_time", scenario("", "  - {model: H100-SXM5-80GB, mig_drain_time: 8d}\n", tenant("", dnn)), "x.yaml:3: mig_drain_time must be in"},
		{"mps restart_time", scenario("", "  - {model: H100-SXM5-80GB, sharing: mps, mps: {restart_time: 8d}}\n", tenant("", dnn)), "x.yaml:3: restart_time must be in"},
		{"migration_time", scenario("control: {migration_time: 8d}\n", oneGPU, tenant("", dnn)), "x.yaml:2: migration_time must be in"},
		{"drain_timeout", scenario("control: {drain_timeout: 8d}\n", oneGPU, tenant("", dnn)), "x.yaml:2: drain_timeout must be in"},
		{"load_bandwidth", scenario("control: {load_bandwidth: 1}\n", oneGPU, tenant("", dnn)), "x.yaml:2: load_bandwidth must be at least 1e+06 bytes a second"},
		{"checkpoint_bandwidth", scenario("control: {checkpoint_bandwidth: 1KB}\n", oneGPU, tenant("", dnn)), "x.yaml:2: checkpoint_bandwidth must be at least 1e+06 bytes a second"},
		{"trace at one instant", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, arrival: {process: trace, file: "+sameInstant+"}")),
			"x.yaml:5: trace " + sameInstant + " replays 2 requests in 0s: +Inf a second at speedup 1, over the limit of 1e+06"},
		{"trace sped up", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, arrival: {process: trace, file: "+fast+", speedup: 1e4}")),
			"x.yaml:5: trace " + fast + " replays 2 requests in 200ns: 1e+11 a second at speedup 10000, over the limit of 1e+06"},
		{"trace slowed down", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, arrival: {process: trace, file: "+fast+", speedup: 1e-20}")),
			"x.yaml:5: trace " + fast + " spans 200ns: at arrival.speedup 1e-20 a loop takes 2e+13 s, over the limit of 4.61e+09 s"},
		{"shipped trace slowed down", scenario("", oneGPU, tenant("", "type: llm, params: 8e9,\n      arrival: {process: trace, file: testdata/azure-llm-2023-conv-300.csv,\n        speedup: 1e-300}")),
			"x.yaml:7: trace testdata/azure-llm-2023-conv-300.csv spans"},
		{"trace token counts", scenario("", oneGPU, tenant("", "type: llm, params: 8e9, arrival: {process: trace, file: "+tokens+"}")),
			"x.yaml:5: " + tokens + ":3: token counts 99999999999, 10: at most 10000000 each"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestTraceReadOnce: tenants replaying one trace file share one copy,
// read once (a trace of 4 million requests read per tenant took 200 MB
// and 3.5 s a tenant); a scenario's traces together hold at most
// maxTraceRows requests.
func TestTraceReadOnce(t *testing.T) {
	const src = `name: tr
gpus: [{model: H200-SXM5-141GB}]
tenants:
  - {name: a, workload: {type: llm, params: 1e9, arrival: {process: trace, file: testdata/azure-llm-2023-conv-300.csv}}}
  - {name: b, workload: {type: llm, params: 1e9, arrival: {process: trace, file: ./testdata/../testdata/azure-llm-2023-conv-300.csv, speedup: 2}}}
`
	sc := mustParse(t, src)
	if sc.Tenants[0].trace == nil || sc.Tenants[0].trace != sc.Tenants[1].trace {
		t.Fatal("the two tenants' traces are two copies")
	}
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	for i := range 4 {
		fmt.Fprintf(&b, "2023-11-16 18:15:4%d,1,1\n", i)
	}
	if _, err := parseTrace("t.csv", strings.NewReader(b.String()), 3); err == nil || !strings.Contains(err.Error(), "t.csv:5: more than") {
		t.Fatalf("a fourth request past a budget of 3: %v", err)
	}
	if tr, err := parseTrace("t.csv", strings.NewReader(b.String()), 4); err != nil || len(tr.offsets) != 4 {
		t.Fatalf("four requests in a budget of 4: %v", err)
	}
}

// TestExtremeValuesRun: values the limits allow whose arithmetic left
// int64's range run in bounded time with sane figures: a Poisson rate of
// 1e-300 drew a time between arrivals in the past and arrived forever (a
// hang), a sm_fraction of 1e-300 made a job's time negative (negative
// latencies, shares and energy).
func TestExtremeValuesRun(t *testing.T) {
	for _, c := range []struct{ name, workload string }{
		{"tiny rate", "type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1e-300}"},
		{"tiny sm_fraction", "type: dnn, flops: 1e9, sm_fraction: 1e-300, arrival: {process: poisson, rate: 100}"},
		{"tiny calm rate", "type: dnn, flops: 1e9, arrival: {process: bursty, rate: 1e-300, burst_rate: 0.001, burst_mean: 1ms, calm_mean: 1ms}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, sharing := range []string{"time-slice", "mps"} {
				sc := mustParse(t, fmt.Sprintf(`name: x
gpus: [{model: H100-SXM5-80GB, sharing: %s}]
tenants:
  - {name: a, workload: {%s}}
  - {name: b, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 100}}}
`, sharing, c.workload))
				s := mustNew(t, sc, Options{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					s.AdvanceTo(s.Now().Add(3 * time.Second))
				}()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatalf("%s: 3 s of model time not done in 20 s", sharing)
				}
				w := s.Window()
				for _, tw := range w.Tenants {
					if tw.SMShare < 0 || tw.BWShare < 0 || tw.Work < 0 {
						t.Errorf("%s: tenant %s: negative figures %+v", sharing, tw.Tenant, tw)
					}
					for _, l := range tw.Latencies {
						if l < 0 {
							t.Fatalf("%s: tenant %s: negative latency %v", sharing, tw.Tenant, l)
						}
					}
				}
				for _, gw := range w.GPUs {
					if gw.PowerW < 0 || gw.SMActive < 0 {
						t.Errorf("%s: negative GPU figures %+v", sharing, gw)
					}
				}
				s.Close()
			}
		})
	}
}

// TestLoadScenarioFS: a scenario of a file system (an embedded library)
// reads the traces it names there, relative to its own directory, and
// nothing from the operating system's files; errors and the scenario's
// File name the files as they are in the file system.
func TestLoadScenarioFS(t *testing.T) {
	trace, err := os.ReadFile("testdata/azure-llm-2023-conv-300.csv")
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(file string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(`name: s
gpus: [{model: H200-SXM5-141GB}]
tenants:
  - name: a
    workload: {type: llm, params: 1e9, arrival: {process: trace, file: ` + file + `}}
`)}
	}
	// a trace on disk at an absolute path, which the scenario must not read
	abs := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(abs, trace, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := fstest.MapFS{
		"lib/s.yaml":       scenario("t.csv"),
		"lib/t.csv":        {Data: trace},
		"t.csv":            {Data: []byte("not a trace\n")}, // beside the top, not the scenario
		"lib/escape.yaml":  scenario("../../t.csv"),
		"lib/abs.yaml":     scenario(abs),
		"lib/dir.yaml":     scenario("sub"),
		"lib/sub/x.csv":    {Data: trace},
		"lib/missing.yaml": scenario("gone.csv"),
	}
	sc, err := LoadScenarioFS(lib, "lib/s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.File != "lib/s.yaml" || sc.Tenants[0].trace == nil || len(sc.Tenants[0].trace.offsets) != 300 {
		t.Errorf("scenario file %q, trace %+v", sc.File, sc.Tenants[0].trace)
	}
	for name, want := range map[string]string{
		"lib/escape.yaml":  "lib/escape.yaml:5: open ../t.csv:",
		"lib/abs.yaml":     "lib/abs.yaml:5: open " + abs + ":",
		"lib/dir.yaml":     "lib/dir.yaml:5: lib/sub is a directory",
		"lib/missing.yaml": "lib/missing.yaml:5: open lib/gone.csv: file does not exist",
		"lib/absent.yaml":  "open lib/absent.yaml: file does not exist",
	} {
		if _, err := LoadScenarioFS(lib, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
}

// A trace file with nothing in it (or blank lines only) says it is empty,
// not "reading header: EOF"; a header without the columns names them.
func TestTraceEmptyOrHeaderless(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"", "t.csv: empty: a trace begins with a header naming TIMESTAMP"},
		{"\n\n", "t.csv: empty: a trace begins with a header naming TIMESTAMP"},
		{"a,b\n1,2\n", "t.csv:1: header must name TIMESTAMP, ContextTokens and GeneratedTokens"},
	} {
		if _, err := parseTrace("t.csv", strings.NewReader(c.data), 4); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.data, err, c.want)
		}
	}
}
