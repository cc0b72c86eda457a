package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// saturating returns a scenario with n compute-bound training tenants on one
// H100 shared by mode.
func saturating(mode string, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: sat\ngpus:\n  - model: H100-SXM5-80GB\n    sharing: %s\n    locked_clocks: {min: 1980, max: 1980}\n%s", mode, extra)
	b.WriteString("tenants:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: t%d\n    memory: 8GiB\n    workload: {type: training, flops: 2e12, bytes: 1e8}\n", i)
	}
	return b.String()
}

// work runs src for d and returns each tenant's work in the window.
func work(t *testing.T, src string, d time.Duration) []float64 {
	t.Helper()
	s := mustNew(t, mustParse(t, src), Options{})
	s.AdvanceTo(s.Now().Add(d))
	var out []float64
	for _, tw := range s.Window().Tenants {
		out = append(out, tw.Work)
	}
	return out
}

func quantile(l []time.Duration, q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

// TestCalibrationTimeSlice: each row cites docs/calibration.md
// (time-slicing) and states its tolerance.
func TestCalibrationTimeSlice(t *testing.T) {
	solo := work(t, saturating("time-slice", 1, ""), 10*time.Second)[0]
	rows := []struct {
		facts     string
		n         int
		each, tol float64 // each tenant's fraction of solo
	}{
		{"time-slicing: two saturating tenants each got 0.459 of solo (tolerance 0.03)", 2, 0.46, 0.03},
		{"time-slicing: three got 0.305 each (tolerance 0.03)", 3, 0.305, 0.03},
		{"time-slicing: overhead ~15% at 8 tenants (tolerance 4 points)", 8, 0.85 / 8, 0.04 / 8},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%d tenants", r.n), func(t *testing.T) {
			ws := work(t, saturating("time-slice", r.n, ""), 10*time.Second)
			sum := 0.0
			for i, w := range ws {
				f := w / solo
				sum += f
				if math.Abs(f-r.each) > r.tol {
					t.Errorf("%s: tenant %d got %.4f of solo, want %.3f ± %.3f", r.facts, i, f, r.each, r.tol)
				}
			}
			if sum > 1 {
				t.Errorf("shares sum to %.4f > 1", sum)
			}
			if sum > 0.95 {
				t.Errorf("total work %.4f of solo: no switching overhead", sum)
			}
			t.Logf("%s: total %.4f of solo", r.facts, sum)
		})
	}
}

// TestCalibrationMIGIsolation: docs/calibration.md, MIG (instances are fixed
// partitions): a load step in one instance leaves the other instance's
// p50/p99 latency unchanged (tolerance 2%). Clocks are device-wide on real
// hardware as here, so they are locked to take DVFS out of the comparison.
func TestCalibrationMIGIsolation(t *testing.T) {
	src := func(rate int) string {
		return fmt.Sprintf(`name: mig
gpus:
  - model: H200-SXM5-141GB
    sharing: mig
    locked_clocks: {min: 1980, max: 1980}
    mig: [{profile: 3g.71gb}, {profile: 4g.71gb}]
tenants:
  - name: ref
    mig_instance: 0
    memory: 20GiB
    workload: {type: dnn, flops: 2e11, bytes: 2e9, max_batch: 4, arrival: {process: poisson, rate: 200}}
  - name: noisy
    mig_instance: 1
    memory: 20GiB
    workload: {type: dnn, flops: 4e11, bytes: 4e9, max_batch: 8, arrival: {process: poisson, rate: 10}}
events:
  - {at: 5s, tenant: noisy, rate: %d}
`, rate)
	}
	lat := func(rate int) (p50, p99 time.Duration, noisySM float64) {
		s := mustNew(t, mustParse(t, src(rate)), Options{})
		s.AdvanceTo(s.Now().Add(5 * time.Second))
		s.Window()
		s.AdvanceTo(s.Now().Add(20 * time.Second))
		w := s.Window()
		l := w.Tenants[0].Latencies
		return quantile(l, 0.5), quantile(l, 0.99), w.Tenants[1].SMShare
	}
	b50, b99, bsm := lat(10)
	a50, a99, asm := lat(200)
	if asm < 3*bsm {
		t.Fatalf("the load step did not load the other instance: SM share %.3f -> %.3f", bsm, asm)
	}
	for _, c := range []struct {
		q             string
		before, after time.Duration
	}{{"p50", b50, a50}, {"p99", b99, a99}} {
		d := math.Abs(float64(c.after-c.before)) / float64(c.before)
		t.Logf("%s of the quiet instance: %v before, %v after the step next door (%.2f%%)", c.q, c.before, c.after, 100*d)
		if d > 0.02 {
			t.Errorf("%s of the quiet instance moved %.1f%% (%v -> %v) after a load step next door", c.q, 100*d, c.before, c.after)
		}
	}
}

// mpsPair is a scenario of n training clients on one H100 shared by mode,
// each with an active-thread cap of 0.5 under MPS.
func mpsPair(mode string, n int, flops, bytes string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: mps\ngpus:\n  - model: H100-SXM5-80GB\n    sharing: %s\n    locked_clocks: {min: 1980, max: 1980}\ntenants:\n", mode)
	threads := ""
	if mode == "mps" {
		threads = "    mps_active_threads: 0.5\n"
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: t%d\n%s    memory: 8GiB\n    workload: {type: training, flops: %s, bytes: %s}\n", i, threads, flops, bytes)
	}
	return b.String()
}

// TestCalibrationMPSBandwidth: two bandwidth-bound MPS clients lose about
// 30% against time-slicing the same pair (docs/calibration.md, MPS:
// Villarrubia et al. 2026; ±5 points), while compute-bound clients within
// their SM caps do not slow down (±3%: service-time noise).
func TestCalibrationMPSBandwidth(t *testing.T) {
	sum := func(ws []float64) float64 {
		total := 0.0
		for _, w := range ws {
			total += w
		}
		return total
	}
	mps := sum(work(t, mpsPair("mps", 2, "1e9", "2e10"), 5*time.Second))
	ts := sum(work(t, mpsPair("time-slice", 2, "1e9", "2e10"), 5*time.Second))
	t.Logf("two bandwidth-bound clients: MPS %.3f of time-slicing", mps/ts)
	if r := mps / ts; math.Abs(r-0.70) > 0.05 {
		t.Errorf("two bandwidth-bound clients under MPS: %.3f of time-slicing, want 0.70 ± 0.05", r)
	}
	calone := work(t, mpsPair("mps", 1, "2e12", "1e8"), 5*time.Second)[0]
	cpair := work(t, mpsPair("mps", 2, "2e12", "1e8"), 5*time.Second)
	for i, w := range cpair {
		if math.Abs(w/calone-1) > 0.03 {
			t.Errorf("compute-bound client %d within its 50%% cap: %.0f steps alone, %.0f next to another; want ±3%%", i, calone, w)
		}
	}
}

// TestCalibrationClocks: docs/calibration.md, clocks: a 22.9 ms kernel takes +12%
// after 100 ms idle (tolerance 3 points); locking clocks removes the ramp,
// which shrinks p99/p50.
func TestCalibrationClocks(t *testing.T) {
	kernel := 22900 * time.Microsecond
	src := func(locked, rate string) string {
		return fmt.Sprintf(`name: clk
gpus:
  - model: H100-SXM5-80GB
%s
tenants:
  - name: a
    memory: 8GiB
    workload: {type: dnn, flops: %g, bytes: 1e8, arrival: {process: poisson, rate: %s}}
`, locked, kernel.Seconds()*990e12*0.79, rate)
	}
	run := func(locked, rate string) []time.Duration {
		s := mustNew(t, mustParse(t, src(locked, rate)), Options{})
		s.AdvanceTo(s.Now().Add(60 * time.Second))
		return s.Window().Tenants[0].Latencies
	}
	lockedL := run("    locked_clocks: {min: 1980, max: 1980}", "1")
	coldL := run("", "1") // mean gap 1 s: nearly every request after > 100 ms idle
	warm, cold := quantile(lockedL, 0.5), quantile(coldL, 0.5)
	r := float64(cold) / float64(warm)
	t.Logf("22.9 ms request after idle: %v, with locked clocks %v (x%.3f)", cold, warm, r)
	if math.Abs(r-1.12) > 0.03 {
		t.Errorf("after idle: %v vs locked %v = %.3f, want 1.12 ± 0.03", cold, warm, r)
	}
	// 1 ms requests at 30/s: most find a warm clock, a few (after a gap of
	// 50 ms or more) a cooling or cold one
	kernel = time.Millisecond
	unl := run("", "30")
	lck := run("    locked_clocks: {min: 1980, max: 1980}", "30")
	ru := float64(quantile(unl, 0.99)) / float64(quantile(unl, 0.5))
	rl := float64(quantile(lck, 0.99)) / float64(quantile(lck, 0.5))
	t.Logf("p99/p50 locked %.3f unlocked %.3f", rl, ru)
	if rl >= 0.85*ru {
		t.Errorf("p99/p50 locked %.3f, unlocked %.3f: locking should shrink it", rl, ru)
	}
}

// TestMPSCapAppliesAfterRestart: docs/calibration.md, MPS: the active-thread
// fraction is fixed when a context is created.
func TestMPSCapAppliesAfterRestart(t *testing.T) {
	sc := mustParse(t, `name: cap
gpus:
  - model: H100-SXM5-80GB
    sharing: mps
    locked_clocks: {min: 1980, max: 1980}
control:
  migration_time: 500ms
  load_bandwidth: 16GiB
  checkpoint_bandwidth: 1e15
  actuators: {mps: {latency: 0s, failure_rate: 0}, hook: {latency: 0s, failure_rate: 0}}
tenants:
  - name: a
    process: {pid: 100}
    memory: 8GiB
    workload: {type: training, flops: 2e12, bytes: 1e8, checkpoint_interval: 1ms}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	step := func() float64 {
		s.AdvanceTo(s.Now().Add(5 * time.Second))
		return s.Window().Tenants[0].Work
	}
	full := step()
	if err := s.SetMPSActiveThreads(ctx, uuid, 100, 0.25); err != nil {
		t.Fatal(err)
	}
	if w := step(); math.Abs(w-full)/full > 0.01 {
		t.Fatalf("the cap changed throughput before a restart: %.0f -> %.0f", full, w)
	}
	r, _ := s.Sample(ctx)
	if got := *r.Devices[0].Processes[0].MPSActiveThreads; got != 1 {
		t.Fatalf("reported active threads %v before restart, want 1", got)
	}
	if err := s.RestartClient(ctx, uuid, 100, ""); err != nil {
		t.Fatal(err)
	}
	w := step() // includes the 1 s restart (start and checkpoint load)
	if want := full * 0.25 * 4 / 5; math.Abs(w-want)/want > 0.05 {
		t.Fatalf("after restart: %.0f steps, want ~%.0f (25%% cap, 1 s restart)", w, want)
	}
	if err := s.SetMPSActiveThreads(ctx, uuid, 100, 1.5); err == nil {
		t.Error("fraction 1.5 accepted")
	}
	if err := s.SetMPSActiveThreads(ctx, uuid, 999, 0.5); err == nil {
		t.Error("unknown PID accepted")
	}
}

func TestMIGReconfigure(t *testing.T) {
	sc := mustParse(t, `name: re
gpus:
  - model: H200-SXM5-141GB
    sharing: mig
    mig: [{profile: 3g.71gb}, {profile: 4g.71gb}]
tenants:
  - name: a
    memory: 8GiB
    workload: {type: dnn, flops: 1e10, arrival: {process: poisson, rate: 10}}
events:
  - {at: 2s, tenant: a, action: stop}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	err := s.ConfigureMIG(ctx, uuid, []string{"7g.141gb"})
	if !errors.Is(err, gpu.ErrBusy) {
		t.Fatalf("reconfigure with a process running: %v, want ErrBusy", err)
	}
	s.AdvanceTo(s.Now().Add(3 * time.Second))
	if err := s.ConfigureMIG(ctx, uuid, []string{"4g.71gb", "4g.71gb"}); err == nil || errors.Is(err, gpu.ErrBusy) {
		t.Fatalf("a layout that does not fit: %v", err)
	}
	if err := s.ConfigureMIG(ctx, uuid, []string{"7g.141gb"}); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Sample(ctx)
	d := r.Devices[0]
	if len(d.MIG) != 1 || d.MIG[0].Profile != "7g.141gb" || d.MIG[0].UUID == sc.GPUs[0].MIG[0].UUID {
		t.Fatalf("after reconfigure: %+v", d.MIG)
	}
	found := false
	for _, e := range d.Events {
		found = found || e.Kind == gpu.EventReconf
	}
	if !found {
		t.Error("no reconfigure event")
	}
}

func TestVGPUSchedulerRefusedWhileVMsRun(t *testing.T) {
	sc := mustParse(t, `name: v
gpus:
  - model: H100-SXM5-80GB
    sharing: vgpu
    vgpu: {policy: best-effort}
tenants:
  - name: a
    memory: 8GiB
    workload: {type: dnn, flops: 1e12, arrival: {process: poisson, rate: 100}}
  - name: b
    memory: 8GiB
    workload: {type: dnn, flops: 1e12, arrival: {process: poisson, rate: 100}}
events:
  - {at: 2s, tenant: a, action: stop}
  - {at: 2s, tenant: b, action: stop}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	uuid := sc.GPUs[0].UUID
	set := gpu.VGPUSchedulerSetting{Policy: "equal-share", TimeSlice: 4 * time.Millisecond}
	s.AdvanceTo(s.Now().Add(time.Second))
	r, _ := s.Sample(ctx)
	if sch := r.Devices[0].Scheduler; sch == nil || len(sch.Log) == 0 || len(r.Devices[0].VGPUs) != 2 {
		t.Fatalf("vGPU readings: scheduler %+v, %d vGPUs", sch, len(r.Devices[0].VGPUs))
	}
	if err := s.SetVGPUScheduler(ctx, uuid, set); !errors.Is(err, gpu.ErrBusy) {
		t.Fatalf("scheduler change with VMs running: %v, want ErrBusy", err)
	}
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	if err := s.SetVGPUScheduler(ctx, uuid, set); err != nil {
		t.Fatal(err)
	}
	r, _ = s.Sample(ctx)
	if p := r.Devices[0].Scheduler.Policy; p != "equal-share" {
		t.Fatalf("policy %q after change", p)
	}
	if err := s.SetComputeTimeSlice(ctx, uuid, "long"); !errors.Is(err, gpu.ErrNotSupported) {
		t.Fatalf("compute time slice on a vGPU host: %v", err)
	}
}

// TestRampStepClock: a busy step's clock is the time-weighted mean of the
// ramp within it (integrated here in 1 us slices), whether the ramp ends
// inside the step or runs past it; steadyUntil lets a step in which a short
// ramp ends reach the end of the clock-noise period, but not a step from
// idle (the ramp is long) nor the first after idleness (the power limit has
// no activity estimate yet).
func TestRampStepClock(t *testing.T) {
	m := modelByName("H100-SXM5-80GB")
	rate := (m.MaxClockMHz - m.IdleClockMHz) / rampNs // MHz per ns
	integrated := func(from, target float64, dt int64) float64 {
		sum, n := 0.0, 0
		for x := int64(500); x < dt; x += 1000 { // slice midpoints
			sum += min(target, from+rate*float64(x))
			n++
		}
		return sum / float64(n)
	}
	cases := []struct {
		name         string
		from, target float64
		dt           int64
	}{
		{"at target", 1900, 1900, stepNs},
		{"ramp past the step", m.IdleClockMHz, m.MaxClockMHz, stepNs},
		{"ramp ends inside", 1800, 1900, 10_000_000},
		{"ramp ends inside a long step", 1900, 1960, jitterPeriodNs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &gpuState{m: m, clk: c.from}
			g.updateClock(c.dt, true, c.target, m.IdleClockMHz, 0)
			want := integrated(c.from, c.target, c.dt)
			wantEnd := min(c.target, c.from+rate*float64(c.dt))
			if math.Abs(g.clock-want) > 1e-3 || math.Abs(g.clk-wantEnd) > 1e-6 {
				t.Errorf("clock %.6f, end %.6f; want %.6f, %.6f", g.clock, g.clk, want, wantEnd)
			}
		})
	}
	// a noise-sized step up (40 MHz, 0.16 ms of ramp) keeps the long step;
	// a ramp from idle, or no activity estimate, does not
	g := &gpuState{m: m, clk: 1900, actC: 0.5}
	if got := g.steadyUntil(0, true, 1940, m.IdleClockMHz, 0); got != jitterPeriodNs {
		t.Errorf("short ramp: step to %d, want %d", got, jitterPeriodNs)
	}
	g.actC = 0
	if got := g.steadyUntil(0, true, 1940, m.IdleClockMHz, 0); got != stepNs {
		t.Errorf("first step after idleness: step to %d, want %d", got, stepNs)
	}
	g.clk, g.actC = m.IdleClockMHz, 0.5
	if got := g.steadyUntil(0, true, m.MaxClockMHz, m.IdleClockMHz, 0); got != stepNs {
		t.Errorf("ramp from idle: step to %d, want %d", got, stepNs)
	}
}

// TestClockHoldsFromLastKernel: after a lone request the SM clock holds for
// holdNs from the end of its kernel, not from the end of the step it ran
// in, then decays over decayNs (docs/calibration.md, clocks). The request's
// end is found in a run advanced 1 ms at a time; a second run advances
// past it in one go, as a sampling loop does, and must show the same
// decay.
func TestClockHoldsFromLastKernel(t *testing.T) {
	const src = `name: hold
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 2e13, arrival: {process: poisson, rate: 0.0001}}}
`
	// a 20 ms request at 1 s (its clock ramps to the top) and another at
	// 2 s, whose end the clock is watched after
	run := func(advance func(s *Simulator, to int64)) *Simulator {
		s := mustNew(t, mustParse(t, src), Options{Seed: 1})
		for _, at := range []int64{1e9, 2e9} {
			advance(s, at)
			s.tenants[0].nextArr = s.now
		}
		return s
	}
	fine := run(func(s *Simulator, to int64) {
		for s.now < to {
			s.AdvanceTo(s.Now().Add(time.Millisecond))
		}
	})
	var done int64
	for done == 0 {
		n := fine.tenants[0].completed
		fine.AdvanceTo(fine.Now().Add(time.Millisecond))
		if fine.tenants[0].completed > n {
			done = fine.now // within 1 ms
		}
		if fine.now > 3e9 {
			t.Fatal("the request at 2 s did not complete")
		}
	}
	coarse := run(func(s *Simulator, to int64) { s.AdvanceTo(s.Now().Add(time.Duration(to - s.now))) })
	at := done + holdNs + decayNs/2
	coarse.AdvanceTo(coarse.Now().Add(time.Duration(at - coarse.now)))
	m := coarse.gpus[0].m
	// half the decay from where the request left the clock (its target,
	// within the noise), within the 1 ms the end is known to
	top := m.MaxClockMHz
	want := top - (m.MaxClockMHz-m.IdleClockMHz)/2
	got := coarse.gpus[0].clk
	tol := 2*jitterAmp*top + (m.MaxClockMHz-m.IdleClockMHz)*float64(stepNs)/decayNs
	t.Logf("request done at %v; clock %.0f MHz at %v after it, want %.0f ± %.0f", time.Duration(done), got, time.Duration(at-done), want, tol)
	if math.Abs(got-want) > tol {
		t.Errorf("clock %.0f MHz half-way through the decay, want %.0f ± %.0f: the hold did not start at the last kernel", got, want, tol)
	}
}

// TestPowerCapAfterIdleness: a gappy compute-bound service under a 300 W
// limit with locked clocks runs as slowly when the model advances a second
// at a time (steps up to the clock-noise period) as when it advances 1 ms
// at a time: the first step after an idle gap, which has no activity
// estimate for the power limit, is a short one.
func TestPowerCapAfterIdleness(t *testing.T) {
	const src = `name: capped
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}, power_limit: 300}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 2.27e13, arrival: {process: poisson, rate: 5}}}
`
	p50 := func(step time.Duration) time.Duration {
		s := mustNew(t, mustParse(t, src), Options{Seed: 2})
		start := s.Now()
		for d := step; d <= 60*time.Second; d += step {
			s.AdvanceTo(start.Add(d))
		}
		lat := s.Window().Tenants[0].Latencies
		if len(lat) < 100 {
			t.Fatalf("%d requests in 60 s", len(lat))
		}
		return lat[len(lat)/2]
	}
	fine, coarse := p50(time.Millisecond), p50(time.Second)
	t.Logf("p50 %v advancing 1 ms at a time, %v a second at a time", fine, coarse)
	if r := float64(coarse) / float64(fine); r < 0.97 || r > 1.03 {
		t.Errorf("p50 %v with long steps against %v with 1 ms steps (x%.3f): the power limit does not act alike", coarse, fine, r)
	}
}
