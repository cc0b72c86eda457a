package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestRestartingEverySecondCosts: on noisy-neighbour, a policy that
// restarts both MPS clients every second does worse than one that holds
// still: actions cost something.
func TestRestartingEverySecondCosts(t *testing.T) {
	sc, err := LoadScenario("../scenarios/noisy-neighbour.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		attainment, embed float64
		actions           []Action
	}
	run := func(restart bool) result {
		s := mustNew(t, sc, Options{})
		ctx := context.Background()
		start := s.Now()
		var good, total, embed float64
		for sec := 1; sec <= 240; sec++ {
			if restart {
				for _, pid := range []uint32{61001, 61002} {
					if err := s.RestartClient(ctx, sc.GPUs[0].UUID, pid, ""); err != nil && !errors.Is(err, gpu.ErrBusy) && !errors.Is(err, ErrCallFailed) {
						t.Fatal(err)
					}
				}
			}
			s.AdvanceTo(start.Add(time.Duration(sec) * time.Second))
			w := s.Window()
			chat := w.Tenants[0]
			good += float64(chat.Good)
			total += float64(chat.Completed + chat.Dropped)
			embed += float64(w.Tenants[1].Completed)
		}
		return result{good / total, embed, s.Actions()}
	}
	still, busy := run(false), run(true)
	t.Logf("holding still: chat attainment %.4f, embed %.0f requests; restarting every second: %.4f, %.0f, %d actions",
		still.attainment, still.embed, busy.attainment, busy.embed, len(busy.actions))
	if len(still.actions) != 0 {
		t.Errorf("holding still recorded actions: %+v", still.actions)
	}
	if !(busy.attainment < still.attainment) || busy.embed > still.embed {
		t.Errorf("restarting every second: chat attainment %.4f (still %.4f), embed %.0f (still %.0f): want chat worse, embed no better",
			busy.attainment, still.attainment, busy.embed, still.embed)
	}
	var paused time.Duration
	kinds := map[string]bool{}
	for _, a := range busy.actions {
		paused += a.Paused
		kinds[a.Kind] = true
	}
	// chat (30 GiB) has no room for a second copy beside embed: it drains;
	// embed (20 GiB) has: it switches to a standby
	if !kinds["restart-drain"] || !kinds["restart-standby"] || paused < 10*time.Second {
		t.Errorf("restart kinds %v, %v paused in all: want drains and standbys, seconds paused", kinds, paused)
	}
}

// TestLifecycleAndMIGRelayout: draining both MIG instances stops their
// processes (their clients' requests then fail), which lets ConfigureMIG
// change the layout; StartProcess brings the tenants back after their
// model load.
func TestLifecycleAndMIGRelayout(t *testing.T) {
	sc := mustParse(t, `name: relayout
gpus:
  - model: H200-SXM5-141GB
    sharing: mig
    mig: [{profile: 3g.71gb}, {profile: 4g.71gb}]
control: {migration_time: 1s, load_bandwidth: 10GB, drain_timeout: 2s}
tenants:
  - {name: a, mig_instance: 0, process: {pid: 1}, memory: 20GB, workload: {type: dnn, flops: 1e11, weights_bytes: 10GB, arrival: {process: poisson, rate: 50}}}
  - {name: b, mig_instance: 1, process: {pid: 2}, memory: 20GB, workload: {type: training, flops: 1e12, checkpoint_interval: 1s}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	s.AdvanceTo(s.Now().Add(5 * time.Second))
	if err := s.ConfigureMIG(ctx, uuid, []string{"7g.141gb"}); !errors.Is(err, gpu.ErrBusy) {
		t.Fatalf("relayout with processes running: %v, want ErrBusy", err)
	}
	for _, m := range sc.GPUs[0].MIG {
		if err := s.DrainMIGInstance(ctx, uuid, m.UUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DrainMIGInstance(ctx, uuid, "MIG-nope"); err == nil {
		t.Error("an unknown instance drained")
	}
	s.AdvanceTo(s.Now().Add(3 * time.Second))
	s.Window()
	if err := s.ConfigureMIG(ctx, uuid, []string{"7g.141gb"}); err != nil {
		t.Fatalf("relayout after the drain: %v", err)
	}
	s.AdvanceTo(s.Now().Add(3 * time.Second)) // the 2 s MIG drain time, and 1 s
	if w := s.Window().Tenants[0]; w.Completed != 0 || w.Dropped < 50 {
		t.Errorf("stopped service: %d completed, %d dropped; want none served, its requests failed", w.Completed, w.Dropped)
	}
	for _, pid := range []uint32{1, 2} {
		if err := s.StartProcess(ctx, pid); err != nil {
			t.Fatal(err)
		}
	}
	s.AdvanceTo(s.Now().Add(time.Second)) // inside the 2 s start (1 s + 10 GB at 10 GB/s)
	if w := s.Window().Tenants[0]; w.Completed != 0 {
		t.Errorf("%d requests served during the model load", w.Completed)
	}
	s.AdvanceTo(s.Now().Add(5 * time.Second))
	w := s.Window()
	if w.Tenants[0].Completed == 0 || w.Tenants[1].Work == 0 {
		t.Errorf("after the start: %+v", w.Tenants)
	}
	var kinds []string
	for _, a := range s.Actions() {
		kinds = append(kinds, a.Kind)
		if (a.Kind == "drain-mig" || a.Kind == "start") && (!a.Done || a.Paused <= 0) {
			t.Errorf("action %+v: want done with a pause", a)
		}
	}
	want := []string{"drain-mig", "drain-mig", string(gpu.KnobMIGLayout), "start", "start"}
	if len(kinds) != len(want) {
		t.Fatalf("actions %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("actions %v, want %v", kinds, want)
		}
	}
}

// TestMoveLosesInFlightWork: a move loses what was queued and in flight,
// costs the start time and the model load, and a training job resumes from
// its last checkpoint.
func TestMoveLosesInFlightWork(t *testing.T) {
	sc := mustParse(t, `name: mv
gpus: [{model: H100-SXM5-80GB}, {model: H100-SXM5-80GB}]
control: {migration_time: 2s, load_bandwidth: 4GB, actuators: {hook: {latency: 0s, failure_rate: 0}}}
tenants:
  - {name: svc, process: {pid: 1}, memory: 20GB, workload: {type: dnn, flops: 1e12, weights_bytes: 8GB, max_batch: 1, arrival: {process: poisson, rate: 500}}}
  - {name: train, process: {pid: 2}, memory: 8GB, workload: {type: training, flops: 1e13, checkpoint_interval: 1h}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	before := s.Window().Tenants[1].Work
	for _, pid := range []uint32{1, 2} {
		if err := s.MoveProcess(ctx, pid, sc.GPUs[1].UUID); err != nil {
			t.Fatal(err)
		}
	}
	acts := s.Actions()
	if len(acts) != 2 || acts[0].Lost == 0 || acts[0].Paused != 4*time.Second {
		t.Fatalf("move of an overloaded service: %+v; want requests lost, 2 s + 8 GB at 4 GB/s paused", acts)
	}
	if acts[1].Lost != int(before) {
		t.Errorf("training move lost %d steps, want the %v since its checkpoint", acts[1].Lost, before)
	}
	s.AdvanceTo(s.Now().Add(10 * time.Second))
	w := s.Window().Tenants[1]
	// the lost steps are redone before new work counts
	if w.Work <= 0 || w.Work >= before*10/2 {
		t.Errorf("training after the move: %v steps in 10 s (%v in 2 s before); want fewer: %v redone and 4 s paused", w.Work, before, before)
	}
}

// TestClientTimeout: a request older than its client's timeout fails.
func TestClientTimeout(t *testing.T) {
	s := mustNew(t, mustParse(t, `name: to
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 1e13, timeout: 2s, arrival: {process: poisson, rate: 200}}}
`), Options{})
	s.AdvanceTo(s.Now().Add(20 * time.Second))
	w := s.Window().Tenants[0]
	if w.TimedOut == 0 || w.Dropped < w.TimedOut {
		t.Fatalf("overloaded with a 2 s timeout: %d timed out, %d dropped", w.TimedOut, w.Dropped)
	}
	if worst := w.Latencies[len(w.Latencies)-1]; worst > 2*time.Second {
		t.Errorf("a request completed after %v, past its 2 s timeout", worst)
	}
}

// TestComputeTimeSliceRefusedOnMPS: the time slice does nothing under MPS.
func TestComputeTimeSliceRefusedOnMPS(t *testing.T) {
	sc := mustParse(t, saturating("mps", 1, ""))
	s := mustNew(t, sc, Options{})
	if err := s.SetComputeTimeSlice(context.Background(), sc.GPUs[0].UUID, gpu.TimeSliceLong); !errors.Is(err, gpu.ErrNotSupported) {
		t.Fatalf("time slice on an MPS GPU: %v, want ErrNotSupported", err)
	}
}

// TestComputeTimeSliceListedWhereSet: a GPU lists the compute time slice
// (Capabilities) where its actuator sets it, and only there: the tuner
// refuses untried a change its GPU's list leaves out, so a level the
// simulator would set must be listed.
func TestComputeTimeSliceListedWhereSet(t *testing.T) {
	sc := mustParse(t, `name: ts
gpus:
  - {model: H100-SXM5-80GB, sharing: exclusive}
  - {model: H100-SXM5-80GB, sharing: time-slice}
  - {model: H100-SXM5-80GB, sharing: mps}
  - {model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 7g.80gb}]}
  - {model: H100-SXM5-80GB, sharing: vgpu}
`)
	s := mustNew(t, sc, Options{})
	for _, g := range sc.GPUs {
		listed := slices.Contains(s.Capabilities(g.UUID), gpu.KnobComputeTimeSlice)
		err := s.SetComputeTimeSlice(context.Background(), g.UUID, gpu.TimeSliceLong)
		if set := err == nil; set != listed {
			t.Errorf("%s GPU: compute time slice listed %v, set: %v", g.Sharing, listed, err)
		}
	}
}

// TestHBMPowerIndependentOfSMClock: the HBM term of the power model does
// not scale with the SM clock.
func TestHBMPowerIndependentOfSMClock(t *testing.T) {
	g := &gpuState{m: modelByName("H100-SXM5-80GB")}
	for _, f := range []float64{345, 990, 1980} {
		if d := g.powerAt(f, 0, 0.2) - g.powerAt(f, 0, 0); math.Abs(d-g.dynW()*0.2) > 1e-9 {
			t.Errorf("HBM power at %g MHz: %g W, want %g", f, d, g.dynW()*0.2)
		}
	}
}

// A MIG layout on a GPU whose MIG mode is off (time-sliced, or one
// exclusive process) is refused as NVML's backend refuses it (turning
// MIG mode on needs an idle GPU and a reset, which no layout call
// makes): gpu.ErrBusy naming the GPU and how to turn it on, the GPU as
// it was. (The simulator turned MIG on in the call.)
func TestMIGLayoutRefusedWithMIGModeOff(t *testing.T) {
	sc := mustParse(t, `name: migoff
gpus:
  - {model: H100-SXM5-80GB, sharing: time-slice}
  - {model: H100-SXM5-80GB, sharing: exclusive}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	for i, g := range sc.GPUs {
		err := s.ConfigureMIG(ctx, g.UUID, []string{"7g.80gb"})
		if !errors.Is(err, gpu.ErrBusy) || !strings.Contains(err.Error(), g.UUID) || !strings.Contains(err.Error(), fmt.Sprintf("nvidia-smi -i %d -mig 1", i)) {
			t.Errorf("%s GPU: ConfigureMIG: %v, want ErrBusy naming %s and how to turn MIG mode on", g.Sharing, err, g.UUID)
		}
		r, _ := s.Sample(ctx)
		if d := r.Devices[i]; string(d.Mode) != g.Sharing || len(d.MIG) != 0 {
			t.Errorf("%s GPU after the refusal: mode %s, %d MIG instances; want it as it was", g.Sharing, d.Mode, len(d.MIG))
		}
		if err := s.ConfigureMIG(ctx, g.UUID, nil); err != nil {
			t.Errorf("%s GPU: an empty layout (MIG off, as it is): %v, want nothing to do", g.Sharing, err)
		}
	}
}
