package policies

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

func TestNew(t *testing.T) {
	for _, name := range []string{baseline.StaticEqualName, baseline.UncappedName, tuner.NoneName} {
		p, err := New(name)
		if err != nil || p.Name() != name {
			t.Errorf("New(%q) = %v, %v", name, p, err)
		}
	}
	_, err := New("bogus")
	if err == nil || !strings.Contains(err.Error(), `"bogus"`) || !strings.Contains(err.Error(), "best-effort, none, static-equal") {
		t.Errorf("unknown policy error = %v; want the name and the known policies", err)
	}
}

// Parameters reach the autotune policy a name makes, and only it.
func TestSetAutotuneParams(t *testing.T) {
	p, err := New(autotune.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetAutotuneParams(p, []string{"pause_max=0.5", "pause_gain=0.2"}); err != nil {
		t.Fatal(err)
	}
	a := p.(*tuner.TunerPolicy).Decider.(*autotune.Autotune)
	if a.P.PauseMax != 0.5 || a.P.PauseGain != 0.2 {
		t.Errorf("params %+v, want pause_max 0.5 and pause_gain 0.2", a.P)
	}
	if err := SetAutotuneParams(p, []string{"pause_max=x"}); err == nil || a.P.PauseMax != 0.5 {
		t.Errorf("a bad value: %v, pause_max %v", err, a.P.PauseMax)
	}
	for _, name := range []string{baseline.StaticEqualName, tuner.NoneName} {
		q, err := New(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := SetAutotuneParams(q, nil); err != nil {
			t.Errorf("%s without parameters: %v", name, err)
		}
		if err := SetAutotuneParams(q, []string{"pause_max=0.5"}); err == nil || !strings.Contains(err.Error(), `not "`+name+`"`) {
			t.Errorf("%s with parameters: %v", name, err)
		}
	}
}
