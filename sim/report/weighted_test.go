package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWeightedRanksUnitWeights: with every weight 1, the weighted nearest
// rank is the plain one (a sort's value at nearestRank), whatever the
// values and however they are cut into spans.
func TestWeightedRanksUnitWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	draws := map[string]func(i int) float32{
		"uniform":    func(int) float32 { return r.Float32() },
		"lognormal":  func(int) float32 { return float32(math.Exp(r.NormFloat64()*2 - 5)) },
		"ties":       func(int) float32 { return float32(r.IntN(3)) * 1e-3 },
		"one value":  func(int) float32 { return 0.25 },
		"signed":     func(int) float32 { return float32(r.NormFloat64()) },
		"zeros, inf": func(i int) float32 { return [...]float32{0, float32(math.Inf(1)), 1}[i%3] },
	}
	qs := []float64{0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1}
	for name, draw := range draws {
		for _, n := range []int{1, 2, 99, 100, 101, radixMin + 3, 5 * radixMin} {
			a := make([]float32, n)
			for i := range a {
				a[i] = draw(i)
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			// spans of uneven length, an empty one among them
			var spans []weightedSpan
			for at := 0; at < n; {
				end := min(n, at+1+r.IntN(n/3+1))
				spans = append(spans, weightedSpan{start: at, end: end, w: 1}, weightedSpan{start: end, end: end, w: 1})
				at = end
			}
			ranks := make([]float64, len(qs))
			for i, q := range qs {
				ranks[i] = rankOf(n, q)
			}
			got := weightedRanks(a, spans, ranks...)
			for i, q := range qs {
				if w := sorted[nearestRank(n, q)]; got[i] != w {
					t.Fatalf("%s n=%d q=%v: got %v, want %v", name, n, q, got[i], w)
				}
			}
		}
	}
}

// TestWeightedRanks: a latency kept from a sampled window stands for its
// window's judged over kept requests.
func TestWeightedRanks(t *testing.T) {
	// 10 requests kept whole at 1..10 ms, and a window that judged 1,000
	// and kept 2 (100 and 200 ms): 500 each; 1,010 in all
	lat := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 200}
	spans := []weightedSpan{{0, 10, 1}, {10, 12, 500}}
	for _, tc := range []struct {
		q    float64
		want float32
	}{
		{0.005, 6},    // rank 6: the whole window's 6th
		{0.0099, 10},  // rank 10: the last of it
		{0.0100, 100}, // rank 11: the sampled window's first
		{0.5, 100},    // rank 505: 10 + 500 reach it
		{0.505, 200},  // rank 511: beyond 510
		{0.99, 200},   // rank 1,000
		{1, 200},
	} {
		if got := weightedRanks(lat, spans, rankOf(1010, tc.q))[0]; got != tc.want {
			t.Errorf("q %v (rank %v): got %v, want %v", tc.q, rankOf(1010, tc.q), got, tc.want)
		}
	}
	// a weight that does not divide evenly: 3 kept of 10 judged
	lat = []float32{1, 2, 3}
	spans = []weightedSpan{{0, 3, 10.0 / 3}}
	for rank, want := range map[float64]float32{1: 1, 3: 1, 4: 2, 7: 3, 10: 3} {
		if got := weightedRanks(lat, spans, rank)[0]; got != want {
			t.Errorf("10/3 each, rank %v: got %v, want %v", rank, got, want)
		}
	}
}
