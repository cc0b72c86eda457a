package energyguard

import (
	"testing"
	"time"
)

// The guard bounded a step by the power limit of the reading that ends it:
// after a gap in which the limit was lowered, true readings were refused
// (the GPU drew at the old limit for most of the gap), and the third taken
// as a new level, logged as a glitch. A step is now bounded by the highest
// limit of the samples since the reading it starts from, those read
// without the counter (See) included.
func TestDrawSinceLastReading(t *testing.T) {
	const s = 1e9 // J
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at      time.Duration
		see     bool    // a sample without the counter: See(watts)
		v       float64 // J
		watts   float64
		ok, rel bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		// 700 W limit (1400 W bound), lowered to 100 W in an hour's gap
		// after the GPU drew 650 W for most of it
		{"limit lowered across a gap", []step{
			{0, false, s, 1400, true, false},
			{time.Hour, false, s + 650*3300, 200, true, false},
			{time.Hour + time.Second, false, s + 650*3300 + 100, 200, true, false},
		}},
		// the limit raised only between readings, seen without the counter
		{"limit raised in a gap, seen without the counter", []step{
			{0, false, s, 200, true, false},
			{time.Minute, true, 0, 1400, false, false},
			{time.Hour, true, 0, 200, false, false},
			{time.Hour + time.Minute, false, s + 650*3300, 200, true, false},
		}},
		// a limit higher before the reading a step starts from bounds
		// nothing after it: 5 kJ in a second is beyond twice 100 W
		{"bound starts again at a reading", []step{
			{0, false, s, 1400, true, false},
			{time.Second, false, s + 100, 200, true, false},
			{2 * time.Second, false, s + 5100, 200, false, false},
		}},
		// a repeat keeps the time of the reading it repeats, and the draw
		// since that one
		{"a repeat keeps the draw since the reading it repeats", []step{
			{0, false, s, 1400, true, false},
			{30 * time.Second, false, s, 200, true, false},
			{31 * time.Second, false, s + 650*31, 200, true, false},
		}},
		// readings that agree with one another past the bound: their
		// steps bounded by the highest limit since the first of them
		{"a new level confirmed across a lowered limit", []step{
			{0, false, s, 200, true, false},
			{time.Second, false, 100, 1400, false, false},
			{time.Hour, false, 100 + 650*3500, 200, false, false},
			{time.Hour + time.Second, false, 100 + 650*3500 + 100, 200, true, true},
		}},
		{"a lowered limit still bounds the time after it", []step{
			{0, false, s, 1400, true, false},
			{time.Second, false, s + 100, 200, true, false},
			{time.Hour, false, s + 100 + 650*3500, 200, false, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Guard
			for i, st := range tc.steps {
				if st.see {
					g.See(st.watts)
					continue
				}
				ok, rel := g.Take(st.v, t0.Add(st.at), st.watts)
				if ok != st.ok || rel != st.rel {
					t.Errorf("step %d: %g J at %v, %g W: (ok %v, relevel %v), want (%v, %v)", i, st.v, st.at, st.watts, ok, rel, st.ok, st.rel)
				}
			}
		})
	}
}

// Draw is the highest bound seen since it started from a reading's.
func TestDraw(t *testing.T) {
	var d Draw
	for i, c := range []struct {
		from bool
		w    float64
		want float64
	}{
		{false, 200, 200}, {false, 1400, 1400}, {false, 200, 1400},
		{true, 200, 200}, {false, 100, 200}, {false, 300, 300},
	} {
		if c.from {
			d.From(c.w)
			if d.w != c.want {
				t.Errorf("%d: From(%g) = %g, want %g", i, c.w, d.w, c.want)
			}
			continue
		}
		if got := d.See(c.w); got != c.want {
			t.Errorf("%d: See(%g) = %g, want %g", i, c.w, got, c.want)
		}
	}
}

// Bound is the bound a refused reading was refused by: the highest since
// the last reading taken, not the sample's own.
func TestBound(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var g Guard
	g.Take(1e9, t0, 1400)
	g.See(2000)
	if ok, _ := g.Take(0, t0.Add(time.Second), 200); ok || g.Bound() != 2000 {
		t.Errorf("refused %v, bound %g; want refused by 2000 W", !ok, g.Bound())
	}
	if ok, _ := g.Take(1e9+100, t0.Add(2*time.Second), 200); !ok || g.Bound() != 200 {
		t.Errorf("taken %v, bound %g; want taken, bound from it 200 W", ok, g.Bound())
	}
}
