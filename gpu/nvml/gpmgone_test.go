package nvml

import (
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// GPM that stops giving ratios for a lasting reason leaves the activity
// source "" (another source, dcgm-exporter, may then give the ratios); a
// passing failure keeps it "gpm" so that vgpu_gpu_info keeps its labels.
// The same for the whole GPU and for a MIG GPU instance.
func TestGPMSourceDroppedWhenGPMStopsForGood(t *testing.T) {
	const (
		ratio   = "gpm+ratio" // source gpm with a ratio
		noRatio = "gpm"       // source gpm, no ratio this sample
		none    = ""          // no source, no ratio
	)
	steps := []struct {
		name  string
		fails []nvml.Return // the sample call's return on the third sample on
		want  []string
	}{
		{"not supported", []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, nvml.SUCCESS},
			[]string{none, none, none, ratio}},
		{"no permission", []nvml.Return{nvml.ERROR_NO_PERMISSION, nvml.SUCCESS, nvml.SUCCESS},
			[]string{none, none, ratio}},
		{"one passing failure", []nvml.Return{nvml.ERROR_NOT_FOUND, nvml.SUCCESS, nvml.SUCCESS},
			[]string{noRatio, ratio, ratio}},
		{"failures in a row", []nvml.Return{nvml.ERROR_NOT_FOUND, nvml.ERROR_NOT_FOUND, nvml.ERROR_NOT_FOUND, nvml.ERROR_NOT_FOUND, nvml.SUCCESS, nvml.SUCCESS},
			[]string{noRatio, noRatio, none, none, none, ratio}},
	}
	for _, where := range []struct {
		name     string
		dev      int
		call     string
		activity func(gpu.Device) gpu.Activity
	}{
		{"GPU", 0, "GpmSampleGet", func(d gpu.Device) gpu.Activity { return d.Activity }},
		{"MIG instance", 2, "GpmMigSampleGet", func(d gpu.Device) gpu.Activity { return d.MIG[0].Activity }},
	} {
		for _, tc := range steps {
			t.Run(where.name+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t, dgxh100.New())
				f.enableMIG(2, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
				b := f.backend()
				got := func() string {
					a := where.activity(sample(t, b).Devices[where.dev])
					if a.SMActive != nil && a.Source == "gpm" {
						return ratio
					}
					if a.SMActive != nil {
						t.Fatalf("activity %+v: a ratio without source gpm", a)
					}
					return a.Source
				}
				if s := got(); s != noRatio {
					t.Fatalf("first sample %q, want %q", s, noRatio)
				}
				f.clock.Advance(time.Second)
				if s := got(); s != ratio {
					t.Fatalf("second sample %q, want %q", s, ratio)
				}
				for i, r := range tc.fails {
					f.fail(where.dev, where.call, r)
					f.clock.Advance(time.Second)
					if s := got(); s != tc.want[i] {
						t.Errorf("sample %d (%s %s): %q, want %q", i+3, where.call, returnName(r), s, tc.want[i])
					}
				}
			})
		}
	}
}

// A GPM that still takes samples but computes nothing (nvmlGpmMetricsGet
// failing for good) leaves the source "" once dropped, not named again
// with each new sample and dropped again every gpmFailLimit samples
// (vgpu_gpu_info's labels flapping); a ratio names it again.
func TestGPMSourceStaysDroppedWhileNothingIsComputed(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	source := func() string {
		a := sample(t, b).Devices[0].Activity
		if a.SMActive != nil {
			return a.Source + "+ratio"
		}
		return a.Source
	}
	var got []string
	got = append(got, source())
	f.clock.Advance(time.Second)
	got = append(got, source())
	f.fail(0, "GpmMetricsGet", nvml.ERROR_NOT_FOUND)
	for range 8 {
		f.clock.Advance(time.Second)
		got = append(got, source())
	}
	f.fail(0, "GpmMetricsGet", nvml.SUCCESS)
	f.clock.Advance(time.Second)
	got = append(got, source())
	want := []string{"gpm", "gpm+ratio", "gpm", "gpm", "", "", "", "", "", "", "gpm+ratio"}
	if !slices.Equal(got, want) {
		t.Errorf("activity source by sample %q, want %q", got, want)
	}
}
