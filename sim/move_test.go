package sim

import (
	"context"
	"testing"
	"time"
)

func TestMoveProcess(t *testing.T) {
	sc := mustParse(t, `name: mv
gpus: [{model: H100-SXM5-80GB}, {model: H100-SXM5-80GB}]
control: {migration_time: 2s, actuators: {hook: {latency: 0s, failure_rate: 0}}}
tenants:
  - name: a
    process: {pid: 10}
    memory: 8GiB
    workload: {type: dnn, flops: 1e11, arrival: {process: poisson, rate: 100}}
  - name: b
    memory: 8GiB
    workload: {type: training, flops: 1e12}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	s.AdvanceTo(s.Now().Add(time.Second))
	s.Window()
	if err := s.MoveProcess(ctx, 10, sc.GPUs[1].UUID); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(1900 * time.Millisecond))
	if w := s.Window().Tenants[0]; w.Completed != 0 {
		t.Fatalf("%d requests completed during the migration", w.Completed)
	}
	s.AdvanceTo(s.Now().Add(3 * time.Second))
	w := s.Window().Tenants[0]
	if w.GPU != sc.GPUs[1].UUID || w.Completed < 250 {
		t.Fatalf("after the move: GPU %s, %d completed", w.GPU, w.Completed)
	}
	r, _ := s.Sample(ctx)
	if len(r.Devices[1].Processes) != 1 || r.Devices[1].Processes[0].PID != 10 {
		t.Fatalf("GPU 1 processes %+v", r.Devices[1].Processes)
	}
	if err := s.MoveProcess(ctx, 999, sc.GPUs[1].UUID); err == nil {
		t.Error("moving an unknown PID succeeded")
	}
}

func TestMoveProcessToMIG(t *testing.T) {
	sc := mustParse(t, `name: mvmig
gpus:
  - {model: H100-SXM5-80GB}
  - {model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 3g.40gb}, {profile: 3g.40gb}]}
control: {migration_time: 1s, load_bandwidth: 100GB, actuators: {hook: {latency: 0s, failure_rate: 0}}}
tenants:
  - {name: a, gpu: 0, process: {pid: 10}, memory: 10GB, workload: {type: training, flops: 1e12}}
  - {name: b, gpu: 1, mig_instance: 0, memory: 20GB, workload: {type: training, flops: 1e12}}
  - {name: big, gpu: 0, process: {pid: 30}, memory: 45GB, workload: {type: training, flops: 1e12}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	if err := s.MoveProcess(ctx, 10, sc.GPUs[1].UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveProcess(ctx, 30, sc.GPUs[1].UUID); err == nil {
		t.Error("a 45 GB process moved into 40 GB instances")
	}
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	r, _ := s.Sample(ctx)
	for _, p := range r.Devices[1].Processes {
		if p.PID == 10 && p.GPUInstanceID != 2 {
			t.Fatalf("moved process in GPU instance %d, want 2 (the emptier one)", p.GPUInstanceID)
		}
	}
	if w := s.Window().Tenants[0]; w.Completed == 0 || w.GPU != sc.GPUs[1].UUID {
		t.Fatalf("after the move: %+v", w)
	}
}

// A client's active-thread value is set in its GPU's MPS server: moved to
// another GPU, the client's new context gets that GPU's default.
func TestMoveResetsMPSActiveThreads(t *testing.T) {
	sc := mustParse(t, `name: mv
gpus: [{model: H100-SXM5-80GB, sharing: mps}, {model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - name: a
    process: {pid: 10}
    memory: 8GiB
    workload: {type: training, flops: 1e12}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	if err := s.SetMPSActiveThreads(ctx, sc.GPUs[0].UUID, 10, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartClient(ctx, sc.GPUs[0].UUID, 10, ""); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(time.Minute))
	frac := func(dev int) float64 {
		t.Helper()
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ps := r.Devices[dev].Processes
		if len(ps) != 1 || ps[0].MPSActiveThreads == nil {
			t.Fatalf("GPU %d processes %+v", dev, ps)
		}
		return *ps[0].MPSActiveThreads
	}
	if f := frac(0); f != 0.25 {
		t.Fatalf("before the move: %v, want 0.25", f)
	}
	if err := s.MoveProcess(ctx, 10, sc.GPUs[1].UUID); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(time.Minute))
	if f := frac(1); f != 1 {
		t.Errorf("after the move: %v, want the target's default 1", f)
	}
}
