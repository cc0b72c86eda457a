package tuner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// vgpuOnly has the vGPU scheduler and nothing else, as the NVML backend
// has no MPS or time-slice actuator.
type vgpuOnly struct{ f fakeControl }

func (v *vgpuOnly) SetVGPUScheduler(ctx context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return v.f.SetVGPUScheduler(ctx, uuid, s)
}

func TestActuatorsOf(t *testing.T) {
	full, other, vo := &fakeControl{}, &fakeControl{}, &vgpuOnly{}
	tests := []struct {
		name          string
		backends      []any
		mps, vgpu, ts any // want; nil for none
	}{
		{"none", nil, nil, nil, nil},
		{"not an actuator", []any{struct{}{}}, nil, nil, nil},
		{"one backend has all", []any{full}, full, full, full},
		{"first wins", []any{full, other}, full, full, full},
		{"partial backend first", []any{vo, full}, full, vo, full},
		{"partial backend alone", []any{vo}, nil, vo, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ActuatorsOf(tc.backends...)
			for _, c := range []struct {
				what      string
				got, want any
			}{{"MPS", a.MPS, tc.mps}, {"VGPUScheduler", a.VGPUScheduler, tc.vgpu}, {"TimeSlice", a.TimeSlice, tc.ts}} {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

// A mechanism the host has no actuator for is refused as not supported:
// the decision is reported, not applied, and never tried again.
func TestBaselineWithoutActuators(t *testing.T) {
	devs := []gpu.Device{
		{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1))}},
		{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort}},
		{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: gpu.TimeSliceLong},
	}
	vo := &vgpuOnly{}
	p := NewStaticEqual()
	ctx := context.Background()
	decs, err := p.Observe(ctx, ActuatorsOf(vo), snapshot(t0, devs, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range decs {
		got = append(got, fmt.Sprintf("%s %s %v", d.GPU, d.Knob, d.Applied))
		if !d.Applied && !strings.Contains(d.Reason, "not applied: no backend of this host drives "+string(d.Knob)) {
			t.Errorf("%s %s: reason %q, want it to name the missing actuator", d.GPU, d.Knob, d.Reason)
		}
	}
	want := "[GPU-a mps_active_threads false GPU-a mps_active_threads false GPU-v vgpu_scheduler true GPU-t compute_timeslice false]"
	if fmt.Sprint(got) != want {
		t.Errorf("decisions %v, want %s", got, want)
	}
	again, err := p.Observe(ctx, ActuatorsOf(vo), snapshot(t0.Add(2*DefaultRetryAfter), devs, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range again {
		if d.Knob != gpu.KnobVGPUScheduler {
			t.Errorf("retried without an actuator: %v", d)
		}
	}
}
