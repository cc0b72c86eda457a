package latency

import (
	"testing"
	"time"
)

// TestTrackerKeepsLean: what a tracker keeps between scrapes holds each
// bucket layout once, whatever its number of series: the series of the
// answer kept for the next delta share one, the window's entries too; and
// a window entry that is an answer's new values (after a counter reset)
// keeps none of its series.
func TestTrackerKeepsLean(t *testing.T) {
	src := &Source{URL: "sim://a", Metric: "m"}
	tr := newSLOTracker(Spec{Name: "a", Source: src, Window: time.Hour})
	tr.setInterval(15 * time.Second)
	observe := func(i int, page []byte) {
		t.Helper()
		fams, err := parseExposition(page, textFormat, families(src))
		if err != nil {
			t.Fatal(err)
		}
		h, err := extract(src, fams)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.observe(time.Unix(int64(15*i), 0), h); err != nil {
			t.Fatal(err)
		}
	}
	same := func(a, b []float64) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }
	for i, c := range []int{10, 20, 30} {
		observe(i, manySeries(3, 4, c))
	}
	for k, sh := range tr.prev.series {
		if !same(sh.bounds, tr.prev.bounds) {
			t.Errorf("series %s keeps its own bucket bounds", k)
		}
	}
	if len(tr.deltas) != 2 || !same(tr.deltas[0].h.bounds, tr.deltas[1].h.bounds) {
		t.Errorf("window entries keep their own bucket bounds: %+v", tr.deltas)
	}
	observe(3, manySeries(1, 4, 50))
	observe(4, manySeries(1, 4, 5)) // a reset: the delta is the answer itself
	if n := len(tr.deltas); n == 0 || tr.deltas[n-1].h.series != nil {
		t.Errorf("the window keeps a reset answer's series: %+v", tr.deltas)
	}
}
