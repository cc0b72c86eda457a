package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostScenario builds 8 GPUs (two each time-sliced, MPS, MIG and vGPU)
// with 4 tenants each: 32 tenants mixing classic inference, LLM serving
// and training.
func hostScenario() string {
	var b strings.Builder
	b.WriteString("name: host8\nseed: 7\ngpus:\n")
	modes := []string{"time-slice", "mps", "mig", "vgpu"}
	for i := 0; i < 8; i++ {
		mode := modes[i/2]
		if mode == "mig" {
			fmt.Fprintf(&b, "  - model: H100-SXM5-80GB\n    sharing: mig\n    mig: [{profile: 2g.20gb}, {profile: 2g.20gb}, {profile: 2g.20gb}, {profile: 1g.10gb}]\n")
			continue
		}
		fmt.Fprintf(&b, "  - model: H200-SXM5-141GB\n    sharing: %s\n", mode)
	}
	b.WriteString("tenants:\n")
	for i := 0; i < 32; i++ {
		g := i / 4
		fmt.Fprintf(&b, "  - name: t%02d\n    gpu: %d\n", i, g)
		if modes[g/2] == "mig" {
			fmt.Fprintf(&b, "    mig_instance: %d\n", i%4)
		}
		if modes[g/2] == "mps" {
			b.WriteString("    mps_active_threads: 0.25\n")
		}
		b.WriteString("    memory: 8GiB\n    slo: {quantile: 0.99, target: 100ms}\n")
		switch i % 4 {
		case 0:
			b.WriteString("    workload: {type: llm, params: 1e9, context_tokens: 256, generated_tokens: 64, max_batch: 16, arrival: {process: poisson, rate: 5}}\n")
		case 1:
			b.WriteString("    workload: {type: dnn, flops: 4e9, bytes: 5e7, max_batch: 8, min_job_time: 500us, arrival: {process: bursty, rate: 50, burst_rate: 400, burst_mean: 2s, calm_mean: 20s}}\n")
		case 2:
			b.WriteString("    workload: {type: dnn, flops: 1e10, bytes: 1e8, max_batch: 4, arrival: {process: poisson, rate: 100}}\n")
		case 3:
			b.WriteString("    workload: {type: training, flops: 5e12, bytes: 2e10}\n")
		}
	}
	return b.String()
}

// BenchmarkHour8GPU32Tenants runs one simulated hour of an 8-GPU host with
// 32 tenants, sampling every second as the exporter does; x-real-time is
// simulated time over the time it took (1000 is an hour in 3.6 s).
func BenchmarkHour8GPU32Tenants(b *testing.B) {
	sc, err := ParseScenario("host8.yaml", []byte(hostScenario()))
	if err != nil {
		b.Fatal(err)
	}
	benchSampled(b, sc, 3600, 60)
	b.ReportMetric(float64(b.N)*float64(time.Hour)/float64(b.Elapsed()), "x-real-time")
}

func TestHostScenarioRuns(t *testing.T) {
	sc, err := ParseScenario("host8.yaml", []byte(hostScenario()))
	if err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(10 * time.Second))
	for _, tw := range s.Window().Tenants {
		if tw.Completed == 0 {
			t.Errorf("tenant %s completed nothing in 10 s", tw.Tenant)
		}
	}
}

// BenchmarkEightGPUHotMPS runs 120 simulated seconds of the eight-gpu-hot
// scenario with every client capped at a quarter of the SMs (as
// static-equal sets them), sampled every second, without attribution,
// policy or recording: the MPS engine's cost, whose instruction count
// (valgrind --tool=callgrind, GODEBUG=asyncpreemptoff=1) compares builds
// on a busy machine.
func BenchmarkEightGPUHotMPS(b *testing.B) {
	sc := mustLoad(b, filepath.Join(scenarioDir, "eight-gpu-hot.yaml"))
	for i := range sc.Tenants {
		sc.Tenants[i].MPSThreads = 0.25
	}
	benchSampled(b, sc, 120, 1)
}

// benchSampled runs sc for secs simulated seconds per iteration, sampling
// every second and closing a window every windowEvery seconds.
func benchSampled(b *testing.B, sc *Scenario, secs, windowEvery int) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := New(sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := s.Now()
		for sec := 1; sec <= secs; sec++ {
			s.AdvanceTo(start.Add(time.Duration(sec) * time.Second))
			if _, err := s.Sample(ctx); err != nil {
				b.Fatal(err)
			}
			if sec%windowEvery == 0 {
				s.Window()
			}
		}
	}
}
