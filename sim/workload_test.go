package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestTraceReplay(t *testing.T) {
	for _, c := range []struct {
		loop     string
		min, max int
	}{
		{"no_loop: true", 300, 300}, // the 300 requests span 84 s; at 10x, 8.4 s
		// 20 s replay about 714 requests; those of the last ~2 s (256
		// tokens each at about 7 ms per iteration) are still running
		{"no_loop: false", 600, 780},
	} {
		t.Run(c.loop, func(t *testing.T) {
			sc := mustParse(t, fmt.Sprintf(`name: tr
gpus: [{model: H200-SXM5-141GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - name: chat
    memory: 40GiB
    workload:
      type: llm
      params: 1e9
      max_batch: 256 # capacity to spare: the test counts the trace's requests
      arrival: {process: trace, file: testdata/azure-llm-2023-conv-300.csv, speedup: 10, %s}
`, c.loop))
			s := mustNew(t, sc, Options{})
			s.AdvanceTo(s.Now().Add(20 * time.Second))
			w := s.Window().Tenants[0]
			if w.Completed < c.min || w.Completed > c.max {
				t.Fatalf("%d requests completed, want %d..%d", w.Completed, c.min, c.max)
			}
		})
	}
}

func TestBurstyArrivals(t *testing.T) {
	sc := mustParse(t, `name: b
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - name: a
    memory: 8GiB
    workload: {type: dnn, flops: 1e8, arrival: {process: bursty, rate: 10, burst_rate: 200, burst_mean: 1s, calm_mean: 4s}}
`)
	s := mustNew(t, sc, Options{})
	var counts []float64
	for i := 0; i < 600; i++ {
		s.AdvanceTo(s.Now().Add(time.Second))
		counts = append(counts, float64(s.Window().Tenants[0].Completed))
	}
	mean, vr := 0.0, 0.0
	for _, c := range counts {
		mean += c
	}
	mean /= float64(len(counts))
	for _, c := range counts {
		vr += (c - mean) * (c - mean)
	}
	vr /= float64(len(counts))
	want := (10*4 + 200*1) / 5.0 // time-weighted mean rate
	if math.Abs(mean-want)/want > 0.15 {
		t.Errorf("mean rate %.1f/s, want %.1f ± 15%%", mean, want)
	}
	if vr/mean < 5 {
		t.Errorf("index of dispersion %.1f: not bursty (Poisson is 1)", vr/mean)
	}
}

// TestLLMRoofline: prefill is compute-bound (2 FLOPs per parameter per
// context token), each decode iteration reads the weights and the KV cache.
func TestLLMRoofline(t *testing.T) {
	sc := mustParse(t, `name: llm
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - name: a
    memory: 30GiB
    workload: {type: llm, params: 8e9, context_tokens: 2048, generated_tokens: 128, fixed_tokens: true, arrival: {process: poisson, rate: 0.2}}
`)
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(200 * time.Second))
	w := s.Window().Tenants[0]
	if w.Completed < 20 {
		t.Fatalf("%d requests", w.Completed)
	}
	m := modelByName("H100-SXM5-80GB")
	flops := m.PeakFLOPS * m.ComputeEff
	bw := m.BandwidthBS * m.BandwidthEff
	kv := 131072.0
	prefill := max(2*8e9*2048/flops, (16e9+kv*2048)/bw)
	decode := 0.0
	for i := 1; i < 128; i++ {
		decode += (16e9 + kv*float64(2048+i)) / bw
	}
	// and every iteration (128: one prefill, 127 decodes) the engine's
	// host overhead for its one sequence
	overhead := 128 * (defaultIterationOverhead + defaultSeqOverhead).Seconds()
	want := time.Duration((prefill + decode + overhead) * 1e9)
	// most requests run alone at this rate; the median is the solo latency
	got := quantile(w.Latencies, 0.5)
	if math.Abs(float64(got-want))/float64(want) > 0.02 {
		t.Fatalf("median e2e %v, roofline says %v", got, want)
	}
}

func TestOOMEvents(t *testing.T) {
	sc := mustParse(t, `name: oom
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - name: a
    process: {pid: 10}
    memory: 50GB
    workload: {type: training, flops: 1e12}
  - name: b
    process: {pid: 20}
    memory: 50GB
    workload: {type: training, flops: 1e12}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	s.AdvanceTo(s.Now().Add(time.Second))
	r, _ := s.Sample(ctx)
	d := r.Devices[0]
	if len(d.Processes) != 1 || d.Processes[0].PID != 10 {
		t.Fatalf("processes %+v, want only PID 10", d.Processes)
	}
	if len(d.Events) != 1 || d.Events[0].Kind != gpu.EventOOM || d.Events[0].PID != 20 {
		t.Fatalf("events %+v, want one OOM for PID 20", d.Events)
	}
	if w := s.Window(); w.Tenants[1].OOMs != 1 || w.Tenants[1].Completed != 0 {
		t.Fatalf("ground truth for b: %+v", w.Tenants[1])
	}
	// a pinned limit below the client's memory fails its next context
	uuid := sc.GPUs[0].UUID
	if err := s.SetMPSPinnedMemoryLimit(ctx, uuid, 10, 10e9); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartClient(ctx, uuid, 10, ""); err == nil {
		t.Fatal("restart over the pinned limit succeeded")
	}
	r, _ = s.Sample(ctx)
	if d := r.Devices[0]; len(d.Processes) != 0 || len(d.Events) != 1 || d.Events[0].Kind != gpu.EventOOM {
		t.Fatalf("after the failed restart: %d processes, events %+v", len(d.Processes), d.Events)
	}
}

func TestPowerLimitCapsClock(t *testing.T) {
	src := `name: p
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - name: a
    memory: 8GiB
    workload: {type: training, flops: 5e12, bytes: 1e9}
`
	run := func(limit float64) (*gpu.Device, float64) {
		sc := mustParse(t, src)
		s := mustNew(t, sc, Options{})
		if limit > 0 {
			if err := s.SetPowerLimit(context.Background(), sc.GPUs[0].UUID, limit); err != nil {
				t.Fatal(err)
			}
		}
		s.Sample(context.Background())
		s.AdvanceTo(s.Now().Add(5 * time.Second))
		r, _ := s.Sample(context.Background())
		return &r.Devices[0], s.Window().Tenants[0].Work
	}
	free, wFree := run(0)
	capped, wCapped := run(350)
	if *capped.PowerWatts > 355 {
		t.Errorf("power %.0f W over the 350 W limit", *capped.PowerWatts)
	}
	if *capped.SMClockHz >= *free.SMClockHz || wCapped >= wFree {
		t.Errorf("power cap: clock %.0f vs %.0f MHz, work %.0f vs %.0f", *capped.SMClockHz/1e6, *free.SMClockHz/1e6, wCapped, wFree)
	}
	if capped.ThrottleReason&reasonPowerCap == 0 {
		t.Errorf("throttle reasons %#x lack the power cap", capped.ThrottleReason)
	}
	if err := (&Simulator{}).SetPowerLimit(context.Background(), "nope", 100); err == nil {
		t.Error("unknown GPU accepted")
	}
}

func TestRealTimeClock(t *testing.T) {
	sc := mustLoad(t, "../scenarios/h100-timeslice.yaml")
	clk := gpu.NewManualClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	s := mustNew(t, sc, Options{Clock: clk})
	ctx := context.Background()
	if _, err := s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	r, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Time.Equal(clk.Now()) || r.Interval != 3*time.Second || !s.Now().Equal(clk.Now()) {
		t.Fatalf("time %v interval %v, clock %v", r.Time, r.Interval, clk.Now())
	}
}

func TestComputeTimeSliceLevel(t *testing.T) {
	sc := mustParse(t, saturating("time-slice", 2, ""))
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	switches := func() uint64 {
		s.AdvanceTo(s.Now().Add(2 * time.Second))
		r, _ := s.Sample(ctx)
		return *r.Devices[0].ContextSwitchesTotal
	}
	c0 := switches()
	if err := s.SetComputeTimeSlice(ctx, sc.GPUs[0].UUID, "long"); err != nil {
		t.Fatal(err)
	}
	c1 := switches() - c0
	if c1*10 > c0 {
		t.Errorf("context switches per 2 s: %d at default, %d at long (30 ms slices)", c0, c1)
	}
	if err := s.SetComputeTimeSlice(ctx, sc.GPUs[0].UUID, "tiny"); err == nil {
		t.Error("unknown level accepted")
	}
	if err := s.SetMPSActiveThreads(ctx, sc.GPUs[0].UUID, 4000, 0.5); !errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("MPS on a time-sliced GPU: %v", err)
	}
}

// TestMinJobTime: a batch takes at least min_job_time however small its
// roofline time.
func TestMinJobTime(t *testing.T) {
	for _, c := range []struct {
		floor string
		want  time.Duration
	}{{"0s", 10 * time.Microsecond}, {"2ms", 2 * time.Millisecond}} {
		sc := mustParse(t, fmt.Sprintf(`name: f
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - name: a
    memory: 8GiB
    workload: {type: dnn, flops: 1e6, min_job_time: %s, arrival: {process: poisson, rate: 5}}
`, c.floor))
		s := mustNew(t, sc, Options{})
		s.AdvanceTo(s.Now().Add(10 * time.Second))
		l := s.Window().Tenants[0].Latencies
		if len(l) == 0 {
			t.Fatalf("min_job_time %s: no request completed", c.floor)
		}
		if l[0] < c.want || l[0] > c.want+time.Microsecond {
			t.Errorf("min_job_time %s: shortest latency %v, want %v", c.floor, l[0], c.want)
		}
	}
}

// TestConcurrentUse exercises Sample, Window, AppMetrics and control calls
// from several goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	sc := mustLoad(t, "../scenarios/h100-timeslice.yaml")
	clk := gpu.NewManualClock(DefaultStart)
	s := mustNew(t, sc, Options{Clock: clk})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	done := make(chan struct{})
	for g := 0; g < 3; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 50; i++ {
				switch g {
				case 0:
					if _, err := s.Sample(ctx); err != nil {
						t.Error(err)
					}
				case 1:
					var b bytes.Buffer
					if err := s.AppMetrics("chat", &b); err != nil {
						t.Error(err)
					}
					s.Window()
				case 2:
					_ = s.SetComputeTimeSlice(ctx, uuid, []gpu.TimeSliceLevel{gpu.TimeSliceDefault, gpu.TimeSliceShort}[i%2])
					_ = s.LockClocks(ctx, uuid, gpu.ClockLock{MinMHz: 1980, MaxMHz: 1980})
					s.Capabilities(uuid)
				}
			}
		}(g)
	}
	for i := 0; i < 50; i++ {
		clk.Advance(100 * time.Millisecond)
	}
	for g := 0; g < 3; g++ {
		<-done
	}
	if got := s.Now(); !got.Equal(clk.Now()) && got.After(clk.Now()) {
		t.Fatalf("model time %v past the clock %v", got, clk.Now())
	}
}

func TestMIGWithMPS(t *testing.T) {
	sc := mustParse(t, `name: mm
gpus:
  - model: H100-SXM5-80GB
    sharing: mig
    mig: [{profile: 3g.40gb, sharing: mps}, {profile: 3g.40gb}]
tenants:
  - {name: a, process: {pid: 10}, mig_instance: 0, mps_active_threads: 0.5, memory: 8GiB, workload: {type: training, flops: 1e12}}
  - {name: b, process: {pid: 20}, mig_instance: 0, mps_active_threads: 0.5, memory: 8GiB, workload: {type: training, flops: 1e12}}
  - {name: c, process: {pid: 30}, mig_instance: 1, memory: 8GiB, workload: {type: training, flops: 1e12}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	r, _ := s.Sample(ctx)
	types := map[uint32]gpu.ProcessType{}
	for _, p := range r.Devices[0].Processes {
		types[p.PID] = p.Type
	}
	if types[10] != gpu.ProcessMPS || types[20] != gpu.ProcessMPS || types[30] != gpu.ProcessCompute {
		t.Fatalf("process types %v", types)
	}
	// MPS clients share their instance concurrently: each about half of it
	w := s.Window()
	for i, want := range []float64{0.5, 0.5, 1} {
		if got := w.Tenants[i].SMShare; math.Abs(got-want) > 0.03 {
			t.Errorf("tenant %s: SM share of its instance %.3f, want %.2f", w.Tenants[i].Tenant, got, want)
		}
	}
	if err := s.SetMPSActiveThreads(ctx, uuid, 10, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMPSActiveThreads(ctx, uuid, 30, 0.25); err == nil {
		t.Error("MPS setting accepted for a process in a time-sliced instance")
	}
}

func TestExclusiveMode(t *testing.T) {
	_, err := ParseScenario("x.yaml", []byte(`name: ex
gpus: [{model: H100-SXM5-80GB, sharing: exclusive}]
tenants:
  - {name: a, workload: {type: training, flops: 1e12}}
  - {name: b, workload: {type: training, flops: 1e12}}
`))
	if err == nil || !strings.Contains(err.Error(), "x.yaml:5: GPU 0 is exclusive") {
		t.Fatalf("two tenants on an exclusive GPU: %v", err)
	}
}

func TestGPUFaultEvents(t *testing.T) {
	sc := mustParse(t, `name: fault
gpus: [{model: H100-SXM5-80GB}, {model: H100-SXM5-80GB}]
tenants:
  - {name: a, gpu: 0, process: {pid: 10}, memory: 8GiB, workload: {type: dnn, flops: 1e11, arrival: {process: poisson, rate: 50}}}
  - {name: b, gpu: 1, memory: 8GiB, workload: {type: training, flops: 1e12}}
events:
  - {at: 1s, action: xid, gpu: 0, code: 13, tenant: a}
  - {at: 2s, action: gpu-lost, gpu: 0}
  - {at: 4s, action: gpu-restored, gpu: 0}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	s.AdvanceTo(s.Now().Add(1500 * time.Millisecond))
	r, _ := s.Sample(ctx)
	if ev := r.Devices[0].Events; len(ev) != 1 || ev[0].Kind != gpu.EventXID || ev[0].Code != 13 || ev[0].PID != 10 {
		t.Fatalf("events %+v, want XID 13 for PID 10", ev)
	}
	s.AdvanceTo(s.Now().Add(time.Second))
	r, _ = s.Sample(ctx)
	d := r.Devices[0]
	if d.Up || d.Err == "" || len(d.Processes) != 0 || len(d.Events) != 1 || d.Events[0].Code != 79 {
		t.Fatalf("lost GPU reads as %+v", d)
	}
	if !r.Devices[1].Up || len(r.Devices[1].Processes) != 1 {
		t.Fatal("the other GPU suffered")
	}
	if err := s.LockClocks(ctx, sc.GPUs[0].UUID, gpu.ClockLock{MinMHz: 1000, MaxMHz: 1000}); err == nil {
		t.Error("control of a lost GPU accepted")
	}
	if w := s.Window().Tenants[0]; w.Dropped == 0 && w.Completed == 0 {
		t.Errorf("tenant a: %+v", w)
	}
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	r, _ = s.Sample(ctx)
	if d := r.Devices[0]; !d.Up || len(d.Processes) != 1 {
		t.Fatalf("after restore: up %v, %d processes", d.Up, len(d.Processes))
	}
	_, err := ParseScenario("x.yaml", []byte("name: x\ngpus: [{model: H100-SXM5-80GB}]\nevents:\n  - {at: 1s, action: gpu-lost}\n"))
	if err == nil || !strings.Contains(err.Error(), "x.yaml:4: a gpu-lost event needs gpu") {
		t.Fatalf("gpu-lost without gpu: %v", err)
	}
}

// TestWindowLatencyBound: a window never keeps more than maxWindowLatencies
// latencies, while Completed counts every request.
func TestWindowLatencyBound(t *testing.T) {
	sc := mustParse(t, `name: many
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 1e8, max_batch: 256, arrival: {process: poisson, rate: 60000}}}
events:
  - {at: 10s, tenant: a, rate: 55000}
`)
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(20 * time.Second))
	w := s.Window().Tenants[0]
	if w.Completed < 1_100_000 || len(w.Latencies) != maxWindowLatencies {
		t.Fatalf("%d completed, %d latencies kept", w.Completed, len(w.Latencies))
	}
}

func TestMemoryClockLock(t *testing.T) {
	sc := mustParse(t, `name: mem
gpus: [{model: H200-SXM5-141GB}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: training, flops: 1e9, bytes: 2e10}}
`)
	run := func(lock uint32) float64 {
		s := mustNew(t, sc, Options{})
		if lock > 0 {
			if err := s.LockMemoryClocks(context.Background(), sc.GPUs[0].UUID, gpu.ClockLock{MinMHz: lock, MaxMHz: lock}); err != nil {
				t.Fatal(err)
			}
		}
		s.AdvanceTo(s.Now().Add(5 * time.Second))
		return s.Window().Tenants[0].Work
	}
	full, half := run(0), run(1600)
	if r := half / full; math.Abs(r-1600.0/3201) > 0.02 {
		t.Errorf("bandwidth-bound steps at half the memory clock: %.3f of full", r)
	}
	s := mustNew(t, sc, Options{})
	if err := s.LockMemoryClocks(context.Background(), sc.GPUs[0].UUID, gpu.ClockLock{MinMHz: 5000, MaxMHz: 5000}); err == nil {
		t.Error("memory clock over the maximum accepted")
	}
}

func TestMPSDefaultForNewClients(t *testing.T) {
	sc := mustParse(t, `name: def
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, process: {pid: 10}, memory: 8GiB, workload: {type: training, flops: 1e12}}
  - {name: b, process: {pid: 20}, stopped: true, memory: 8GiB, workload: {type: training, flops: 1e12}}
events:
  - {at: 1s, tenant: b, action: start}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	if err := s.SetMPSDefaultActiveThreads(ctx, sc.GPUs[0].UUID, 0.4); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	r, _ := s.Sample(ctx)
	got := map[uint32]float64{}
	for _, p := range r.Devices[0].Processes {
		got[p.PID] = *p.MPSActiveThreads
	}
	if got[10] != 1 || got[20] != 0.4 {
		t.Fatalf("active threads %v: the running client keeps 1, the new one gets 0.4", got)
	}
}

func TestCapabilities(t *testing.T) {
	sc := mustParse(t, `name: caps
gpus:
  - {model: H100-SXM5-80GB, sharing: time-slice}
  - {model: H100-SXM5-80GB, sharing: mps}
  - {model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 7g.80gb}]}
  - {model: H100-SXM5-80GB, sharing: vgpu}
  - {model: H100-SXM5-80GB, sharing: exclusive}
`)
	s := mustNew(t, sc, Options{})
	for i, want := range [][]gpu.Knob{
		// MIG off: no MIG layout, as NVML lists it only in MIG mode
		{gpu.KnobComputeTimeSlice, gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobPlacement, gpu.KnobProcessLifecycle, gpu.KnobPauseDuty},
		// no time slice under MPS: it would do nothing
		{gpu.KnobMPSActiveThreads, gpu.KnobMPSPinnedMemory, gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobPlacement, gpu.KnobProcessLifecycle, gpu.KnobPauseDuty},
		{gpu.KnobMIGLayout, gpu.KnobComputeTimeSlice, gpu.KnobMIGDrain, gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobPlacement, gpu.KnobProcessLifecycle, gpu.KnobPauseDuty},
		// a VM is paused through its process on the host
		{gpu.KnobVGPUScheduler, gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobPauseDuty},
		// nvidia-smi sets the time slice whatever the compute mode; no
		// MIG layout with MIG off
		{gpu.KnobComputeTimeSlice, gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobPlacement, gpu.KnobProcessLifecycle, gpu.KnobPauseDuty},
	} {
		if got := s.Capabilities(sc.GPUs[i].UUID); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("GPU %d (%s): %v, want %v", i, sc.GPUs[i].Sharing, got, want)
		}
	}
	if s.Capabilities("GPU-nope") != nil {
		t.Error("capabilities for an unknown GPU")
	}
}

// Overdue counts the requests still waiting at a window's end that are
// already past the SLO target; once they end they are completed and not
// good, and nothing is overdue any more.
func TestOverdueRequests(t *testing.T) {
	sc := mustParse(t, `name: od
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - name: a
    memory: 8GiB
    slo: {quantile: 0.99, target: 100ms}
    workload: {type: dnn, flops: 7.8e12, max_batch: 1, max_queue: 300, arrival: {process: poisson, rate: 1000}}
events:
  - {at: 2s, tenant: a, rate: 0}
`)
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	w := s.Window().Tenants[0]
	// about 100 requests/s are served; 300 wait, nearly all past 100 ms
	if w.Overdue < 250 || w.Overdue > 300 {
		t.Fatalf("overdue at 2 s: %d, want 250..300 (a full queue of 300, served at 10 ms each)", w.Overdue)
	}
	s.AdvanceTo(s.Now().Add(8 * time.Second))
	w2 := s.Window().Tenants[0]
	if w2.Overdue != 0 || w2.Completed-w2.Good < w.Overdue {
		t.Errorf("after draining: %d overdue, %d completed of which %d good; want 0 overdue and the %d overdue among the missed", w2.Overdue, w2.Completed, w2.Good, w.Overdue)
	}
}

// A client's own mps_active_threads (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) can
// only lower the server's value (docs/calibration.md, MPS): a higher server setting
// leaves it where it is after a restart, a lower one applies; the same
// holds for the GPU default.
func TestMPSClientEnvOnlyLowers(t *testing.T) {
	sc := mustParse(t, `name: env
gpus: [{model: H100-SXM5-80GB, sharing: mps, mps: {default_active_threads: 0.2}}]
tenants:
  - {name: a, process: {pid: 10}, mps_active_threads: 0.3, memory: 8GiB, workload: {type: training, flops: 1e12}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	frac := func() float64 {
		r, _ := s.Sample(ctx)
		return *r.Devices[0].Processes[0].MPSActiveThreads
	}
	if f := frac(); f != 0.2 {
		t.Errorf("client 0.3 under a server default of 0.2: %v, want 0.2", f)
	}
	for _, c := range []struct{ set, want float64 }{{0.8, 0.3}, {0.1, 0.1}} {
		if err := s.SetMPSActiveThreads(ctx, uuid, 10, c.set); err != nil {
			t.Fatal(err)
		}
		if err := s.RestartClient(ctx, uuid, 10, ""); err != nil {
			t.Fatal(err)
		}
		if f := frac(); f != c.want {
			t.Errorf("server %v, client 0.3: %v after a restart, want %v", c.set, f, c.want)
		}
	}
}

// TestWindowLatenciesOption: Options.WindowLatencies lowers the bound,
// and the default stays maxWindowLatencies.
func TestWindowLatenciesOption(t *testing.T) {
	sc := mustParse(t, `name: few
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 1e8, max_batch: 64, arrival: {process: poisson, rate: 2000}}}
`)
	for _, tc := range []struct {
		opt, want int
	}{{0, maxWindowLatencies}, {-1, maxWindowLatencies}, {100, 100}} {
		s := mustNew(t, sc, Options{WindowLatencies: tc.opt})
		if s.maxLat != tc.want {
			t.Errorf("WindowLatencies %d: bound %d, want %d", tc.opt, s.maxLat, tc.want)
		}
	}
	s := mustNew(t, sc, Options{WindowLatencies: 100})
	for range 3 { // the bound holds window after window
		s.AdvanceTo(s.Now().Add(2 * time.Second))
		w := s.Window().Tenants[0]
		if w.Completed < 1000 || len(w.Latencies) != 100 {
			t.Fatalf("%d completed, %d latencies kept, want 100", w.Completed, len(w.Latencies))
		}
	}
}

// TestTimeSliceHostPhaseYields: a time-sliced LLM in its host phase (the
// iteration overhead, here 20 ms per iteration of under 1 ms on the GPU)
// yields the GPU like an idle context: beside a trainer that always has
// work, the GPU is never idle; its time is the two tenants' and the
// context switches'.
func TestTimeSliceHostPhaseYields(t *testing.T) {
	src := `name: yield
gpus: [{model: H100-SXM5-80GB, sharing: time-slice}]
tenants:
  - {name: train, memory: 8GiB, workload: {type: training, flops: 1e12, bytes: 1e9}}
  - {name: chat, memory: 30GiB, workload: {type: llm, params: 1e9, context_tokens: 128, generated_tokens: 256, max_batch: 4, iteration_overhead: 20ms, arrival: {process: poisson, rate: 2}}}
`
	s := mustNew(t, mustParse(t, src), Options{})
	const d = 20 * time.Second
	s.AdvanceTo(s.Now().Add(d))
	switched := s.gpus[0].switchNs / float64(d)
	w := s.Window()
	used := switched
	for _, tw := range w.Tenants {
		used += tw.SMShare
	}
	t.Logf("train %.4f, chat %.4f, switches %.4f of the time: idle %.4f", w.Tenants[0].SMShare, w.Tenants[1].SMShare, switched, 1-used)
	if idle := 1 - used; idle > 0.002 {
		t.Errorf("the GPU idled %.4f of the time beside a trainer that always has work", idle)
	}
}
