package report

import (
	"cmp"
	"math/bits"
	"slices"
)

// selectK reorders a so that a[k] is the value slices.Sort would put at
// index k, every element before it no greater and every one after it no
// less (quickselect, falling back to a sort of the range left after too
// many rounds). It returns false, leaving a to be sorted, when a holds a
// NaN.
func selectK[T cmp.Ordered](a []T, k int) bool {
	for _, v := range a {
		if v != v {
			return false
		}
	}
	lo, hi := 0, len(a) // a[lo:hi] holds index k
	budget := 2 * bits.Len(uint(len(a)))
	for hi-lo > 16 {
		if budget == 0 {
			slices.Sort(a[lo:hi])
			return true
		}
		budget--
		// median of three as the pivot
		m := lo + (hi-lo)/2
		x, y, z := a[lo], a[m], a[hi-1]
		if x > y {
			x, y = y, x
		}
		if y > z {
			y = z
			if x > y {
				y = x
			}
		}
		p := y
		// three-way partition: [lo,lt) < p, [lt,gt) == p, [gt,hi) > p
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch v := a[i]; {
			case v < p:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case v > p:
				gt--
				a[gt], a[i] = a[i], a[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return true
		}
	}
	slices.Sort(a[lo:hi])
	return true
}

// orderStats returns the values slices.Sort(a) would put at the indices
// ks (ascending), reordering a.
func orderStats[T cmp.Ordered](a []T, ks ...int) []T {
	out := make([]T, len(ks))
	hi := len(a)
	for j := len(ks) - 1; j >= 0; j-- {
		k := ks[j]
		if !selectK(a[:hi], k) {
			slices.Sort(a)
			for j, k := range ks {
				out[j] = a[k]
			}
			return out
		}
		out[j] = a[k]
		// a[:k] now holds the k smallest: a lower index is found there
		hi = k + 1
	}
	return out
}
