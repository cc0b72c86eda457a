package sim

import (
	"math"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestVGPUSlot: a VM's slot is the time slice, weight times under fixed
// share, backlog-longer under adaptive round robin, within [min, max]
// (max weight times under fixed share), and at most maxDuration where the
// product would leave int64's range: it wrapped, a weight of 4e9 with 3 s
// slices giving the heavier VM the shortest slot.
func TestVGPUSlot(t *testing.T) {
	ms := func(n float64) Duration { return Duration(n * float64(time.Millisecond)) }
	spec := func(policy gpu.VGPUPolicy, arr bool, slice, lo, hi Duration) *VGPUSpec {
		return &VGPUSpec{Policy: policy, ARR: arr, TimeSlice: slice, MinTimeSlice: lo, MaxTimeSlice: hi, AvgFactor: 4, Frequency: 1000}
	}
	for _, c := range []struct {
		name    string
		v       *VGPUSpec
		weight  uint32
		backlog int
		want    int64
	}{
		{"best effort", spec(gpu.VGPUPolicyBestEffort, false, ms(2), ms(1), ms(30)), 3, 100, int64(ms(2))},
		{"fixed share, weight 3", spec(gpu.VGPUPolicyFixedShare, false, ms(2), ms(1), ms(30)), 3, 0, int64(ms(6))},
		{"fixed share, weight past max", spec(gpu.VGPUPolicyFixedShare, false, ms(20), ms(1), ms(30)), 3, 0, int64(ms(60))},
		{"ARR, a backlog of 4", spec(gpu.VGPUPolicyBestEffort, true, ms(2), ms(1), ms(30)), 1, 4, int64(ms(4))},
		{"ARR, within max", spec(gpu.VGPUPolicyBestEffort, true, ms(2), ms(1), ms(30)), 1, 1000, int64(ms(30))},
		{"fixed share, 3 s slices of weight 4e9", spec(gpu.VGPUPolicyFixedShare, false, ms(3000), ms(1), ms(3000)), 4e9, 0, int64(maxDuration)},
		{"fixed share, the largest slice and weight", spec(gpu.VGPUPolicyFixedShare, false, maxVGPUTimeSlice, ms(1), maxVGPUTimeSlice), math.MaxUint32, 0, int64(maxDuration)},
		{"ARR, a slice of 2^62 ns and a backlog", spec(gpu.VGPUPolicyBestEffort, true, 1<<62, ms(1), 1<<62), 1, 10, int64(maxDuration)},
	} {
		if got := vgpuSlot(c.v, c.weight, c.backlog); got != c.want {
			t.Errorf("%s: slot %v, want %v", c.name, time.Duration(got), time.Duration(c.want))
		}
	}
}

// TestVGPUBoundsRefused: vGPU time slices over NVML's 32-bit nanoseconds
// and a VM weight over maxVMWeight are refused at their line; at the
// bounds they load. Each loaded before, and their product overflowed.
func TestVGPUBoundsRefused(t *testing.T) {
	scenario := func(vgpu, vm string) string {
		return "name: x\ngpus:\n  - {model: H100-SXM5-80GB, sharing: vgpu, vgpu: {policy: fixed-share, " + vgpu + "}}\ntenants:\n  - {name: a, vm: {" + vm + "}, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n"
	}
	for _, c := range []struct{ name, src, want string }{
		{"slices of 2000000h", scenario("timeslice: 2000000h, max_timeslice: 2500000h", "weight: 1"), "x.yaml:3: vGPU time slice bounds [1ms, 2500000h0m0s]: min must be at least 100us, max at least min and at most 4.294967295s"},
		{"max past NVML's", scenario("max_timeslice: 4294967296ns", "weight: 1"), "x.yaml:3: vGPU time slice bounds"},
		{"max at NVML's", scenario("timeslice: 3s, max_timeslice: 4294967295ns", "weight: 1"), ""},
		{"weight 4e9", scenario("timeslice: 3s, max_timeslice: 3s", "weight: 4000000000"), "x.yaml:5: vm.weight must be in [1, 1000], got 4000000000"},
		{"weight 1000", scenario("timeslice: 3s, max_timeslice: 3s", "weight: 1000"), ""},
	} {
		t.Run(c.name, func(t *testing.T) { wantParse(t, c.src, c.want) })
	}
}
