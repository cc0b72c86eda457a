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

// TestCalibrationTable: every FACTS.md figure the model claims, measured
// through the model (not read back from its constants), with the FACTS.md
// line and the tolerance on each row. The time-slicing shares (line 32-34),
// MIG isolation (line 20-21), the MPS cap (line 42-45) and the clock ramp
// (line 60-61) have their own tests in calib_test.go.
func TestCalibrationTable(t *testing.T) {
	const locked = "    locked_clocks: {min: 1980, max: 1980}"
	h100 := "H100-SXM5-80GB"
	h200 := "H200-SXM5-141GB"
	rows := []struct {
		facts   string
		measure func(t *testing.T) float64
		lo, hi  float64 // the tolerance: the accepted range
	}{
		{"FACTS.md line 14-15: bf16 matmul 769-798 TFLOP/s on H200 (TFLOP/s, range as measured)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h200, locked, "", "1e13", "1e8"), 5*time.Second) * 1e13 / 1e12
			}, 769, 798},
		{"FACTS.md line 14: device-to-device copy ~4.3 TB/s on H200 (TB/s, ±0.1)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h200, locked, "", "1e9", "4e10"), 5*time.Second) * 4e10 / 1e12
			}, 4.2, 4.4},
		{"FACTS.md line 11: H100 3.35 TB/s peak, same efficiency as the H200 copy (TB/s, 0.9 x 3.35 ±0.1)",
			func(t *testing.T) float64 {
				return stepRate(t, solo(h100, locked, "", "1e9", "4e10"), 5*time.Second) * 4e10 / 1e12
			}, 2.915, 3.115},
		{"FACTS.md line 15-16: idle SM clock 345 MHz (MHz after 1 s idle, ±1)",
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
		{"FACTS.md line 15-16: 1980 MHz under load (MHz, mean over the first 2 s of load on a cool GPU, -3%: clock noise)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, solo(h200, "", "", "1e13", "1e8")), Options{})
				s.AdvanceTo(s.Now().Add(2 * time.Second))
				return s.Window().GPUs[0].SMClockMHz
			}, 1920, 1980},
		{"FACTS.md line 16: H200 memory clock 3201 MHz (MHz, exact)",
			func(t *testing.T) float64 {
				s := mustNew(t, mustParse(t, solo(h200, "", "", "1e13", "1e8")), Options{})
				r, _ := s.Sample(context.Background())
				return *r.Devices[0].MemClockHz / 1e6
			}, 3201, 3201},
		{"FACTS.md line 20: H200 3g.71gb = 60 of 132 SMs (compute-bound throughput vs the whole GPU, ±1%)",
			func(t *testing.T) float64 { return migSMs(t, 0) }, 60 * 0.99, 60 * 1.01},
		{"FACTS.md line 20: H200 4g.71gb = 64 of 132 SMs (compute-bound throughput vs the whole GPU, ±1%)",
			func(t *testing.T) float64 { return migSMs(t, 1) }, 64 * 0.99, 64 * 1.01},
		{"FACTS.md line 25-26: default time slice 1024 us (us between context switches of 2 saturating tenants, less the switch, ±3%)",
			func(t *testing.T) float64 {
				_, slice := switchFigures(t, 2, "", time.Second)
				return float64(slice) / 1e3
			}, 1024 * 0.97, 1024 * 1.03},
		{"FACTS.md line 27-28: long time slice (lead 30 ms) (ms between switches, ±3%)",
			func(t *testing.T) float64 {
				_, slice := switchFigures(t, 2, "long", 3*time.Second)
				return float64(slice) / 1e6
			}, 30 * 0.97, 30 * 1.03},
		{"FACTS.md line 33: context switch 50-200 us (us per switch, 2 tenants)",
			func(t *testing.T) float64 {
				c, _ := switchFigures(t, 2, "", time.Second)
				return float64(c) / 1e3
			}, 50, 200},
		{"FACTS.md line 33-34: context switch 50-200 us, growing with the tenant count (us per switch, 8 tenants)",
			func(t *testing.T) float64 {
				c, _ := switchFigures(t, 8, "", time.Second)
				return float64(c) / 1e3
			}, 150, 200},
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
