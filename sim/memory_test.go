package sim

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestStateBounded: what the simulator keeps per request stays bounded
// however long it runs, as a live exporter drives it (a Sample a second,
// the applications' metrics read, no Window ever) and as vgpusim does (a
// Window a step, its latencies handed back): each tenant's request queue
// is compacted (compactQueue, once more than 64 requests are done), its
// latency record holds at most WindowLatencies, and the spare latency
// slices do not pile up.
func TestStateBounded(t *testing.T) {
	const (
		maxLat = 64
		// compactQueue lets up to 64 done requests stand before the live
		// ones; under a light load the queue's array stays within a few
		// times that whatever the number of arrivals (tens of thousands
		// here)
		maxQueueCap = 1 << 9
	)
	for _, tc := range []struct {
		name     string
		windowed bool
	}{
		{"live exporter", false},
		{"windowed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := mustParse(t, `name: bounded
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: chat, memory: 20GiB, workload: {type: llm, params: 1e8, context_tokens: 64, generated_tokens: 8, arrival: {process: poisson, rate: 50}}}
  - {name: vision, memory: 4GiB, workload: {type: dnn, flops: 1e8, arrival: {process: poisson, rate: 200}}}
`)
			start := time.Unix(0, 0)
			clock := gpu.NewManualClock(start)
			s := mustNew(t, sc, Options{Clock: clock, Start: start, WindowLatencies: maxLat})
			const minutes = 10
			completed := map[string]int{} // over the windows, in the windowed case
			for range minutes * 60 {
				clock.Advance(time.Second)
				if _, err := s.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, app := range []string{"chat", "vision"} {
					if err := s.AppMetrics(app, io.Discard); err != nil {
						t.Fatal(err)
					}
				}
				if tc.windowed {
					w := s.WindowUnsorted()
					for _, tw := range w.Tenants {
						completed[tw.Tenant] += tw.Completed
					}
					s.ReuseLatencies(&w)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, tn := range s.tenants {
				n := tn.completed
				if tc.windowed {
					n = completed[tn.spec.Name]
				}
				if n < 1000 {
					t.Errorf("%s: %d requests completed in %d minutes: the load does not test the bound", tn.spec.Name, n, minutes)
				}
				if c := cap(tn.queue); c > maxQueueCap {
					t.Errorf("%s: request queue's capacity %d after %d minutes, want <= %d", tn.spec.Name, c, minutes, maxQueueCap)
				}
				if n := len(tn.lat); n > maxLat {
					t.Errorf("%s: %d latencies kept, want <= %d", tn.spec.Name, n, maxLat)
				}
				if i < len(s.spare) && len(s.spare[i]) > 1 {
					t.Errorf("%s: %d spare latency slices, want <= 1", tn.spec.Name, len(s.spare[i]))
				}
			}
		})
	}
}
