package simrun

import (
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestResultApplied(t *testing.T) {
	for _, tc := range []struct {
		name    string
		applied []bool
		want    int
	}{
		{"none", nil, 0},
		{"all refused", []bool{false, false}, 0},
		{"some", []bool{true, false, true}, 2},
	} {
		r := &Result{}
		for _, a := range tc.applied {
			r.Decisions = append(r.Decisions, tuner.Decision{Applied: a})
		}
		if got := r.Applied(); got != tc.want {
			t.Errorf("%s: %d applied, want %d", tc.name, got, tc.want)
		}
	}
}
