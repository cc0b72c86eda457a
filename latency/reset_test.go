package latency

import (
	"fmt"
	"slices"
	"testing"
)

// shot is one series' counters in one answer: its histogram (count,
// sum, and the cumulative counts at 0.1 and 1 s) and, for Triton, its
// request counters (req; alone where mean).
type shot struct {
	count, sum float64
	cum        []float64
	req        *requestCounts
	mean       bool
}

// answerOf is an answer summing the series given, as extract reads it.
func answerOf(series map[string]shot) histo {
	var h histo
	for _, k := range sortedKeys(series) {
		s := series[k]
		if s.req != nil {
			if h.reqSeries == nil {
				h.reqSeries = map[string]requestCounts{}
			}
			h.reqSeries[k] = *s.req
			h.req = h.req.plus(*s.req)
		}
		if s.mean {
			h.mean = true
			h.count += s.req.count
			h.timed += s.req.timed
			h.sum += s.req.sum
			continue
		}
		if h.series == nil {
			h.series = map[string]histo{}
			h.bounds, h.cum = []float64{0.1, 1}, make([]float64, 2)
		}
		h.series[k] = histo{bounds: []float64{0.1, 1}, cum: slices.Clone(s.cum), count: s.count, sum: s.sum}
		h.count += s.count
		h.sum += s.sum
		for i, c := range s.cum {
			h.cum[i] += c
		}
	}
	if h.mean {
		h.req = requestCounts{}
	}
	return h
}

// rq is request counters of count requests, succ of them successes (timed,
// 10 ms each).
func rq(count, succ float64) *requestCounts {
	return &requestCounts{count: count, timed: succ, sum: succ / 100, succ: succ, set: true}
}

// TestResetRuleBothPaths: the counter-reset rule is one, whichever way
// the delta is taken: a series alone (the whole answer's delta) counts
// what it counts beside another, idle series (series by series). A
// request counter that fell, none rising, is a restart (the new values
// counted); any other fall counts nothing, the answer the base of the
// next; no fall, the rise. A histogram's sum falling is no fall (a
// negative observation), but for Triton's counters alone (the mean's):
// it counted nothing of the interval's requests. The sum counted is
// never below 0.
func TestResetRuleBothPaths(t *testing.T) {
	hist := func(count, sum, c1, c2 float64) shot { return shot{count: count, sum: sum, cum: []float64{c1, c2}} }
	triton := func(count, sum, c1, c2 float64, req *requestCounts) shot {
		s := hist(count, sum, c1, c2)
		s.req = req
		return s
	}
	alone := func(req *requestCounts) shot { return shot{req: req, mean: true} }
	tests := []struct {
		name      string
		prev, cur shot
		// what the delta counts: requests, successes (at most good),
		// observations at or under 0.1 s, and whether it is a restart
		requests, succ, fast float64
		reset                bool
	}{
		{"histogram rises", hist(100, 10, 50, 90), hist(110, 11, 55, 99), 10, 10, 5, false},
		{"requests fall", hist(100, 10, 50, 90), hist(5, 0.5, 3, 5), 5, 5, 3, true},
		// all slow before the restart, all fast after: the count decides
		{"requests fall, a bucket rises", hist(100, 100, 0, 0), hist(50, 1, 50, 50), 50, 50, 50, true},
		{"bucket counts fall", hist(100, 10, 50, 90), hist(110, 11, 40, 100), 0, 0, 0, false},
		// a negative observation (a clock stepped back): Prometheus
		// judges a reset by the count and buckets, the sum is not a
		// counter of its own
		{"sum falls", hist(100, 10, 50, 90), hist(110, 9, 55, 99), 10, 10, 5, false},
		{"sum falls, the count doubles", hist(100, 50, 90, 100), hist(200, 49.9, 150, 200), 100, 100, 60, false},
		{"Triton rises", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 11, 55, 99, rq(121, 110)), 11, 10, 5, false},
		{"Triton requests fall", triton(100, 10, 50, 90, rq(110, 100)), triton(5, 0.5, 3, 5, rq(6, 5)), 6, 5, 3, true},
		// a model's histogram and request counters are one series:
		// any fall of one but a restart of all counts nothing of both
		{"Triton good falls while requests rise", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 11, 55, 99, rq(130, 90)), 0, 0, 0, false},
		{"Triton failures fall", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 11, 55, 99, rq(115, 110)), 0, 0, 0, false},
		{"Triton failures fall, requests fall", triton(100, 10, 50, 90, rq(150, 100)), triton(110, 11, 55, 99, rq(120, 110)), 0, 0, 0, false},
		{"Triton bucket counts fall", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 11, 40, 99, rq(121, 110)), 0, 0, 0, false},
		{"Triton histogram count falls", triton(100, 10, 50, 90, rq(110, 100)), triton(5, 0.5, 3, 5, rq(121, 110)), 0, 0, 0, false},
		{"Triton histogram sum falls", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 9, 55, 99, rq(121, 110)), 11, 10, 5, false},
		{"Triton duration falls", triton(100, 10, 50, 90, rq(110, 100)), triton(110, 11, 55, 99, &requestCounts{count: 121, timed: 110, sum: 0.5, succ: 110, set: true}), 0, 0, 0, false},
		{"Triton counters alone rise", alone(rq(110, 100)), alone(rq(121, 110)), 11, 11, 0, false},
		{"Triton counters alone fall", alone(rq(110, 100)), alone(rq(6, 5)), 6, 6, 0, true},
		// the duration is the mean's: its fall is no counting on
		{"Triton counters alone: duration falls", alone(rq(110, 100)), alone(&requestCounts{count: 121, timed: 110, sum: 0.5, succ: 110, set: true}), 0, 0, 0, false},
		{"Triton counters alone: failures fall", alone(rq(110, 100)), alone(rq(115, 110)), 0, 0, 0, false},
		{"Triton counters alone: good falls while requests rise", alone(rq(110, 100)), alone(rq(130, 90)), 0, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idle := hist(7, 0.7, 3, 7)
			if tc.prev.req != nil {
				idle.req = rq(8, 7)
			}
			idle.mean = tc.prev.mean
			for _, beside := range []bool{false, true} {
				ps, cs := map[string]shot{"a": tc.prev}, map[string]shot{"a": tc.cur}
				if beside {
					ps["b"], cs["b"] = idle, idle
				}
				prev, cur := answerOf(ps), answerOf(cs)
				if !tc.cur.mean && bySeries(prev, cur) != beside {
					t.Fatalf("beside an idle series %v: taken series by series %v", beside, !beside)
				}
				d, reset := seriesDelta(prev, cur)
				reqs, _, _ := d.requests()
				how := fmt.Sprintf("beside an idle series %v", beside)
				if !near(reqs, tc.requests) || !near(d.goodMax(), tc.succ) || !near(d.good(0.1), tc.fast) || reset != tc.reset {
					t.Errorf("%s: %v requests, %v successes, %v fast, restart %v; want %v, %v, %v, %v",
						how, reqs, d.goodMax(), d.good(0.1), reset, tc.requests, tc.succ, tc.fast, tc.reset)
				}
				if d.sum < 0 {
					t.Errorf("%s: a sum of latencies of %v", how, d.sum)
				}
			}
		})
	}
}

// FuzzResetRule: whatever one series' counters do between two answers,
// it counts the same alone (the whole answer's delta) as beside an idle
// series (series by series), never more successes than requests, nor a
// negative count or sum.
func FuzzResetRule(f *testing.F) {
	f.Add(uint8(0), 100.0, 10.0, 50.0, 90.0, 100.0, 10.0, 110.0, 11.0, 55.0, 99.0, 121.0, 5.0)
	f.Add(uint8(1), 100.0, 10.0, 50.0, 90.0, 100.0, 10.0, 110.0, 11.0, 55.0, 99.0, 90.0, 40.0)
	f.Add(uint8(2), 0.0, 0.0, 0.0, 0.0, 100.0, 10.0, 0.0, 0.0, 0.0, 0.0, 110.0, 6.0)
	f.Fuzz(func(t *testing.T, shape uint8, pc, ps, p1, p2, psucc, pfail, cc, cs, c1, c2, csucc, cfail float64) {
		for _, v := range []float64{pc, ps, p1, p2, psucc, pfail, cc, cs, c1, c2, csucc, cfail} {
			if !(v >= 0 && v <= 1e12) {
				return
			}
		}
		mk := func(count, sum, b1, b2, succ, fail float64) shot {
			b2 = min(b2, count)
			b1 = min(b1, b2)
			s := shot{count: count, sum: sum, cum: []float64{b1, b2}}
			switch shape % 3 {
			case 1:
				s.req = &requestCounts{count: succ + fail, timed: succ, sum: succ / 100, succ: succ, set: true}
			case 2:
				s = shot{req: &requestCounts{count: succ + fail, timed: succ, sum: succ / 100, succ: succ, set: true}, mean: true}
			}
			return s
		}
		prev, cur := mk(pc, ps, p1, p2, psucc, pfail), mk(cc, cs, c1, c2, csucc, cfail)
		idle := mk(7, 0.7, 3, 7, 8, 1)
		type got struct {
			reqs, succ, fast float64
			reset            bool
		}
		var seen []got
		for _, beside := range []bool{false, true} {
			ps, cs := map[string]shot{"a": prev}, map[string]shot{"a": cur}
			if beside {
				ps["b"], cs["b"] = idle, idle
			}
			d, reset := seriesDelta(answerOf(ps), answerOf(cs))
			reqs, _, _ := d.requests()
			g := got{reqs, d.goodMax(), d.good(0.1), reset}
			if g.reqs < 0 || g.succ < 0 || g.fast < 0 || d.sum < 0 || (d.req.set && g.succ > g.reqs+1e-9*max(1, g.reqs)) {
				t.Fatalf("beside an idle series %v: %+v", beside, g)
			}
			seen = append(seen, g)
		}
		a, b := seen[0], seen[1]
		if !near(a.reqs, b.reqs) || !near(a.succ, b.succ) || !near(a.fast, b.fast) || a.reset != b.reset {
			t.Fatalf("alone %+v, beside an idle series %+v", a, b)
		}
	})
}
