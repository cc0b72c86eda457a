package tenant

import (
	"fmt"
	"math"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// churnFit fits a time-sliced GPU's footprints over rounds samples of
// live contexts each, every one a new process (short-lived jobs), whose
// true footprints are all foot, and returns the contexts of the last
// sample with the bytes that sample's fit allocated.
func churnFit(rounds, live int, foot float64) ([]*ctxUtil, uint64) {
	f := &gpuFit{}
	id := uint64(1)
	var ctxs []*ctxUtil
	var alloc uint64
	for r := range rounds {
		ctxs = ctxs[:0]
		sm := 0.0
		for i := range live {
			busy := 0.1 + 0.8*float64((int(id)*7919+i)%97)/97/float64(live)
			ctxs = append(ctxs, &ctxUtil{key: ctxKey{id: id, threads: 1}, sm: &busy})
			sm += busy * foot
			id++
		}
		if r < rounds-1 {
			f.fit(ctxs, &sm, nil, nil)
			continue
		}
		alloc = testutil.Allocated(func() { f.fit(ctxs, &sm, nil, nil) })
	}
	return ctxs, alloc
}

// A window of processes that came and went (32 new ones a sample on one
// GPU) is fitted with a bounded number of unknowns: the fit cost the cube
// of every context in the window, 960 of them (7.4 MB of normal equations
// a sample, 0.48 s), and its cost and memory now grow with the contexts of
// the latest sample. The footprints still come out right.
func TestFootprintFitChurnBounded(t *testing.T) {
	for _, live := range []int{8, 32} {
		t.Run(fmt.Sprint(live), func(t *testing.T) {
			ctxs, alloc := churnFit(2*footprintWindow, live, 0.5)
			if limit := uint64(512 << 10); alloc > limit {
				t.Errorf("one fit of %d live contexts in a window of %d allocated %d bytes, want at most %d", live, live*footprintWindow, alloc, limit)
			}
			for _, c := range ctxs {
				if math.Abs(c.smFoot-0.5) > 0.05 {
					t.Errorf("context %d: footprint %.3f, want 0.5", c.key.id, c.smFoot)
				}
			}
		})
	}
}

// With as many contexts as maxFitContexts in the latest sample alone, no
// fit is made: each context keeps the busy-time split's footprint.
func TestFootprintFitTooManyLive(t *testing.T) {
	ctxs, _ := churnFit(3, maxFitContexts, 0.5)
	for _, c := range ctxs {
		if c.smFoot != c.key.threads {
			t.Fatalf("context %d: footprint %.3f, want its threads %.3f (no fit)", c.key.id, c.smFoot, c.key.threads)
		}
	}
}
