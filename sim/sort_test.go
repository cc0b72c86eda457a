package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSortDurations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf []time.Duration
	for _, tc := range []struct {
		name string
		n    int
		gen  func() time.Duration
	}{
		{"short", 100, func() time.Duration { return time.Duration(r.Int64N(1e9)) }},
		{"latencies", 100000, func() time.Duration { return time.Duration(r.ExpFloat64() * 5e7) }},
		{"wide", 5000, func() time.Duration { return time.Duration(r.Int64()) }},
		{"negative", 5000, func() time.Duration { return time.Duration(r.Int64() - r.Int64()) }},
		{"equal", 1000, func() time.Duration { return 42 }},
		{"few values", 3000, func() time.Duration { return time.Duration(r.IntN(3)) << 40 }},
	} {
		d := make([]time.Duration, tc.n)
		for i := range d {
			d[i] = tc.gen()
		}
		want := slices.Sorted(slices.Values(d))
		buf = sortDurations(d, buf)
		if !slices.Equal(d, want) {
			t.Errorf("%s: not sorted as slices.Sort sorts", tc.name)
		}
	}
}
