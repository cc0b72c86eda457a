package simrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// BenchmarkEightGPUHot runs the benchmark scenario (8 GPUs, 32 tenants) for
// its 10 virtual minutes with a policy, sampling every second, without
// writing files: the cost of the whole observe-decide-record loop.
func BenchmarkEightGPUHot(b *testing.B) {
	for _, policy := range []string{"best-effort", "static-equal"} {
		b.Run(policy, func(b *testing.B) {
			cfg := simrun.Config{Scenario: "../scenarios/eight-gpu-hot.yaml", Policy: policy, Step: time.Second}
			b.ReportAllocs()
			for b.Loop() {
				res, err := simrun.Run(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if n := len(res.Recorder.Steps()); n != 600 {
					b.Fatalf("%d steps", n)
				}
			}
		})
	}
}
