package report

import (
	"cmp"
	"math"
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

// radixMin is the fewest values orderStats32 selects among by their
// leading bits: below it, the table of counts costs more than a
// selection.
const radixMin = 1 << 14

// radixBits is how many leading bits of a value's sort key orderStats32
// counts by: the sign, the exponent and the top 7 bits of the mantissa,
// so that a bucket spans under 1% of its values' magnitude.
const radixBits = 16

// floatKey maps a float32 to a key whose unsigned order is the values'
// numeric order (both zeros on one key).
func floatKey(v float32) uint32 {
	b := math.Float32bits(v)
	if b>>31 == 0 {
		return b | 1<<31
	}
	if b == 1<<31 {
		return 1 << 31 // -0 sorts with +0
	}
	return ^b
}

// orderStats32 is orderStats over a, which it leaves as it is: it counts
// the values by the leading bits of their keys, then selects each index
// among the values of its bucket only. It falls back to a copy and
// orderStats when a is short, no index is asked or a holds a NaN.
func orderStats32(a []float32, ks ...int) []float32 {
	if len(a) < radixMin || len(ks) == 0 {
		return orderStats(slices.Clone(a), ks...)
	}
	const shift = 32 - radixBits
	counts := make([]uint32, 1<<radixBits)
	for _, v := range a {
		if v != v {
			return orderStats(slices.Clone(a), ks...)
		}
		counts[floatKey(v)>>shift]++
	}
	// the bucket of each index (ks ascending) and its rank within it
	buckets, ranks := make([]uint32, len(ks)), make([]int, len(ks))
	below, j := 0, 0
	for b, c := range counts {
		c := int(c)
		for j < len(ks) && ks[j] < below+c {
			buckets[j], ranks[j] = uint32(b), ks[j]-below
			j++
		}
		below += c
	}
	// the values of the lowest and the highest bucket wanted; any other
	// between them is gathered in a pass of its own
	out := make([]float32, len(ks))
	lo, hi := buckets[0], buckets[len(ks)-1]
	vlo := make([]float32, 0, counts[lo])
	var vhi []float32
	if hi != lo {
		vhi = make([]float32, 0, counts[hi])
	}
	for _, v := range a {
		switch floatKey(v) >> shift {
		case lo:
			vlo = append(vlo, v)
		case hi:
			vhi = append(vhi, v)
		}
	}
	var vmid []float32
	for i, b := range buckets {
		s := vlo
		switch {
		case b == hi && hi != lo:
			s = vhi
		case b != lo:
			if i == 0 || b != buckets[i-1] {
				vmid = vmid[:0]
				for _, v := range a {
					if floatKey(v)>>shift == b {
						vmid = append(vmid, v)
					}
				}
			}
			s = vmid
		}
		selectK(s, ranks[i]) // no NaN: every selection succeeds
		out[i] = s[ranks[i]]
	}
	return out
}
