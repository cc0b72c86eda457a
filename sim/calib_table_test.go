package sim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// solo is a scenario of one saturating training tenant on one GPU.
func solo(model, gpuExtra, tenantExtra, flops, bytes string) string {
	return fmt.Sprintf(`name: solo
gpus:
  - model: %s
%s
tenants:
  - name: a
    memory: 8GiB
%s
    workload: {type: training, flops: %s, bytes: %s}
`, model, gpuExtra, tenantExtra, flops, bytes)
}

// stepRate runs src for d and returns the first tenant's completed steps per
// second.
func stepRate(t *testing.T, src string, d time.Duration) float64 {
	t.Helper()
	s := mustNew(t, mustParse(t, src), Options{})
	s.AdvanceTo(s.Now().Add(d))
	return s.Window().Tenants[0].Work / d.Seconds()
}

// switchFigures runs n saturating time-sliced tenants at a time-slice level
// for d and returns the mean context-switch cost and the mean slice
// (time between switches less the switch), both from the readings as a
// monitoring backend would compute them.
func switchFigures(t *testing.T, n int, level string, d time.Duration) (cost, slice time.Duration) {
	t.Helper()
	extra := ""
	if level != "" {
		extra = "    timeslice: " + level + "\n"
	}
	s := mustNew(t, mustParse(t, saturating("time-slice", n, extra)), Options{})
	ctx := context.Background()
	if _, err := s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(d))
	r, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dev := r.Devices[0]
	sw := float64(*dev.ContextSwitchesTotal)
	if sw == 0 {
		t.Fatalf("%d tenants: no context switch in %v", n, d)
	}
	// cycles are counted at the maximum clock (readings.go)
	switchNs := float64(*dev.ContextSwitchCyclesTotal) / (*dev.SMClockMaxHz / 1e9)
	return time.Duration(switchNs / sw), time.Duration((float64(d) - switchNs) / sw)
}

// migSMs returns the SMs a compute-bound tenant in instance inst of an H200
// split 3g.71gb + 4g.71gb gets, from its throughput against the whole GPU.
func migSMs(t *testing.T, inst int) float64 {
	const locked = "    locked_clocks: {min: 1980, max: 1980}"
	full := stepRate(t, solo("H200-SXM5-141GB", locked, "", "1e13", "1e8"), 5*time.Second)
	mig := stepRate(t, solo("H200-SXM5-141GB", locked+"\n    sharing: mig\n    mig: [{profile: 3g.71gb}, {profile: 4g.71gb}]",
		fmt.Sprintf("    mig_instance: %d", inst), "1e13", "1e8"), 5*time.Second)
	return mig / full * 132
}

// TestCalibrationTable: every figure of docs/calibration.md the model
// claims, measured through the model (not read back from its constants),
// with its section there and the tolerance on each row. The time-slicing
// shares, MIG isolation, the MPS cap, MPS contention and the clock ramp
// have their own tests in calib_test.go.
func TestCalibrationTable(t *testing.T) {
	const locked = "    locked_clocks: {min: 1980, max: 1980}"
	h100 := "H100-SXM5-80GB"
	h200 := "H200-SXM5-141GB"
	rows := []struct {
		facts   string
		measure func(t *testing.T) float64
		lo, hi  float64 // the tolerance: the accepted range
	}{
		{"hardware: bf16 matmul 769-798 TFLOP/s on H200 (TFLOP/s, range as measured)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h200, locked, "", "1e13", "1e8"), 5*time.Second) * 1e13 / 1e12
			}, 769, 798},
		{"hardware: device-to-device copy ~4.3 TB/s on H200 (TB/s, ±0.1)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h200, locked, "", "1e9", "4e10"), 5*time.Second) * 4e10 / 1e12
			}, 4.2, 4.4},
		{"hardware: H100 3.35 TB/s peak, same efficiency as the H200 copy (TB/s, 0.9 x 3.35 ±0.1)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h100, locked, "", "1e9", "4e10"), 5*time.Second) * 4e10 / 1e12
			}, 2.915, 3.115},
		{"clocks: idle SM clock 345 MHz (MHz after 1 s idle, ±1)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, `name: idle
gpus: [{model: H200-SXM5-141GB}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 0.001}}}
`), Options{Seed: 3})
				s.AdvanceTo(s.Now().Add(time.Second))
				r, _ := s.Sample(context.Background())
				return *r.Devices[0].SMClockHz / 1e6
			}, 344, 346},
		{"clocks: 1980 MHz under load (MHz, mean over the first 2 s of load on a cool GPU, -3%: clock noise)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, solo(h200, "", "", "1e13", "1e8")), Options{})
				s.AdvanceTo(s.Now().Add(2 * time.Second))
				return s.Window().GPUs[0].SMClockMHz
			}, 1920, 1980},
		{"hardware: H200 memory clock 3201 MHz (MHz, exact)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, solo(h200, "", "", "1e13", "1e8")), Options{})
				r, _ := s.Sample(context.Background())
				return *r.Devices[0].MemClockHz / 1e6
			}, 3201, 3201},
		{"MIG: H200 3g.71gb = 60 of 132 SMs (compute-bound throughput vs the whole GPU, ±1%)",
			func(t *testing.T) float64 { return migSMs(t, 0) }, 60 * 0.99, 60 * 1.01},
		{"MIG: H200 4g.71gb = 64 of 132 SMs (compute-bound throughput vs the whole GPU, ±1%)",
			func(t *testing.T) float64 { return migSMs(t, 1) }, 64 * 0.99, 64 * 1.01},
		{"time-slicing: default time slice 1024 us (us between context switches of 2 saturating tenants, less the switch, ±3%)",
			func(t *testing.T) float64 {
				_, slice := switchFigures(t, 2, "", time.Second)
				return float64(slice) / 1e3
			}, 1024 * 0.97, 1024 * 1.03},
		{"time-slicing: long time slice (lead 30 ms) (ms between switches, ±3%)",
			func(t *testing.T) float64 {
				_, slice := switchFigures(t, 2, "long", 3*time.Second)
				return float64(slice) / 1e6
			}, 30 * 0.97, 30 * 1.03},
		{"time-slicing: context switch 50-200 us (us per switch, 2 tenants)",
			func(t *testing.T) float64 {
				c, _ := switchFigures(t, 2, "", time.Second)
				return float64(c) / 1e3
			}, 50, 200},
		{"time-slicing: context switch 50-200 us, growing with the tenant count (us per switch, 8 tenants)",
			func(t *testing.T) float64 {
				c, _ := switchFigures(t, 8, "", time.Second)
				return float64(c) / 1e3
			}, 150, 200},
		{"MPS tail: p99 of a service beside a bandwidth-bound neighbour, MPS over MIG halves (LithOS: up to 13x; lead: above 1)",
			func(t *testing.T) float64 { return tailRatio(t) }, 1.2, 13},
		{"MPS: best-effort clients share SMs by what their kernels occupy (SM share of the client with occupancy 0.8 next to one with 0.2, ±0.02)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, `name: occ
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: training, flops: 2e12, bytes: 1e8, occupancy: 0.8}}
  - {name: b, memory: 8GiB, workload: {type: training, flops: 2e12, bytes: 1e8, occupancy: 0.2}}
`), Options{})
				s.AdvanceTo(s.Now().Add(2 * time.Second))
				return s.Window().Tenants[0].SMShare
			}, 0.78, 0.82},
		{"noise: lognormal service time, sigma 0.05 alone (p99/p50 of a lone 10 ms request, exp(2.33 x 0.05) = 1.12 ±0.03)",
			func(t *testing.T) float64 {
				l := latencies(t, `name: noise
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 7.8e12, arrival: {process: poisson, rate: 0.2}}}
`, 5000*time.Second)
				return float64(quantile(l, 0.99)) / float64(quantile(l, 0.5))
			}, 1.09, 1.15},
		{"LLM iteration: inter-token latency of an 8B model alone on H100 (ms; published vLLM 7-12 ms, lead)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, `name: itl
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
tenants:
  - {name: a, memory: 30GiB, workload: {type: llm, params: 8e9, context_tokens: 512, generated_tokens: 128, fixed_tokens: true, arrival: {process: poisson, rate: 0.2}}}
`), Options{})
				s.AdvanceTo(s.Now().Add(100 * time.Second))
				tn := s.tenants[0]
				return tn.itl.sum / float64(tn.itl.n) * 1e3
			}, 7, 12},
		{"clocks: a range lock [345, 1980] keeps DVFS: a 22.9 ms kernel after 100 ms idle takes +12% (ratio to a fixed lock, ±3 points)",
			func(t *testing.T) float64 { return afterIdle(t, "    locked_clocks: {min: 345, max: 1980}") }, 1.09, 1.15},
		{"clocks: the power limit applies under a lock (mean SM clock of a saturating load locked at 1980 MHz with a 300 W limit, MHz)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, solo(h200, locked+"\n    power_limit: 300", "", "1e13", "1e8")), Options{})
				s.AdvanceTo(s.Now().Add(2 * time.Second))
				return s.Window().GPUs[0].SMClockMHz
			}, 345, 1700},
		{"actuation: an MPS restart through a standby pauses the client for restart_time (GSLICE: < 100 us; us)",
			func(t *testing.T) float64 {
				a := restartCost(t, "20GiB")
				return float64(a.Paused) / 1e3
			}, 50, 100},
		{"actuation: without memory for a standby the restart drains and reloads (s paused: the drain, at most its 30 s timeout, then 5 s start and 16 GB at 2 GB/s)",
			func(t *testing.T) float64 {
				a := restartCost(t, "60GiB")
				return a.Paused.Seconds()
			}, 13, 43},
	}
	for _, r := range rows {
		t.Run(r.facts, func(t *testing.T) {
			got := r.measure(t)
			t.Logf("%s: %.4g", r.facts, got)
			if math.IsNaN(got) || got < r.lo || got > r.hi {
				t.Errorf("%s: got %.4g, want within [%.4g, %.4g]", r.facts, got, r.lo, r.hi)
			}
		})
	}
}

// latencies runs src for d and returns the first tenant's latencies.
func latencies(t *testing.T, src string, d time.Duration) []time.Duration {
	t.Helper()
	s := mustNew(t, mustParse(t, src), Options{})
	s.AdvanceTo(s.Now().Add(d))
	return s.Window().Tenants[0].Latencies
}

// afterIdle is the median latency of a 22.9 ms compute-bound request
// arriving after about 1 s idle with the clock setting gpuExtra, over the
// same with the clock locked at 1980 MHz.
func afterIdle(t *testing.T, gpuExtra string) float64 {
	src := func(extra string) string {
		return fmt.Sprintf(`name: clk
gpus:
  - model: H100-SXM5-80GB
%s
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: %g, bytes: 1e8, arrival: {process: poisson, rate: 1}}}
`, extra, 22.9e-3*990e12*0.79)
	}
	got := quantile(latencies(t, src(gpuExtra), 60*time.Second), 0.5)
	ref := quantile(latencies(t, src("    locked_clocks: {min: 1980, max: 1980}"), 60*time.Second), 0.5)
	return float64(got) / float64(ref)
}

// tailRatio is the p99 latency of a DNN service beside a bandwidth-bound
// training job on one H200 under MPS, over the same pair in two MIG
// instances (3g.71gb + 4g.71gb: SM partitioning).
func tailRatio(t *testing.T) float64 {
	src := func(gpu, inst0, inst1 string) string {
		return fmt.Sprintf(`name: tail
gpus:
  - model: H200-SXM5-141GB
    locked_clocks: {min: 1980, max: 1980}
%s
tenants:
  - name: svc
%s
    memory: 8GiB
    workload: {type: dnn, flops: 1e11, bytes: 2e9, max_batch: 4, arrival: {process: poisson, rate: 200}}
  - name: hog
%s
    memory: 8GiB
    workload: {type: training, flops: 1e10, bytes: 4e10}
`, gpu, inst0, inst1)
	}
	mps := latencies(t, src("    sharing: mps", "", ""), 20*time.Second)
	mig := latencies(t, src("    sharing: mig\n    mig: [{profile: 3g.71gb}, {profile: 4g.71gb}]", "    mig_instance: 0", "    mig_instance: 1"), 20*time.Second)
	return float64(quantile(mps, 0.99)) / float64(quantile(mig, 0.99))
}

// restartCost restarts an LLM client (16 GB of weights, memory as given)
// beside a 20 GiB neighbour on an H100 under MPS and returns the action
// record once it is done.
func restartCost(t *testing.T, memory string) Action {
	sc := mustParse(t, fmt.Sprintf(`name: rs
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - name: chat
    process: {pid: 7}
    memory: %s
    workload: {type: llm, params: 8e9, max_batch: 16, arrival: {process: poisson, rate: 4}}
  - {name: other, memory: 20GiB, workload: {type: dnn, flops: 1e10, arrival: {process: poisson, rate: 10}}}
`, memory))
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(10 * time.Second))
	if err := s.RestartClient(context.Background(), sc.GPUs[0].UUID, 7, ""); err != nil {
		t.Fatal(err)
	}
	s.AdvanceTo(s.Now().Add(40 * time.Second))
	acts := s.Actions()
	if len(acts) != 1 || !acts[0].Done {
		t.Fatalf("actions %+v, want one restart, done", acts)
	}
	t.Logf("%+v", acts[0])
	return acts[0]
}
