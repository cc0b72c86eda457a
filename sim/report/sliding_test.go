package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRanker checks ranks of windows of separately sorted spans, some
// empty and some with repeated values, against a sort of the window: the
// first search from an end of the window, the others from the value found
// before, in another window or at another rank.
func TestRanker(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		var vals []float32
		var spans []stepSpan
		for step := range 1 + r.IntN(12) {
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
		rk := ranker{vals: vals}
		for range 20 {
			lo := r.IntN(len(spans))
			hi := lo + 1 + r.IntN(len(spans)-lo)
			window := spans[lo:hi]
			n := window[len(window)-1].end - window[0].start
			if n == 0 {
				continue
			}
			want := slices.Sorted(slices.Values(vals[window[0].start:window[len(window)-1].end]))
			k := r.IntN(n)
			if got := rk.rank(window, k); got != want[k] {
				t.Fatalf("trial %d: rank %d of %v in %v: got %v, want %v", trial, k, vals, window, got, want[k])
			}
		}
	}
}

// TestSortSpans: spans sorted by sortSpans hold what slices.Sort puts
// there, short and long, with ties and with bytes every key shares.
func TestSortSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var vals []float32
	var spans []stepSpan
	for step := range 300 {
		from := len(vals)
		for range r.IntN(400) {
			var v float32
			switch step % 4 {
			case 0:
				v = float32(r.ExpFloat64() * 0.002)
			case 1:
				v = float32(r.IntN(5)) * 0.25 // ties, zeros
			case 2:
				v = 1 + float32(r.IntN(1000))/1024 // one exponent
			default:
				v = float32(r.NormFloat64() * 1e3) // negative too
			}
			vals = append(vals, v)
		}
		spans = append(spans, stepSpan{step: step, start: from, end: len(vals)})
	}
	want := slices.Clone(vals)
	for _, sp := range spans {
		slices.Sort(want[sp.start:sp.end])
	}
	sortSpans(vals, spans)
	for i := range vals {
		if math.Float32bits(vals[i]) != math.Float32bits(want[i]) {
			t.Fatalf("index %d: %v, want %v", i, vals[i], want[i])
		}
	}
}
