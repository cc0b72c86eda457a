package webui

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A tenant's SLO state on /tuner says what the tuner can judge: a tenant
// whose latency source is down, not read yet or read once only (a
// baseline, its window empty), or whose requests come below its SLO's
// min_throughput, is unknown, with the reason (the tuner holds its GPU for
// each), whatever the window still holds; one with no request while its
// source answers is "no requests".
func TestTenantSLOState(t *testing.T) {
	att := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name      string
		s         latency.Status
		floor     float64
		state     string
		noteStart string
	}{
		{"met", latency.Status{SourceUp: true, SourceRead: true, Measured: true, Attainment: att(0.995), WindowRequests: 3000}, 0, "met", ""},
		{"violated", latency.Status{SourceUp: true, SourceRead: true, Measured: true, Attainment: att(0.9), WindowRequests: 3000}, 0, "violated", ""},
		{"no requests, the source up", latency.Status{SourceUp: true, SourceRead: true, Measured: true}, 0, "no requests", ""},
		{"no requests, the source down", latency.Status{SourceRead: true, LastError: "connection refused"}, 0, "unknown", "latency source down: connection refused"},
		{"an old window, the source down", latency.Status{SourceRead: true, Attainment: att(0.9), WindowRequests: 3000}, 0, "unknown", "latency source down"},
		{"the source not read yet", latency.Status{}, 0, "unknown", "latency source not read yet"},
		{"the source read once: a baseline", latency.Status{SourceUp: true, SourceRead: true}, 0, "unknown", "latency source read once: no window yet"},
		{"below the floor", latency.Status{SourceUp: true, SourceRead: true, Measured: true, Attainment: att(0.9), WindowRequests: 300}, 5, "unknown", "requests come at 1/s over the SLO window, below its min_throughput of 5/s"},
		{"at the floor", latency.Status{SourceUp: true, SourceRead: true, Measured: true, Attainment: att(0.9), WindowRequests: 1500}, 5, "violated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.s
			st.Quantile, st.TargetSeconds, st.Window, st.GoodKnown = 0.99, 2, 5*time.Minute, true
			var tv tenantView
			fillSLO(&tv, &tenant.SLOStatus{Tenant: "chat", Status: st, MinThroughput: tc.floor})
			if tv.State != tc.state || !strings.HasPrefix(tv.Note, tc.noteStart) || (tc.noteStart == "" && tv.Note != "") {
				t.Errorf("state %q, note %q; want %q, a note starting %q", tv.State, tv.Note, tc.state, tc.noteStart)
			}
		})
	}
}
