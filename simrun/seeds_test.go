package simrun_test

import (
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestChangesPerMinute(t *testing.T) {
	s := report.Summary{Seconds: 600, GPUs: []report.GPUSummary{{UUID: "a"}, {UUID: "b"}}}
	decs := []tuner.Decision{{GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "b", Applied: true}, {GPU: "b", Applied: false}}
	got := simrun.ChangesPerMinute(decs, s)
	if want := (simrun.ChangeRate{Mean: 4.0 / 10 / 2, Max: 3.0 / 10}); got != want {
		t.Errorf("simrun.ChangesPerMinute = %+v, want %+v", got, want)
	}
	if got := simrun.ChangesPerMinute(decs, report.Summary{}); got != (simrun.ChangeRate{}) {
		t.Errorf("empty run: %+v", got)
	}
}
