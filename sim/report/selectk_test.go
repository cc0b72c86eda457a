package report

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestOrderStats checks the selected values against a sort's.
func TestOrderStats(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 17, 100, 1000, 50000} {
		for trial := range 20 {
			a := make([]float32, n)
			for i := range a {
				switch trial % 4 {
				case 0:
					a[i] = r.Float32()
				case 1:
					a[i] = float32(r.IntN(5)) // many ties
				case 2:
					a[i] = float32(i) // sorted
				default:
					a[i] = float32(n - i) // reversed
				}
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			k1, k2 := nearestRank(n, 0.5), nearestRank(n, 0.99)
			got := orderStats(slices.Clone(a), k1, k2)
			if got[0] != sorted[k1] || got[1] != sorted[k2] {
				t.Fatalf("n=%d trial=%d: got %v, want %v %v", n, trial, got, sorted[k1], sorted[k2])
			}
			for _, k := range []int{0, n / 3, n - 1} {
				b := slices.Clone(a)
				if !selectK(b, k) || b[k] != sorted[k] {
					t.Fatalf("n=%d k=%d: got %v, want %v", n, k, b[k], sorted[k])
				}
			}
		}
	}
}

// TestStepQuantiles checks a window's median and 99th percentile,
// sorted or not, against a sort's, and that a sorted window is left as
// it is.
func TestStepQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 99, 100, 101, 300, 5000} {
		for trial := range 4 {
			a := make([]time.Duration, n)
			for i := range a {
				switch trial {
				case 0:
					a[i] = time.Duration(r.Int64N(1e9))
				case 1:
					a[i] = time.Duration(r.IntN(3)) // many ties
				case 2:
					a[i] = time.Duration(i) // sorted
				default:
					a[i] = time.Duration(n - i) // reversed
				}
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			in := slices.Clone(a)
			p50, p99, ok := stepQuantiles(in)
			if ok != (n > 0) {
				t.Fatalf("n=%d: ok %v", n, ok)
			}
			if n == 0 {
				continue
			}
			if p50 != sorted[nearestRank(n, 0.5)] || p99 != sorted[nearestRank(n, 0.99)] {
				t.Fatalf("n=%d trial=%d: got %v %v", n, trial, p50, p99)
			}
			if slices.IsSorted(a) && !slices.Equal(in, a) {
				t.Fatalf("n=%d trial=%d: a sorted window was reordered", n, trial)
			}
		}
	}
}
