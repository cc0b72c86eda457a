package sim

import (
	"slices"
	"time"
)

// sortDurations sorts d ascending, as slices.Sort does, by a radix sort on
// the bytes that differ (a window holds up to a million latencies, which
// a comparison sort takes several times longer over); buf is scratch of
// any size, returned grown for the next call.
func sortDurations(d, buf []time.Duration) []time.Duration {
	if len(d) < 256 {
		slices.Sort(d)
		return buf
	}
	// the sign bit flipped orders negative durations first
	key := func(v time.Duration) uint64 { return uint64(v) ^ 1<<63 }
	var or, and uint64 = 0, ^uint64(0)
	for _, v := range d {
		or |= key(v)
		and &= key(v)
	}
	if cap(buf) < len(d) {
		buf = make([]time.Duration, len(d))
	}
	src, dst := d, buf[:len(d)]
	for shift := uint(0); shift < 64; shift += 8 {
		if (or^and)>>shift&0xff == 0 {
			continue // every value has the same byte here
		}
		var count [257]int
		for _, v := range src {
			count[key(v)>>shift&0xff+1]++
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for _, v := range src {
			b := key(v) >> shift & 0xff
			dst[count[b]] = v
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &d[0] {
		copy(d, src)
	}
	return buf
}
