package simrun_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// longAnswers is an LLM writing 8000-token answers (minutes each, longer
// than the clients' 60 s timeout) held to a 10 s end-to-end SLO beside
// a training job: none of its requests is ever served in time, and many
// minutes end none of them while some wait past the target.
const longAnswers = `name: long-answers
seed: 1
duration: 10m
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - name: writer
    process: {pid: 71001, executable: vllm}
    memory: 40GiB
    slo: {quantile: 0.99, target: 10s}
    workload: {type: llm, params: 8e9, context_tokens: 1024, generated_tokens: 8000, fixed_tokens: true, max_batch: 48, arrival: {process: poisson, rate: 0.02}}
  - name: pretrain
    process: {pid: 71002, executable: python3}
    memory: 32GiB
    workload: {type: training, flops: 6e13, bytes: 6e10, occupancy: 0.8}
`

// TestGoodputMinuteWithOverdueNotHeld: a goodput minute in which the
// latency tenant ended no request while some waited past its target did
// not hold its SLO, and the trainer's work there is not goodput; only the
// minutes before its first request hold. Before, every minute in which
// nothing ended held: 5 of the 10 (minutes 2, 6 and 9 with requests
// overdue), and the trainer's goodput was 53% of its work.
func TestGoodputMinuteWithOverdueNotHeld(t *testing.T) {
	file := filepath.Join(t.TempDir(), "long-answers.yaml")
	if err := os.WriteFile(file, []byte(longAnswers), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := simrun.Run(context.Background(), simrun.Config{Scenario: file, Policy: "none", Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Recorder.Summary()
	writer, train := s.Tenants[1], s.Tenants[0]
	if writer.Tenant != "writer" || train.Tenant != "pretrain" {
		t.Fatalf("tenants %s, %s", s.Tenants[0].Tenant, s.Tenants[1].Tenant)
	}
	if s.HeldFraction == nil {
		t.Fatal("no share of GPU-minutes held, with tenants on the GPU")
	}
	held := *s.HeldFraction
	t.Logf("writer: %d completed, %d dropped, %d overdue at the end; %.1f%% of the GPU-minutes held; pretrain work %.3g/s, goodput %.3g/s",
		writer.Requests, writer.Dropped, writer.Overdue, 100*held, train.WorkRate, train.Goodput)
	if writer.Requests != 0 || writer.Dropped == 0 {
		t.Fatalf("writer: %d completed, %d dropped; the test needs none served and some dropped", writer.Requests, writer.Dropped)
	}
	if held != 0.2 {
		t.Errorf("%.3f of the GPU-minutes held, want 0.2: the two before the writer's first request", held)
	}
	if train.Goodput > 0.3*train.WorkRate {
		t.Errorf("pretrain: goodput %.3g/s of %.3g/s work; want only its first two minutes'", train.Goodput, train.WorkRate)
	}
}
