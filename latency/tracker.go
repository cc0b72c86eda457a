package latency

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
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

	// judging serializes observe. What an answer is judged by changes
	// only under it: what observe alone reads (judged) is reachable only
	// through judging.lock; prev and lastScrape, which Status reads
	// too, are written holding judging (by the functions given its
	// *judged) and mu, and read under either. So observe computes the
	// answer's delta, which costs as much as the answer has series,
	// without mu; it takes mu to write prev and lastScrape and what
	// Status shows. Status, and a Pool.Set, thus never wait on a delta.
	// (TestJudgedOnlyUnderJudging checks the rule.)
	judging judgingLock
	// beforeJudge, set by tests, is called as observe begins to judge
	// an answer, holding judging but not mu.
	beforeJudge func()

	mu         sync.Mutex
	prev       *histo
	deltas     []timedDelta
	reqTotal   float64
	goodTotal  float64
	epoch      uint64 // Status.Epoch: set by the Pool before the tracker is shared
	up         bool
	read       bool // read at least once, the read succeeding or not
	measured   bool // Status.Measured: a delta counted, past the baseline
	errsTotal  uint64
	lastErr    string
	status     Status
	lastScrape time.Time
	retryAt    time.Time // no scrape before it: the source's Retry-After
	// interval is how often the source is scraped (0: unknown), against
	// which a delta tells that it covers a gap (see windowPieces).
	interval time.Duration

	logs logState // the Pool's rate-limited log lines about the source
}

// judged is what observe alone keeps to judge an answer: the last refused
// one and the servers seen.
type judged struct {
	refused   *histo    // the last refused answer, while the next is awaited
	refusedAt time.Time // when it came
	servers   servers   // telling one server from several (replicas.go)
}

// judgingLock serializes observe and holds what it alone keeps
// (guarded), reachable only through lock.
type judgingLock struct {
	mu      sync.Mutex
	guarded judged
}

// lock takes the lock: what it guards, and the unlock.
func (l *judgingLock) lock() (*judged, func()) {
	l.mu.Lock()
	return &l.guarded, l.mu.Unlock
}

func newSLOTracker(sp Spec) *sloTracker {
	st := &sloTracker{name: sp.Name, src: sp.Source, slo: sp.Objective, window: sp.Window}
	st.status = st.computeLocked(time.Time{})
	return st
}

// setEpoch numbers the tracker (Status.Epoch).
func (s *sloTracker) setEpoch(e uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch, s.status.Epoch = e, e
}

// keepSourceState makes a new tracker start from the source state of old,
// the tracker it replaces, which read the same URL: the source's last
// read, up or down, and its error are the source's, not the counters'.
// (Else a reload that restarts a down source's counters would serve its
// source_up absent until the new tracker's first read: an alert on it
// waiting out its `for:` would start over.) The counters, the window and
// the error count are the new tracker's own, from nothing.
func (s *sloTracker) keepSourceState(old *sloTracker) {
	old.mu.Lock()
	up, read, lastErr := old.up, old.read, old.lastErr
	old.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setSourceLocked(up, read, lastErr)
}

// setSourceLocked sets the source's state, up, read and its last error,
// in the tracker and its status.
func (s *sloTracker) setSourceLocked(up, read bool, lastErr string) {
	s.up, s.read, s.lastErr = up, read, lastErr
	s.status.SourceUp, s.status.SourceRead, s.status.LastError = up, read, lastErr
}

// observe records one successful scrape at time now. A histogram holding a
// value that could not be a count is refused and changes nothing. So is
// one whose process_start_time_seconds shows an earlier answer's process
// come back, another than the previous answer's (see judge, in
// replicas.go): a source's URL must reach one server process. One that
// moved from the previous one faster than counters of requests can is
// refused too; the next answer is then measured from the last accepted
// one, or, when that is implausible too (the jump held: say a replica with
// a long history joined the sum), from the refused one. Either way one
// spike is left out of the counters instead of blocking them. observe
// returns the error, which the caller records with fail. It takes mu only
// to record what it decided, never while it computes (see judging).
func (s *sloTracker) observe(now time.Time, h histo) error {
	if err := checkCounts(h); err != nil {
		return err
	}
	h.serverQuantiles = s.reportedQuantiles(h.serverQuantiles)
	j, unlock := s.judging.lock()
	defer unlock()
	if s.beforeJudge != nil {
		s.beforeJudge()
	}
	if s.prev == nil {
		s.accept(j, time.Time{}, now, h, nil)
		return nil
	}
	return s.judge(j, now, h)
}

// advance counts h, answered at now, from the last accepted answer, when
// the move is plausible (see observe).
func (s *sloTracker) advance(j *judged, now time.Time, h histo) error {
	from := s.lastScrape // when what d counts began
	d, err := plausibleDelta(*s.prev, h, now.Sub(s.lastScrape))
	if err != nil && j.refused != nil {
		// a jump that held: the refused answer is the new base
		if d2, err2 := plausibleDelta(*j.refused, h, now.Sub(j.refusedAt)); err2 == nil {
			d, err, from = d2, nil, j.refusedAt
		}
	}
	if err != nil {
		hc := forNextDelta(h)
		j.refused, j.refusedAt = &hc, now
		return err
	}
	s.accept(j, from, now, h, &d)
	return nil
}

// accept takes h, answered at now, as the new base, counting d (what
// happened from from to now; nil for the first answer, a baseline). The
// caller holds judging (j).
func (s *sloTracker) accept(j *judged, from, now time.Time, h histo, d *histo) {
	kept := forNextDelta(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	j.refused = nil
	s.up, s.read = true, true
	s.lastErr = ""
	s.lastScrape = now
	if d != nil {
		s.measured = true
		reqs, _, _ := d.requests()
		s.reqTotal += reqs
		if s.slo != nil && !d.mean {
			// At most the successes (Triton: its buckets hold the
			// failures' error responses too), so never more than
			// the requests counted.
			s.goodTotal += math.Min(d.good(s.slo.Target.Seconds()), d.goodMax())
		}
		n := len(s.deltas)
		if n > 0 && (!sameBounds(s.deltas[n-1].h.bounds, d.bounds) || s.deltas[n-1].h.mean != d.mean) {
			s.deltas = s.deltas[:0] // bucket layout changed: restart the window
		}
		for _, p := range s.windowPieces(from, now, *d) {
			s.addToWindow(p.t, p.h)
		}
	}
	s.prev = &kept
	s.status = s.computeLocked(now)
}

// forNextDelta is h as a tracker keeps it until the next answer's delta:
// its series share one copy of each bucket layout (a histogram's series
// mostly have the same buckets), instead of one copy each. It changes
// h's series in place: h is the tracker's, from the answer just decoded.
func forNextDelta(h histo) histo {
	if len(h.series) < 2 {
		return h
	}
	layouts := [][]float64{h.bounds}
	for k, sh := range h.series {
		i := slices.IndexFunc(layouts, func(l []float64) bool { return sameBounds(l, sh.bounds) })
		switch {
		case i >= 0:
			sh.bounds = layouts[i]
			h.series[k] = sh
		case len(layouts) < maxLayouts:
			layouts = append(layouts, sh.bounds)
		}
	}
	return h
}

// maxLayouts bounds the bucket layouts forNextDelta shares, so that a
// histogram whose series each have buckets of their own costs it no more
// than series x maxLayouts comparisons.
const maxLayouts = 8

// addToWindow appends d, counted up to time t, to the window.
func (s *sloTracker) addToWindow(t time.Time, d histo) {
	n := len(s.deltas)
	if n > 0 && t.Sub(s.deltas[n-1].t) < s.window/maxWindowEntries {
		// Scrapes closer together than window/maxWindowEntries share
		// one entry, stamped with the first scrape's time.
		s.deltas[n-1].h.add(d)
		return
	}
	// d may share its slices with h (after a counter reset); the
	// entry gets its own cum so that merging into it leaves h intact.
	// Its bounds, never written, are the previous entry's where they
	// are the same (accept restarts the window where they are not).
	if n > 0 && sameBounds(s.deltas[n-1].h.bounds, d.bounds) {
		d.bounds = s.deltas[n-1].h.bounds
	} else {
		d.bounds = append([]float64(nil), d.bounds...)
	}
	d.cum = append([]float64(nil), d.cum...)
	d.serverQuantiles = nil // read from prev alone
	// A delta that is an answer's new values (after a reset) would
	// keep its series in the window for as long as it stays there.
	d.series, d.reqSeries = nil, nil
	s.deltas = append(s.deltas, timedDelta{t: t, h: d})
}

// setInterval records how often the source is scraped.
func (s *sloTracker) setInterval(d time.Duration) {
	s.mu.Lock()
	s.interval = d
	s.mu.Unlock()
}

// gapPieces bounds the window entries one delta over a gap is spread into.
const gapPieces = 32

// windowPieces is what of d, the requests counted from from to now, goes
// into the window, and when. A delta of one scrape interval is d itself
// at now. A delta over a gap (the source unreachable or failing for more
// than one interval, then back: it counted all the while) covers time
// that is partly or wholly before the window; stamped at now it would put
// every request of the gap in the window at once, and keep them there for
// a whole window, which is not the rate of the window. It is spread
// instead as if its requests had come at a steady rate over the gap (the
// counters cannot tell more): the part inside the window, as up to
// gapPieces entries across it, so that it also leaves the window as time
// passes; the part before the window is in the counters only.
func (s *sloTracker) windowPieces(from, now time.Time, d histo) []timedDelta {
	gap := now.Sub(from)
	// Up to two intervals: a late scrape, not a gap (and one interval's
	// requests are as precise as the window gets).
	if s.interval <= 0 || gap <= 2*s.interval || from.IsZero() {
		return []timedDelta{{t: now, h: d}}
	}
	start := from
	if cut := now.Add(-s.window); cut.After(start) {
		start = cut
	}
	span := now.Sub(start)
	width := max(s.interval, s.window/gapPieces)
	k := int((span + width - 1) / width)
	k = max(1, min(k, gapPieces))
	share := span.Seconds() / gap.Seconds() / float64(k)
	out := make([]timedDelta, k)
	for i := range out {
		out[i] = timedDelta{t: start.Add(span * time.Duration(i+1) / time.Duration(k)), h: scaled(d, share)}
	}
	return out
}

// scaled is d with every count (timed ones too) and sum times f.
func scaled(d histo, f float64) histo {
	o := histo{bounds: d.bounds, count: d.count * f, sum: d.sum * f, timed: d.timed * f, mean: d.mean, cum: make([]float64, len(d.cum))}
	for i, c := range d.cum {
		o.cum[i] = c * f
	}
	if d.req.set {
		o.req = d.req.times(f)
	}
	return o
}

// reportedQuantiles is the part of a source's own quantiles that a Status
// reports (ReportedQuantiles and the objective's), nil for none: a summary
// may list any number of quantiles, and the tracker keeps only these.
func (s *sloTracker) reportedQuantiles(all map[float64]float64) map[float64]float64 {
	var out map[float64]float64
	for q, v := range all {
		if slices.Contains(ReportedQuantiles, q) || s.slo != nil && q == s.slo.Quantile {
			if out == nil {
				out = map[float64]float64{}
			}
			out[q] = v
		}
	}
	return out
}

// maxCount is the largest value accepted as a count (and as a sum of
// seconds): 2^53, beyond which float64 no longer holds every integer, so
// that adding later deltas to a total would silently do nothing.
const maxCount = 1 << 53

// checkCounts refuses a histogram holding a value that could not be a
// count or a sum of latencies: negative, NaN, infinite or above maxCount.
func checkCounts(h histo) error {
	bad := func(v float64) bool { return !(v >= 0 && v <= maxCount) } // NaN fails both
	if bad(h.count) {
		return fmt.Errorf("request count %v is not a plausible counter value (0 to 2^53)", h.count)
	}
	if bad(h.sum) {
		return fmt.Errorf("latency sum %v is not a plausible counter value (0 to 2^53)", h.sum)
	}
	for i, c := range h.cum {
		if bad(c) {
			return fmt.Errorf("bucket le=%v count %v is not a plausible counter value (0 to 2^53)", h.bounds[i], c)
		}
	}
	return nil
}

// Rates beyond which a move between two scrapes is not believed: more
// requests per second than any server (or set of replicas one source
// sums) completes, or more seconds of latency per second than that many
// requests of 1,000 s each.
const (
	maxRequestRate = 1e6
	maxLatencyRate = maxRequestRate * 1000
)

// plausibleDelta is cur - prev, series by series (seriesDelta), when
// checkMove accepts it.
func plausibleDelta(prev, cur histo, elapsed time.Duration) (histo, error) {
	d, reset := seriesDelta(prev, cur)
	return d, checkMove(d, reset, elapsed)
}

// checkMove refuses a delta (cur since prev, or cur alone after a reset)
// larger than the rates above allow in the elapsed time: a counter that
// jumps, or falls to rise again by that much, is not counting requests.
// Where the source counts its requests apart from its histogram (Triton),
// both are checked.
func checkMove(d histo, reset bool, elapsed time.Duration) error {
	secs := math.Max(elapsed.Seconds(), 1)
	what := "rose by"
	if reset {
		what = "restarted (it fell) and reached"
	}
	reqs, _, reqSum := d.requests()
	switch {
	case d.count > maxRequestRate*secs:
		return fmt.Errorf("request count %s %v in %s, more than %v requests a second: not a plausible counter", what, d.count, elapsed.Round(time.Millisecond), maxRequestRate)
	case reqs > maxRequestRate*secs:
		return fmt.Errorf("request counters %s %v in %s, more than %v requests a second: not a plausible counter", what, reqs, elapsed.Round(time.Millisecond), maxRequestRate)
	case math.Max(d.sum, reqSum) > maxLatencyRate*secs:
		return fmt.Errorf("latency sum %s %v s in %s: not a plausible counter", what, math.Max(d.sum, reqSum), elapsed.Round(time.Millisecond))
	}
	return nil
}

// fail records a failed scrape at time now.
func (s *sloTracker) fail(now time.Time, err error) { s.failUntil(now, err, time.Time{}) }

// failUntil records a failed scrape after which the source is not to be
// scraped before until (zero: at the next interval).
func (s *sloTracker) failUntil(now time.Time, err error, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAt = until
	s.up, s.read = false, true
	s.errsTotal++
	s.lastErr = clip.Text(err.Error(), maxErrLen)
	s.status = s.computeLocked(now)
}

func (s *sloTracker) computeLocked(now time.Time) Status {
	st := Status{
		Window:            s.window,
		Quantiles:         map[float64]float64{},
		RequestsTotal:     s.reqTotal,
		GoodRequestsTotal: s.goodTotal,
		Epoch:             s.epoch,
		SourceUp:          s.up,
		SourceRead:        s.read,
		Measured:          s.measured,
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
	reqs, timed, sum := w.requests()
	if reqs > 0 {
		st.WindowRequests = reqs
	}
	if timed > 0 {
		// Over the requests whose duration the sum holds: Triton's
		// failures are counted as requests, but not timed.
		m := sum / timed
		st.MeanSeconds = &m
	}
	if mean && s.up && s.prev != nil {
		// The source's own quantiles (a summary), over its own window.
		for q, v := range s.prev.serverQuantiles { // the reported ones alone
			st.Quantiles[q] = v
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
				// failure is not a good request, and good requests
				// are at most the successes.
				a := math.Min(w.good(st.TargetSeconds), w.goodMax()) / math.Max(reqs, w.count)
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
