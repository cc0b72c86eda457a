package tuner

import (
	"context"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestNonePolicy(t *testing.T) {
	p := None{}
	ctl := &fakeControl{}
	devs := []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: "long"}}
	if err := p.Init(context.Background(), ActuatorsOf(ctl), snapshot(t0, devs, nil)); err != nil {
		t.Fatal(err)
	}
	d, err := p.Observe(context.Background(), ActuatorsOf(ctl), snapshot(t0, devs, nil))
	if err != nil || len(d) != 0 || len(ctl.Calls) != 0 {
		t.Errorf("none acted: %v %v %v", d, err, ctl.Calls)
	}
}

func TestPercent(t *testing.T) {
	for in, want := range map[float64]string{1: "100%", 0.25: "25%", 1 / 3.0: "33.3%", 0.005: "0.5%"} {
		if got := percent(in); got != want {
			t.Errorf("percent(%v) = %q, want %q", in, got, want)
		}
	}
}
