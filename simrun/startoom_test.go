package simrun_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// TestStartOOMCounted: a tenant whose memory does not fit fails to create
// its context at the scenario's start, and the report counts that OOM (in
// the summary and in the first step's row) instead of a row of zeros with
// no word of why; a tenant that fits counts none.
func TestStartOOMCounted(t *testing.T) {
	for _, tc := range []struct {
		name, gpu, memory string
		want              int
	}{
		{"fits", "", "memory: 40GiB", 0},
		{"more memory than the GPU has", "", "memory: 200GiB", 1},
		{"the driver's reserve leaves no room", "    reserved_memory: 100GiB\n", "memory: 1GiB", 1},
		{"over the MPS pinned memory limit", "    sharing: mps\n    mps: {default_pinned_memory_limit: 1GiB}\n", "memory: 2GiB", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "oom.yaml")
			sc := "gpus:\n  - model: H100-SXM5-80GB\n" + tc.gpu +
				"tenants:\n  - name: big\n    gpu: 0\n    " + tc.memory +
				"\n    workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 10}}\n"
			if err := os.WriteFile(p, []byte(sc), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := simrun.Run(context.Background(), simrun.Config{Scenario: p, Policy: "none", Duration: 3 * time.Second, Step: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Recorder.Summary().Tenants[0].OOMs; got != tc.want {
				t.Errorf("summary: %d OOMs, want %d", got, tc.want)
			}
			steps := res.Recorder.Steps()
			if got := steps[0].Tenants[0].OOMs; got != tc.want {
				t.Errorf("first step: %d OOMs, want %d", got, tc.want)
			}
		})
	}
}
