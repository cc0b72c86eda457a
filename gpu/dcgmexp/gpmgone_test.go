package dcgmexp

import (
	"context"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The NVML backend's activity as GPM works, misses one sample (source kept
// "gpm", no ratio) and stops for good (source ""): DCGM's ratios stand in
// only then, for the whole GPU and for a MIG instance.
func TestDCGMRatiosFillOnceGPMStops(t *testing.T) {
	srv := serve(t, readFixture(t, "dcgm-mixed.prom"), nil)
	inner := &fakeSource{}
	s, err := New(inner, Options{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name   string
		inner  gpu.Activity
		source string
		sm     float64 // of the GPU; its MIG instance has DCGM's 0.5 where DCGM fills
	}{
		{"GPM ratio", gpu.Activity{SMActive: gpu.Float(0.3), Source: "gpm"}, "gpm", 0.3},
		{"GPM missed a sample", gpu.Activity{Source: "gpm"}, "gpm", -1},
		{"GPM stopped", gpu.Activity{}, ActivityDCGM, 0.812},
	} {
		inner.rd = &gpu.Readings{Backend: "nvml", Devices: []gpu.Device{
			{Index: 0, UUID: uuidA, Up: true, Activity: tc.inner},
			{Index: 2, UUID: uuidC, Up: true, MIGEnabled: true, Activity: tc.inner,
				MIG: []gpu.MIGInstance{{GPUInstanceID: 1, Profile: "3g.71gb", Activity: tc.inner}}}}}
		rd, err := s.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if a := rd.Devices[0].Activity; a.Source != tc.source || val(a.SMActive) != tc.sm {
			t.Errorf("%s: GPU activity source %q SM %v, want %q %v", tc.name, a.Source, val(a.SMActive), tc.source, tc.sm)
		}
		wantMIG := tc.sm
		if tc.source == ActivityDCGM {
			wantMIG = 0.5
		}
		if a := rd.Devices[1].MIG[0].Activity; a.Source != tc.source || val(a.SMActive) != wantMIG {
			t.Errorf("%s: MIG instance activity source %q SM %v, want %q %v", tc.name, a.Source, val(a.SMActive), tc.source, wantMIG)
		}
	}
}
