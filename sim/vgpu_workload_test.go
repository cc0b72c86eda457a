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

func TestVGPUPolicies(t *testing.T) {
	src := func(policy string, light bool) string {
		b := "workload: {type: training, flops: 2e12, bytes: 1e8}"
		if light {
			b = "workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}"
		}
		return fmt.Sprintf(`name: v
gpus: [{model: H100-SXM5-80GB, sharing: vgpu, locked_clocks: {min: 1980, max: 1980}, vgpu: {policy: %s, timeslice: 2ms}}]
tenants:
  - name: a
    vm: {weight: 3}
    memory: 8GiB
    workload: {type: training, flops: 2e12, bytes: 1e8}
  - name: b
    vm: {weight: 1}
    memory: 8GiB
    %s
`, policy, b)
	}
	share := func(policy string, light bool) (float64, float64) {
		s := mustNew(t, mustParse(t, src(policy, light)), Options{})
		s.AdvanceTo(s.Now().Add(5 * time.Second))
		w := s.Window()
		return w.Tenants[0].SMShare, w.Tenants[1].SMShare
	}
	// best effort is work conserving: next to an idle VM, a busy one gets
	// nearly all of the GPU
	if a, _ := share("best-effort", true); a < 0.95 {
		t.Errorf("best-effort next to an idle VM: %.3f", a)
	}
	// equal share keeps the idle VM's slots
	if a, _ := share("equal-share", true); a > 0.55 || a < 0.4 {
		t.Errorf("equal-share next to an idle VM: %.3f, want about half", a)
	}
	// fixed share follows the weights (3:1)
	a, b := share("fixed-share", false)
	if r := a / b; math.Abs(r-3) > 0.3 {
		t.Errorf("fixed-share 3:1 got %.3f / %.3f = %.2f", a, b, r)
	}
}

// TestVGPUSchedulerLog: each slot is logged, as NVML logs it, when it ends,
// with its runlist (one per VM), target slice, the run time within it, the
// VM's cumulative preemption time and weight; with adaptive round robin a VM with a
// backlog gets longer slices.
func TestVGPUSchedulerLog(t *testing.T) {
	for _, arr := range []bool{false, true} {
		sc := mustParse(t, fmt.Sprintf(`name: log
gpus: [{model: H100-SXM5-80GB, sharing: vgpu, vgpu: {policy: best-effort, arr: %v, timeslice: 2ms, avg_factor: 4}}]
tenants:
  - {name: a, vm: {weight: 2}, memory: 8GiB, workload: {type: dnn, flops: 5e11, arrival: {process: poisson, rate: 900}}}
  - {name: b, memory: 8GiB, workload: {type: training, flops: 2e12}}
`, arr))
		s := mustNew(t, sc, Options{})
		ctx := context.Background()
		s.Sample(ctx)
		s.AdvanceTo(s.Now().Add(2 * time.Second))
		r, _ := s.Sample(ctx)
		log := r.Devices[0].Scheduler.Log
		if len(log) != schedLogMax {
			t.Fatalf("arr=%v: %d log entries, want the newest %d", arr, len(log), schedLogMax)
		}
		longest := time.Duration(0)
		preempt, runTotal := map[uint32]time.Duration{}, map[uint32]time.Duration{}
		for i, e := range log {
			if e.RunTime > e.TargetTimeSlice || e.TargetTimeSlice < time.Millisecond || e.TargetTimeSlice > 30*time.Millisecond {
				t.Fatalf("arr=%v: entry %d %+v out of bounds", arr, i, e)
			}
			if i > 0 && e.Timestamp.Before(log[i-1].Timestamp) {
				t.Fatalf("arr=%v: log not in time order", arr)
			}
			// runlist = tenant index: a (weight 2) is 0, b (weight 1) is 1
			if want := map[uint32]uint32{0: 2, 1: 1}[e.Runlist]; e.Weight != want || want == 0 {
				t.Fatalf("entry %d: runlist %d weight %d", i, e.Runlist, e.Weight)
			}
			if e.Timestamp.After(r.Time) {
				t.Fatalf("entry %d stamped %v, after the sample %v", i, e.Timestamp, r.Time)
			}
			if e.CumulativePreemp < preempt[e.Runlist] {
				t.Fatalf("entry %d: runlist %d preemption went back from %v to %v", i, e.Runlist, preempt[e.Runlist], e.CumulativePreemp)
			}
			preempt[e.Runlist] = e.CumulativePreemp
			if e.RunTimeTotal < runTotal[e.Runlist]+e.RunTime {
				t.Fatalf("entry %d: runlist %d total run %v, want at least %v + this slot's %v", i, e.Runlist, e.RunTimeTotal, runTotal[e.Runlist], e.RunTime)
			}
			runTotal[e.Runlist] = e.RunTimeTotal
			longest = max(longest, e.TargetTimeSlice)
		}
		if preempt[0] == 0 || preempt[1] == 0 {
			t.Errorf("arr=%v: preemption per runlist %v; both VMs wait for each other", arr, preempt)
		}
		if arr && longest <= 2*time.Millisecond {
			t.Errorf("adaptive round robin never lengthened a slice for the backlogged VM")
		}
		if !arr && longest != 2*time.Millisecond {
			t.Errorf("fixed slices: longest target %v, want 2ms", longest)
		}
	}
}

// A VM's framebuffer is its type's size (default: the smallest C-series
// type that holds its memory); a VM over it is out of memory. A type
// that names no size reads no framebuffer size, as NVML reports none for
// a type whose size it cannot read: not the memory the VM uses, which the
// exporter would meter as the VM's profile share.
func TestVGPUFramebuffer(t *testing.T) {
	for _, tc := range []struct {
		name, tenants string
		typ           string
		fb, used      uint64
		oom           bool
	}{
		{"default and sized types", `
  - {name: a, memory: 15GB, workload: {type: training, flops: 1e12}}
  - {name: b, memory: 30GB, vm: {type: H100-20C}, workload: {type: training, flops: 1e12}}
`, "H100-20C", 20e9, 15e9, true},
		{"type of unknown size", `
  - {name: a, memory: 30GB, vm: {type: H100-custom}, workload: {type: training, flops: 1e12}}
`, "H100-custom", 0, 30e9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := mustParse(t, "name: fb\ngpus: [{model: H100-SXM5-80GB, sharing: vgpu}]\ntenants:"+tc.tenants)
			s := mustNew(t, sc, Options{})
			s.AdvanceTo(s.Now().Add(time.Second))
			r, _ := s.Sample(context.Background())
			d := r.Devices[0]
			if len(d.VGPUs) != 1 || d.VGPUs[0].Type != tc.typ || d.VGPUs[0].FramebufferBytes != tc.fb || d.VGPUs[0].FramebufferUsed == nil || *d.VGPUs[0].FramebufferUsed != tc.used {
				t.Fatalf("vGPUs %+v, want one %s with a framebuffer of %d bytes, %d used", d.VGPUs, tc.typ, tc.fb, tc.used)
			}
			oom := len(d.Events) == 1 && d.Events[0].Kind == gpu.EventOOM && strings.Contains(d.Events[0].Message, "framebuffer")
			if oom != tc.oom || (!oom && len(d.Events) != 0) {
				t.Fatalf("events %+v, want an OOM for the VM over its framebuffer: %v", d.Events, tc.oom)
			}
		})
	}
}

// Adaptive round robin observes the VMs' backlogs at its frequency: at
// 1 Hz the backlog seen at the start (none) sets the slices for the whole
// first second; at the default 1 kHz a backlog lengthens them at once.
// Parameters outside their bounds are refused, in a scenario and by
// SetVGPUScheduler, as NVML refuses them.
func TestVGPUARRFrequency(t *testing.T) {
	src := func(freq int) string {
		return fmt.Sprintf(`name: arr
gpus: [{model: H100-SXM5-80GB, sharing: vgpu, vgpu: {policy: best-effort, arr: true, timeslice: 2ms, avg_factor: 4, frequency: %d}}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: dnn, flops: 5e11, arrival: {process: poisson, rate: 900}}}
  - {name: b, memory: 8GiB, workload: {type: training, flops: 2e12}}
`, freq)
	}
	longest := func(freq int) time.Duration {
		s := mustNew(t, mustParse(t, src(freq)), Options{})
		ctx := context.Background()
		s.AdvanceTo(s.Now().Add(500 * time.Millisecond))
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sch := r.Devices[0].Scheduler
		if !sch.ARREnabled || sch.AvgFactor != 4 || sch.Frequency != 0 {
			t.Fatalf("readings: ARR %v, avg factor %d, frequency %d; want ARR with 4 and no frequency (NVML reads none)", sch.ARREnabled, sch.AvgFactor, sch.Frequency)
		}
		var l time.Duration
		for _, e := range sch.Log {
			l = max(l, e.TargetTimeSlice)
		}
		return l
	}
	if l := longest(1); l != 2*time.Millisecond {
		t.Errorf("ARR at 1 Hz: longest slice %v in the first 0.5 s, want 2ms (no backlog seen yet)", l)
	}
	if l := longest(1000); l <= 2*time.Millisecond {
		t.Errorf("ARR at 1 kHz: longest slice %v, want longer than 2ms for the backlogged VM", l)
	}

	for _, bad := range []string{
		"{policy: best-effort, arr: true, avg_factor: 61}",
		"{policy: best-effort, arr: true, frequency: 1001}",
		"{policy: equal-share, arr: true}",
	} {
		_, err := ParseScenario("bad.yaml", []byte("name: x\ngpus:\n  - model: H100-SXM5-80GB\n    sharing: vgpu\n    vgpu: "+bad+"\ntenants:\n  - {name: a, memory: 1GiB, workload: {type: training, flops: 1e9}}\n"))
		if err == nil || !strings.Contains(err.Error(), "bad.yaml:5") {
			t.Errorf("vgpu %s: %v, want an error at bad.yaml:5", bad, err)
		}
	}
	s := mustNew(t, mustParse(t, src(10)), Options{})
	uuid := s.Scenario().GPUs[0].UUID
	for _, set := range []gpu.VGPUSchedulerSetting{
		{Policy: "best-effort", ARREnabled: true, AvgFactor: 61},
		{Policy: "best-effort", ARREnabled: true, Frequency: 5000},
		{Policy: "fixed-share", ARREnabled: true},
	} {
		if err := s.SetVGPUScheduler(context.Background(), uuid, set); err == nil || errors.Is(err, gpu.ErrBusy) {
			t.Errorf("SetVGPUScheduler(%+v): %v, want an invalid-argument error before the busy check", set, err)
		}
	}
}

// A VM's weight stretches only fixed-share slots: under best-effort with
// ARR, a heavily backlogged VM of weight 3 gets at most the maximum slice.
func TestVGPUARRSliceWithinMax(t *testing.T) {
	s := mustNew(t, mustParse(t, `name: cap
gpus: [{model: H100-SXM5-80GB, sharing: vgpu, vgpu: {policy: best-effort, arr: true, timeslice: 2ms, max_timeslice: 30ms, avg_factor: 1}}]
tenants:
  - {name: a, vm: {weight: 3}, memory: 8GiB, workload: {type: dnn, flops: 5e11, arrival: {process: poisson, rate: 5000}}}
  - {name: b, memory: 8GiB, workload: {type: training, flops: 2e12}}
`), Options{})
	ctx := context.Background()
	s.Sample(ctx)
	s.AdvanceTo(s.Now().Add(2 * time.Second))
	r, _ := s.Sample(ctx)
	var longest time.Duration
	for _, e := range r.Devices[0].Scheduler.Log {
		longest = max(longest, e.TargetTimeSlice)
	}
	if longest != 30*time.Millisecond {
		t.Errorf("longest target slice %v, want the 30ms maximum (reached, not exceeded)", longest)
	}
}

// With ARR off the average factor and frequency are not checked (NVML
// checks them only with ARR on) and the readings carry neither.
func TestVGPUARROffIgnoresParameters(t *testing.T) {
	sc := mustParse(t, `name: off
gpus: [{model: H100-SXM5-80GB, sharing: vgpu, vgpu: {policy: equal-share, avg_factor: 500, frequency: 5000}}]
tenants:
  - {name: a, memory: 8GiB, workload: {type: training, flops: 1e12}}
`)
	s := mustNew(t, sc, Options{})
	r, _ := s.Sample(context.Background())
	if sch := r.Devices[0].Scheduler; sch.ARREnabled || sch.AvgFactor != 0 || sch.Frequency != 0 {
		t.Errorf("scheduler readings %+v: want ARR off, no average factor or frequency", sch)
	}
}
