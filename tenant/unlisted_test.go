package tenant

import (
	"math/rand"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestCameAndWentGoesToUnassigned: a process that started and exited
// between two samples is listed at neither end; the backend says the
// device had its activity (gpu.Device.UnlistedActivity). The tenants
// present get at most what their own samples allow, as when a listed
// process leaves, and unassigned the rest.
func TestCameAndWentGoesToUnassigned(t *testing.T) {
	const yaml = `tenants:
  - name: a
    selectors: [{executable: vllm}]
  - name: b
    selectors: [{executable: python3}]
`
	for _, mode := range []gpu.SharingMode{gpu.SharingTimeSlice, gpu.SharingMPS} {
		t.Run(string(mode), func(t *testing.T) {
			mps := mode == gpu.SharingMPS
			b := mustBuilder(t, yaml, BuilderOptions{})
			b.Build(tsDevice(mode, 100, 0.3, 0.1, tsProc(1, "vllm", 0.3, 0.1, mps)), gpu.SamplerStats{})
			// between the samples a python3 job (b's) ran for half the
			// interval and exited: the device counted it, no list has it
			r := tsDevice(mode, 101, 0.8, 0.4, tsProc(1, "vllm", 0.3, 0.1, mps))
			r.Devices[0].UnlistedActivity = true
			s := b.Build(r, gpu.SamplerStats{})
			a, un := usageOf(t, s, "a", ""), usageOf(t, s, Unassigned, "")
			checkF(t, "a kernel busy", a.KernelBusy, 0.3)
			checkF(t, "a SM", a.SMActive, 0.3)
			checkF(t, "a DRAM", a.DRAMActive, 0.1)
			checkF(t, "unassigned SM", un.SMActive, 0.8-0.3)
			checkF(t, "unassigned DRAM", un.DRAMActive, 0.4-0.1)
			if un.Processes != 0 || len(s.Usage) != 2 {
				t.Errorf("usage %+v", s.Usage)
			}
			checkConserved(t, s.Meters, s.GPUMeters)
		})
	}
}

// TestOddIntervalLeavesFit: an interval whose device figures hold work no
// listed context's sample accounts for (a job that came and went, a
// context listed without an SM sample) is not fitted: one such interval
// would skew the other tenants' SM figures for the whole footprint window.
func TestOddIntervalLeavesFit(t *testing.T) {
	const yaml = `tenants:
  - name: a
    selectors: [{executable: vllm}]
  - name: b
    selectors: [{executable: python3}]
`
	const odd = 10 // the odd interval's step
	for _, tc := range []struct {
		name string
		// spoil makes step odd's device and b's process odd
		spoil func(d *gpu.Device, pb *gpu.Process)
	}{
		{"came and went", func(d *gpu.Device, _ *gpu.Process) {
			// a 1-second job ran and exited between two samples
			*d.Activity.SMActive += 0.3
			d.UnlistedActivity = true
		}},
		{"no sample of b", func(_ *gpu.Device, pb *gpu.Process) { pb.SMUtil = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, yaml, BuilderOptions{})
			rng := rand.New(rand.NewSource(1))
			for step := range odd + footprintWindow {
				ba, bb := 0.2+0.6*rng.Float64(), 0.2+0.6*rng.Float64()
				pa := gpu.Process{PID: 1, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(ba), MemUtil: gpu.Float(0.1)}
				pb := gpu.Process{PID: 2, Name: "python3", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(bb), MemUtil: gpu.Float(0.1)}
				// time-slicing: one context at a time; footprints 0.2
				// (a) and 0.8 (b)
				d := gpu.Device{
					Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice,
					Activity: gpu.Activity{SMActive: gpu.Float(ba*0.2 + bb*0.8), DRAMActive: gpu.Float(0.2)},
				}
				if step == odd {
					tc.spoil(&d, &pb)
				}
				d.Processes = []gpu.Process{pa, pb}
				r := &gpu.Readings{Time: time.Unix(int64(100+step), 0), Interval: time.Second, Devices: []gpu.Device{d}}
				s := b.Build(r, gpu.SamplerStats{})
				if step <= odd {
					continue
				}
				if got := *usageOf(t, s, "a", "").SMActive / (ba * 0.2); got < 0.95 || got > 1.05 {
					t.Errorf("step %d (%d after the odd interval): a's SM figure is %.2fx its truth", step, step-odd, got)
				}
			}
		})
	}
}
