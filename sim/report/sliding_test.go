package report

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWindowRank checks every rank of windows of separately sorted spans,
// some empty and some with repeated values, against a sort of the window.
func TestWindowRank(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var heap []run
	for trial := range 200 {
		var vals []float32
		var spans []stepSpan
		for step := range 1 + r.IntN(8) {
			from := len(vals)
			for range r.IntN(6) {
				v := r.Float32()
				if trial%2 == 0 {
					v = float32(r.IntN(4)) // many ties
				}
				vals = append(vals, v)
			}
			slices.Sort(vals[from:])
			spans = append(spans, stepSpan{step: step, start: from, end: len(vals)})
		}
		if len(vals) == 0 {
			continue
		}
		want := slices.Sorted(slices.Values(vals))
		for k := range want {
			var got float32
			got, heap = windowRank(vals, spans, k, heap)
			if got != want[k] {
				t.Fatalf("trial %d: rank %d of %v in %v: got %v, want %v", trial, k, vals, spans, got, want[k])
			}
		}
	}
}
