package sim

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
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

// WindowUnsorted and then SortLatencies give what Window gives, window
// after window; unsorted, the latencies are the same values.
func TestWindowUnsortedThenSorted(t *testing.T) {
	sc := mustParse(t, hostScenario())
	a, b := mustNew(t, sc, Options{}), mustNew(t, sc, Options{})
	var buf []time.Duration
	unordered := false
	for sec := 1; sec <= 5; sec++ {
		at := a.Now().Add(time.Second)
		a.AdvanceTo(at)
		b.AdvanceTo(at)
		want, got := a.Window(), b.WindowUnsorted()
		for i := range got.Tenants {
			l := got.Tenants[i].Latencies
			unordered = unordered || !slices.IsSorted(l)
			if !slices.Equal(slices.Sorted(slices.Values(l)), want.Tenants[i].Latencies) {
				t.Fatalf("second %d, %s: unsorted latencies are not the window's", sec, got.Tenants[i].Tenant)
			}
		}
		buf = got.SortLatencies(buf)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("second %d: sorted, the window differs from Window's", sec)
		}
	}
	if !unordered {
		t.Error("every window's latencies came sorted: the test shows nothing")
	}
}

// TestReuseLatencies: windows whose latency slices were handed back, after
// a lag as a recorder on another goroutine gives them, are the same as
// windows that were not, and later windows fill the slices handed back.
func TestReuseLatencies(t *testing.T) {
	sc := mustParse(t, hostScenario())
	a, b := mustNew(t, sc, Options{}), mustNew(t, sc, Options{})
	var lagged []WindowStats
	handed := map[*time.Duration]bool{}
	reused := false
	for sec := 1; sec <= 8; sec++ {
		at := a.Now().Add(time.Second)
		a.AdvanceTo(at)
		b.AdvanceTo(at)
		want, got := a.WindowUnsorted(), b.WindowUnsorted()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("second %d: the window differs from one without reuse", sec)
		}
		// hand back the window of two seconds before
		lagged = append(lagged, got)
		if len(lagged) > 2 {
			old := lagged[0]
			lagged = lagged[1:]
			for _, tw := range old.Tenants {
				if cap(tw.Latencies) > 0 {
					handed[unsafe.SliceData(tw.Latencies[:1])] = true
				}
			}
			b.ReuseLatencies(&old)
		}
		for _, tw := range got.Tenants {
			if cap(tw.Latencies) > 0 && handed[unsafe.SliceData(tw.Latencies[:1])] {
				reused = true
			}
		}
	}
	if !reused {
		t.Error("no window filled a slice handed back")
	}
}
