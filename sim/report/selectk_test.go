package report

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderStats32 checks the selected values against a sort's.
func TestOrderStats32(t *testing.T) {
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
			got := orderStats32(slices.Clone(a), k1, k2)
			if got[0] != sorted[k1] || got[1] != sorted[k2] {
				t.Fatalf("n=%d trial=%d: got %v, want %v %v", n, trial, got, sorted[k1], sorted[k2])
			}
			for _, k := range []int{0, n / 3, n - 1} {
				b := slices.Clone(a)
				if !selectK32(b, k) || b[k] != sorted[k] {
					t.Fatalf("n=%d k=%d: got %v, want %v", n, k, b[k], sorted[k])
				}
			}
		}
	}
}
