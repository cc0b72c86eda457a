package report

import (
	"math"
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

// TestOrderStats32 checks the selection by leading bits against a sort's,
// on both sides of its size threshold, with ties, zeros of both signs,
// negative and infinite values, and a NaN (which falls back), and that it
// leaves its input as it was.
func TestOrderStats32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	draws := map[string]func(i, n int) float32{
		"uniform":   func(int, int) float32 { return r.Float32() },
		"lognormal": func(int, int) float32 { return float32(math.Exp(r.NormFloat64()*2 - 5)) },
		"ties":      func(int, int) float32 { return float32(r.IntN(3)) * 1e-3 },
		"one value": func(int, int) float32 { return 0.25 },
		"signed":    func(int, int) float32 { return float32(r.NormFloat64()) },
		"zeros, inf": func(i, _ int) float32 {
			return [...]float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), 1}[i%4]
		},
		"descending":  func(i, n int) float32 { return float32(n - i) },
		"nan":         func(i, _ int) float32 { return [...]float32{float32(math.NaN()), 2, 1}[min(i, 2)] },
		"two buckets": func(i, _ int) float32 { return [...]float32{1, 1e6}[i%2] },
	}
	for name, draw := range draws {
		for _, n := range []int{radixMin - 1, radixMin, 3*radixMin + 7} {
			a := make([]float32, n)
			for i := range a {
				a[i] = draw(i, n)
			}
			in := slices.Clone(a)
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			ks := []int{0, nearestRank(n, 0.5), nearestRank(n, 0.5), nearestRank(n, 0.99), n - 1}
			got := orderStats32(in, ks...)
			for i, k := range ks {
				if g, w := got[i], sorted[k]; g != w && !(g != g && w != w) {
					t.Fatalf("%s n=%d k=%d: got %v, want %v", name, n, k, g, w)
				}
			}
			if !slices.EqualFunc(in, a, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				t.Fatalf("%s n=%d: the input was reordered", name, n)
			}
			if got := orderStats32(in); len(got) != 0 {
				t.Fatalf("%s n=%d: no index asked, got %v", name, n, got)
			}
		}
	}
}
