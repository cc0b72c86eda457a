package report

import (
	"testing"
	"time"
)

// sampledRun records a tenant with a p99 <= 20 ms SLO over minutes of 1 s
// steps. Each step completes perStep requests at lat ms and drops
// dropped; the window keeps kept of the latencies (all when kept is 0).
type sampledMinute struct {
	perStep, kept, dropped int
	lat                    int
}

func sampledRun(minutes []sampledMinute) Summary {
	r := NewRecorder(Meta{Start: start, Step: time.Second})
	at := start
	for _, m := range minutes {
		for range 60 {
			w := WindowStats{Start: at, End: at.Add(time.Second)}
			tw := TenantWindow{Tenant: "recsys", GPU: "a", SLOQuantile: 0.99, SLOTarget: 20 * time.Millisecond,
				Completed: m.perStep, Dropped: m.dropped}
			kept := m.perStep
			if m.kept > 0 {
				kept = m.kept
			}
			tw.Latencies = ms(make([]int, kept)...)
			for i := range tw.Latencies {
				tw.Latencies[i] = time.Duration(m.lat) * time.Millisecond
			}
			if m.lat <= 20 {
				tw.Good = m.perStep
			}
			w.Tenants = []TenantWindow{tw}
			r.Add(w)
			at = w.End
		}
	}
	return r.Summary()
}

// TestSampledRunQuantiles: a window that kept a sample of its latencies
// weighs as many requests as it completed, so that an overload in the
// run's sampled windows shows in its percentiles as it would in its
// first; windows that kept all are the plain nearest rank.
func TestSampledRunQuantiles(t *testing.T) {
	quiet := sampledMinute{perStep: 100, lat: 1}
	for _, tc := range []struct {
		name     string
		minutes  []sampledMinute
		p50, p99 float64
	}{
		{"all kept", []sampledMinute{quiet, quiet, {perStep: 2, lat: 500}}, 0.001, 0.001},
		{"all kept, overload first", []sampledMinute{{perStep: 100, lat: 500}, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet}, 0.001, 0.5},
		// the same overload last, its windows keeping 2 of 100 (pooled
		// as kept, 0.2% of the latencies)
		{"overload in sampled windows", []sampledMinute{quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, {perStep: 100, kept: 2, lat: 500}}, 0.001, 0.5},
		{"sampled quiet, overload kept", []sampledMinute{{perStep: 1000, kept: 16, lat: 1}, {perStep: 10, lat: 500}}, 0.001, 0.001},
		{"sampled windows outweigh", []sampledMinute{{perStep: 10, lat: 1}, {perStep: 100, kept: 2, lat: 500}}, 0.5, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := sampledRun(tc.minutes).Tenants[0]
			if ptr(ts.P50) != tc.p50 || ptr(ts.P99) != tc.p99 {
				t.Errorf("p50 %v, p99 %v; want %v, %v", ptr(ts.P50), ptr(ts.P99), tc.p50, tc.p99)
			}
		})
	}
}

// TestSampledBusySlack: requests a window judged but did not keep are
// not dropped: a tenant far within its target has the slack of its
// latencies, not 0; only real drops count as later than any completed.
func TestSampledBusySlack(t *testing.T) {
	for _, tc := range []struct {
		name        string
		minutes     []sampledMinute
		busy, slack any
	}{
		{"all kept", []sampledMinute{{perStep: 1000, lat: 1}}, 0.001, 20.0},
		{"sampled, no drops", []sampledMinute{{perStep: 1000, kept: 16, lat: 1}}, 0.001, 20.0},
		{"sampled, 0.5% dropped", []sampledMinute{{perStep: 1000, kept: 16, dropped: 5, lat: 2}}, 0.002, 10.0},
		{"sampled, 2% dropped", []sampledMinute{{perStep: 1000, kept: 16, dropped: 20, lat: 2}}, nil, 0.0},
		// the busy stretch is the busy minute only; the quiet one's
		// latencies weigh nothing there
		{"sampled busy minute beside a quiet one", []sampledMinute{{perStep: 10, lat: 15}, {perStep: 1000, kept: 16, lat: 4}}, 0.004, 5.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := sampledRun(tc.minutes).Tenants[0]
			if busy, sl := ptr(ts.BusyLatency), ptr(ts.Slack); busy != tc.busy || sl != tc.slack {
				t.Errorf("busy latency %v, slack %v; want %v, %v", busy, sl, tc.busy, tc.slack)
			}
		})
	}
}
