package report

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// TestGoodputMinuteJudged: a goodput minute is judged over the requests
// that ended in it and those overdue at its end; it holds when none
// ended and none was overdue. Before, a minute in which the latency
// tenant finished nothing while its requests waited past the target
// held (nothing ended), and its neighbour's work there counted as
// goodput; and under an ITL SLO a dropped stream was one missed token.
func TestGoodputMinuteJudged(t *testing.T) {
	for _, tc := range []struct {
		name string
		chat TenantWindow // in the minute's last step, over SLO p90
		held bool
	}{
		{"none ended, none overdue", TenantWindow{}, true},
		{"nothing ended, 3 overdue", TenantWindow{Overdue: 3}, false},
		{"only dropped", TenantWindow{Dropped: 5}, false},
		{"1 good, 100 overdue", TenantWindow{Completed: 1, Good: 1, Overdue: 100}, false},
		{"95 good of 100, 5 overdue", TenantWindow{Completed: 100, Good: 95, Overdue: 5}, true},
		{"90 good of 100, 1 overdue", TenantWindow{Completed: 100, Good: 90, Overdue: 1}, false},
		{"itl: 950 good of 1000 tokens", TenantWindow{SLOMetric: sim.SLOMetricITL, Tokens: 1000, Good: 950}, true},
		{"itl: 950 good of 1000, a stream dropped with 100 tokens left", TenantWindow{SLOMetric: sim.SLOMetricITL, Tokens: 1000, Good: 950, Dropped: 1, DroppedTokens: 100}, false},
		{"itl: only one-token requests dropped", TenantWindow{SLOMetric: sim.SLOMetricITL, Dropped: 4, DroppedTokens: 4}, false},
		{"itl: nothing served, 2 streams stalled", TenantWindow{SLOMetric: sim.SLOMetricITL, Overdue: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.chat
			last.Tenant, last.GPU, last.SLOQuantile, last.SLOTarget = "chat", "a", 0.9, time.Second
			r := NewRecorder(Meta{Start: start})
			at := start
			for s := range 60 {
				w := WindowStats{Start: at, End: at.Add(time.Second)}
				chat := TenantWindow{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: time.Second, SLOMetric: tc.chat.SLOMetric}
				if s == 59 {
					chat = last
				}
				w.Tenants = []TenantWindow{chat, {Tenant: "embed", GPU: "a", Work: 2}}
				r.Add(w)
				at = w.End
			}
			s := r.Summary()
			want, goodput := 0.0, 0.0
			if tc.held {
				want, goodput = 1, 2
			}
			if s.HeldFraction == nil || *s.HeldFraction != want || s.Tenants[1].Goodput != goodput {
				t.Errorf("held fraction %v, embed's goodput %v; want %v and %v", fmtRatio(s.HeldFraction), s.Tenants[1].Goodput, want, goodput)
			}
			if got := Held(last); got != tc.held {
				t.Errorf("Held = %v, want %v", got, tc.held)
			}
		})
	}
}
