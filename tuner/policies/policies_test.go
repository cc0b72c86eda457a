package policies

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
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
