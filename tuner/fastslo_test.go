package tuner

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The fast window's requests are differences of one tracker's counters: a
// reload that restarted a tenant's counters 30 s in (another Epoch) starts
// the window over, though the new counters count on above the old ones.
func TestFastWindowAcrossTrackers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after uint64 // chat's tracker from 30 s on; before it 1
		want  FastSLO
	}{
		{"one tracker", 1, FastSLO{Over: 45 * time.Second, Total: 90, Good: 81}},
		{"another tracker from 30 s", 2, FastSLO{Over: 15 * time.Second, Total: 30, Good: 27}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFastTracker(time.Minute)
			var got FastSLO
			for i := range 4 {
				epoch := uint64(1)
				if i >= 2 {
					epoch = tc.after
				}
				st := latency.Status{Quantile: 0.9, GoodKnown: true, RequestsTotal: float64(30 * i), GoodRequestsTotal: float64(27 * i), Epoch: epoch}
				got = f.observe(t0.Add(time.Duration(i)*15*time.Second), &tenant.Snapshot{SLOs: []tenant.SLOStatus{{Tenant: "chat", Status: st}}})["chat"]
			}
			if got != tc.want {
				t.Errorf("fast window %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFastSLOAttainmentBounded: attainment is within [0, 1] whatever the
// counters said: good requests above the requests (a source's counters
// that disagree) must not read as slack beyond the target, nor make the
// burn negative.
func TestFastSLOAttainmentBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    FastSLO
		want float64
		ok   bool
	}{
		{"none", FastSLO{}, 0, false},
		{"some good", FastSLO{Total: 100, Good: 99}, 0.99, true},
		{"good above requests", FastSLO{Total: 2, Good: 10}, 1, true},
		{"good below none", FastSLO{Total: 10, Good: -5}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.f.Attainment()
			if got != tc.want || ok != tc.ok {
				t.Errorf("attainment %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
