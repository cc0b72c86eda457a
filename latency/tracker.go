package latency

import (
	"math"
	"slices"
	"sync"
	"time"
)

// maxWindowEntries bounds the deltas a tracker keeps for its window,
// whatever the window and however often the source is scraped: scrapes
// less than window/maxWindowEntries apart are merged into one entry, which
// then leaves the window at most that much early (about 1.2 s of a 5 m
// window).
const maxWindowEntries = 256

type timedDelta struct {
	t time.Time
	h histo
}

// sloTracker turns successive scrapes of one latency source into its
// Status.
type sloTracker struct {
	name   string
	src    *Source
	slo    *Objective // nil: quantiles only
	window time.Duration

	mu         sync.Mutex
	prev       *histo
	deltas     []timedDelta
	reqTotal   float64
	goodTotal  float64
	up         bool
	errsTotal  uint64
	lastErr    string
	status     Status
	lastScrape time.Time
}

func newSLOTracker(sp Spec) *sloTracker {
	st := &sloTracker{name: sp.Name, src: sp.Source, slo: sp.Objective, window: sp.Window}
	st.status = st.computeLocked(time.Time{})
	return st
}

// observe records one successful scrape at time now.
func (s *sloTracker) observe(now time.Time, h histo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = true
	s.lastErr = ""
	s.lastScrape = now
	if s.prev != nil {
		d := delta(*s.prev, h)
		reqs, _ := d.requests()
		s.reqTotal += reqs
		if s.slo != nil && !d.mean {
			// At most the requests counted: a source whose buckets
			// and request counters disagree (Triton) cannot make the
			// good requests outrun all requests.
			s.goodTotal += math.Min(d.good(s.slo.Target.Seconds()), reqs)
		}
		n := len(s.deltas)
		if n > 0 && (!sameBounds(s.deltas[n-1].h.bounds, d.bounds) || s.deltas[n-1].h.mean != d.mean) {
			s.deltas = s.deltas[:0] // bucket layout changed: restart the window
			n = 0
		}
		if n > 0 && now.Sub(s.deltas[n-1].t) < s.window/maxWindowEntries {
			// Scrapes closer together than window/maxWindowEntries share
			// one entry, stamped with the first scrape's time.
			s.deltas[n-1].h.add(d)
		} else {
			// d may share its slices with h (after a counter reset); the
			// entry gets its own so that merging into it leaves h intact.
			d.bounds = append([]float64(nil), d.bounds...)
			d.cum = append([]float64(nil), d.cum...)
			s.deltas = append(s.deltas, timedDelta{t: now, h: d})
		}
	}
	hc := h
	s.prev = &hc
	s.status = s.computeLocked(now)
}

// fail records a failed scrape at time now.
func (s *sloTracker) fail(now time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = false
	s.errsTotal++
	s.lastErr = err.Error()
	s.status = s.computeLocked(now)
}

func (s *sloTracker) computeLocked(now time.Time) Status {
	st := Status{
		Window:            s.window,
		Quantiles:         map[float64]float64{},
		RequestsTotal:     s.reqTotal,
		GoodRequestsTotal: s.goodTotal,
		SourceUp:          s.up,
		ScrapeErrorsTotal: s.errsTotal,
	}
	if s.slo != nil {
		st.Quantile, st.TargetSeconds = s.slo.Quantile, s.slo.Target.Seconds()
	}
	// drop deltas that left the window
	cut := now.Add(-s.window)
	keep := s.deltas[:0]
	for _, d := range s.deltas {
		if d.t.After(cut) {
			keep = append(keep, d)
		}
	}
	s.deltas = keep
	var w histo
	mean := false
	for _, d := range s.deltas {
		w.add(d.h)
		mean = d.h.mean
	}
	w.mean = mean
	st.GoodKnown = s.slo != nil && s.bucketsKnown()
	if reqs, sum := w.requests(); reqs > 0 {
		m := sum / reqs
		st.MeanSeconds = &m
		st.WindowRequests = reqs
	}
	if mean && s.up && s.prev != nil {
		// The source's own quantiles (a summary), over its own window.
		for q, v := range s.prev.serverQuantiles {
			if slices.Contains(ReportedQuantiles, q) || s.slo != nil && q == s.slo.Quantile {
				st.Quantiles[q] = v
			}
		}
	}
	if w.count > 0 {
		if !mean {
			qs := append([]float64(nil), ReportedQuantiles...)
			if s.slo != nil {
				qs = append(qs, s.slo.Quantile)
			}
			for _, q := range qs {
				if v, ok := w.quantile(q); ok {
					st.Quantiles[q] = v
				}
			}
			if st.GoodKnown {
				// Over all requests: where the source counts failed
				// requests apart from its latency buckets (Triton), a
				// failure is not a good request.
				reqs, _ := w.requests()
				a := w.good(st.TargetSeconds) / math.Max(reqs, w.count)
				a = math.Max(0, math.Min(1, a))
				st.Attainment = &a
			}
		}
	}
	if !st.GoodKnown {
		st.GoodRequestsTotal = 0
	}
	st.LastError = s.lastErr
	return st
}

// bucketsKnown says whether the source gives latency buckets, so that good
// requests can be counted: as its latest scrape showed, or, before the
// first, as its kind promises (Triton's buckets depend on its flags).
func (s *sloTracker) bucketsKnown() bool {
	if s.prev == nil {
		return s.src.Preset != PresetTriton
	}
	return !s.prev.mean
}

// Status returns the latest status (a fresh copy).
func (s *sloTracker) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	q := make(map[float64]float64, len(st.Quantiles))
	for k, v := range st.Quantiles {
		q[k] = v
	}
	st.Quantiles = q
	return st
}
