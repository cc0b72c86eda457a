package latency

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// A source's URL must reach one server process. Behind a Kubernetes
// Service each scrape may reach another ready pod; the pods serve the same
// series with histories of their own, so the cumulative counts go back and
// forth, and taking each fall for a counter reset counted a pod's whole
// history at every switch (two pods of 100,000 and 40,000 requests, 380
// requests served in 20 scrapes: 941,190 counted). judge tells such
// answers apart and refuses them, counting nothing, while they go on.
//
// Where answers carry process_start_time_seconds, it names the process:
// a start after the previous answer is a restart (counted as one); a start
// before it that is not the previous answer's is another process that was
// running all along, and a fall with the same start time is not a restart.
// A start time within startJitter of the previous one, no count fallen, is
// the same process. Without it, a fall followed, within seesawHorizon
// scrapes, by a count above the one before the fall (or, for a fall within
// that watch, a crash loop, before the first fall) is the other server
// back; the fall itself is counted at once when its new values are within
// what the source was serving (a restart counts only what came since it),
// else held until the horizon has passed. For seesawGuard answers after a
// fall or a seesaw, a rise past the highest counts seen before, in one step
// and beyond that rate, is held likewise: a fall back below them within
// seesawHorizon answers is another server, else it was one server's burst.
// Any fall after a seesaw is another server too.
//
// Series are each model's (or label set's) own: Triton's counters alone
// are judged by model, never by their total, which falls when one model
// is unloaded or reloaded.
//
// What it keeps is bounded whatever the number of scrapes: at most
// seesawHorizon held answers, the previous answer, and a few counts per
// series.

const (
	// seesawHorizon is how many scrapes after a fall a rise above the
	// count before it is taken for another server's answer.
	seesawHorizon = 2
	// seesawCalm is how many answers in a row, each of the same process
	// as the one before (same start time within startJitter, no count
	// fallen), end a seesaw: counting resumes from the last but one.
	seesawCalm = 3
	// seesawGuard is how many answers after a fall or a seesaw, without
	// start times, keep the highest counts seen before, against which a
	// rise from below in one step may be the server that showed them
	// back (held, as a fall is, until a fall back below them tells).
	seesawGuard = 40
	// startJitter is how far a start time may move and still name the
	// same process, when no count fell: client_golang derives it from
	// the boot time in /proc/stat at each scrape, in whole seconds, so a
	// clock step moves it.
	startJitter = 2
	// startSkew is how far a process's start time may be before the
	// previous answer and still be taken for a restart after it: the
	// server's clock against this one's.
	startSkew = 5 * time.Second
	// restartSlack is how many times the source's recent request rate a
	// fall's new values (or a rise past the highest counts seen) may
	// reach over the time since the previous answer and be taken for one
	// server's traffic.
	restartSlack = 4
)

// servers is what a tracker keeps to tell one server's answers from
// several servers': a few answers and a few counts per series, whatever
// the number of scrapes.
type servers struct {
	held   []heldAnswer // after a fall, until seesawHorizon scrapes passed
	on     bool         // in a seesaw: answers are refused
	last   *histo       // while on: the previous answer, refused too
	lastAt time.Time
	calm   int
	why    string // what began the seesaw
	// Without start times: the counts before a fall, of the series that
	// fell, watched for watch more answers; the highest counts of the
	// series that fell or went back and forth (marks), kept for guard
	// more answers, and whether they went back and forth (seen).
	before map[string]float64
	watch  int
	marks  map[string]float64
	guard  int
	seen   bool
	// After a rise past the marks, in one step and beyond the rate: the
	// counts of the held answer, watched for rise more answers; a fall
	// from them to below the marks is the other server gone again.
	risen map[string]float64
	rise  int
	// rate is the source's recent request rate a second: the largest of
	// a step's without a reset, decaying by 1/16 a step.
	rate float64
}

// noteRate records a step of reqs requests over elapsed, no series reset.
func (sv *servers) noteRate(reqs float64, elapsed time.Duration) {
	r := reqs / math.Max(elapsed.Seconds(), 1)
	sv.rate = math.Max(r, sv.rate*15/16)
}

type heldAnswer struct {
	h  histo
	at time.Time
}

// errSeesaw is the error of an answer refused in a seesaw.
func errSeesaw(why string) error {
	return fmt.Errorf("the counts went back and forth (%s): several servers behind one URL? a source must reach one server process (a pod, not a Service)", why)
}

// judge counts or refuses h, answered at now, after s.prev.
func (s *sloTracker) judge(now time.Time, h histo) error {
	sv := &s.servers
	if sv.on {
		return s.inSeesaw(now, h)
	}
	p := s.prev
	base, cur := seriesCounts(p), seriesCounts(&h)
	if p.start > 0 && h.start > 0 {
		_, _, _, fell := firstFall(base, cur)
		if h.start != p.start && (fell || !sameStart(p.start, h.start)) {
			if h.start < unixSeconds(s.lastScrape.Add(-startSkew)) {
				return s.seesaw(now, h, fmt.Sprintf("process_start_time_seconds went from %v to %v, a process started before the previous answer", p.start, h.start))
			}
			// A restart since the previous answer: all h counts
			// came after it.
			d := h
			d.series, d.reqSeries = nil, nil
			if err := checkMove(d, true, now.Sub(s.lastScrape)); err != nil {
				return err
			}
			s.accept(s.lastScrape, now, h, &d)
			return nil
		}
		if k, from, to, ok := firstFall(base, cur); ok {
			return s.seesaw(now, h, fmt.Sprintf("%s fell from %v to %v while process_start_time_seconds stayed %v", k, from, to, h.start))
		}
		return s.advance(now, h)
	}
	if sv.rise > 0 {
		if k, ok := fellBelow(sv.marks, sv.risen, cur); ok {
			return s.seesaw(now, h, fmt.Sprintf("%s rose at once past the %v another server had shown, then fell from %v to %v", seriesName(k), sv.marks[k], sv.risen[k], cur[k]))
		}
		sv.risen = cur
		if sv.rise--; sv.rise > 0 {
			s.hold(now, h)
			return nil
		}
		// No fall back: one server's burst. The held answers are
		// counted as they would have been at once.
		return s.release(now, h)
	}
	if sv.guard > 0 {
		if k, from, to, ok := firstFall(base, cur); ok && sv.seen {
			return s.seesaw(now, h, fmt.Sprintf("%s fell from %v to %v after counts that went back and forth", k, from, to))
		}
		if k, ok := crossed(sv.marks, base, cur); ok && !s.likeTraffic(now, h) {
			if len(sv.held) > 0 {
				return s.seesaw(now, h, fmt.Sprintf("%s rose from %v to %v at once, past the %v another server had shown", seriesName(k), base[k], cur[k], sv.marks[k]))
			}
			// Another server's answer, or one server's burst after
			// a restart and a quiet spell: held until seesawHorizon
			// answers tell whether the counts fall back.
			sv.risen, sv.rise = cur, seesawHorizon
			s.hold(now, h)
			return nil
		}
		if sv.guard--; sv.guard == 0 {
			sv.marks, sv.seen = nil, false
		}
	}
	watching := sv.watch > 0
	if sv.watch > 0 {
		for _, k := range sortedKeys(sv.before) {
			if v, ok := cur[k]; ok && v > sv.before[k] {
				return s.seesaw(now, h, fmt.Sprintf("%s fell from %v and rose again to %v", seriesName(k), sv.before[k], v))
			}
		}
		sv.watch--
		if len(sv.held) > 0 {
			if sv.watch > 0 {
				s.hold(now, h)
				return nil
			}
			// No rise back: a restart. The held answers are
			// counted as they would have been at once.
			return s.release(now, h)
		}
	}
	if fallen := fallenFrom(base, cur); fallen != nil {
		if watching {
			// A second fall within the watch (a crash loop): a rise
			// above the shorter life's count is the next life's.
			fallen = raise(fallen, sv.before)
		}
		sv.before, sv.watch = fallen, seesawHorizon
		sv.marks, sv.guard = raise(sv.marks, fallen), seesawGuard
		if !s.likeTraffic(now, h) {
			s.hold(now, h)
			return nil
		}
	}
	return s.advance(now, h)
}

// release counts the held answers, as they would have been at once, and
// then h, answered at now.
func (s *sloTracker) release(now time.Time, h histo) error {
	held := s.servers.held
	s.servers.held = nil
	for _, a := range held {
		_ = s.advance(a.at, a.h) // one refused is the refused base, as ever
	}
	return s.advance(now, h)
}

// hold keeps h, answered at now after a fall, uncounted until
// seesawHorizon scrapes have told whether the previous server comes back.
// The scrape succeeded.
func (s *sloTracker) hold(now time.Time, h histo) {
	s.servers.held = append(s.servers.held, heldAnswer{h: h, at: now})
	s.up = true
	s.lastErr = ""
	s.status = s.computeLocked(now)
}

// likeTraffic says whether what h counts since s.prev (after a fall:
// its new values) is no more than the source was serving, restartSlack
// times its recent rate: what a restart since the previous answer, or
// the traffic of one server, would show, unlike another server's
// history.
func (s *sloTracker) likeTraffic(now time.Time, h histo) bool {
	d, _ := seriesDelta(*s.prev, h)
	reqs, _, _ := d.requests()
	secs := now.Sub(s.lastScrape).Seconds()
	if s.interval > 0 {
		secs = math.Max(secs, s.interval.Seconds())
	}
	return reqs <= restartSlack*s.servers.rate*secs
}

// seesaw begins a seesaw with h, answered at now: refused, as the answers
// after it are while it goes on.
func (s *sloTracker) seesaw(now time.Time, h histo, why string) error {
	sv := &s.servers
	if h.start == 0 || s.prev.start == 0 {
		sv.marks = raise(sv.marks, seriesCounts(s.prev))
		for _, a := range sv.held {
			raise(sv.marks, seriesCounts(&a.h))
		}
		raise(sv.marks, seriesCounts(&h))
		sv.seen, sv.guard = true, seesawGuard
	}
	hc := h
	sv.on, sv.last, sv.lastAt, sv.calm, sv.why, sv.held, sv.guard = true, &hc, now, 0, why, nil, 0
	sv.before, sv.watch, sv.risen, sv.rise = nil, 0, nil, 0
	s.refused = nil
	return errSeesaw(why)
}

// inSeesaw refuses h, answered at now in a seesaw, unless it is the
// seesawCalm-th answer in a row of the process before it: then counting
// resumes, from the answer before.
func (s *sloTracker) inSeesaw(now time.Time, h histo) error {
	sv := &s.servers
	last, lastAt := sv.last, sv.lastAt
	lc, cur := seriesCounts(last), seriesCounts(&h)
	_, _, _, fell := firstFall(lc, cur)
	calm := !fell
	if h.start > 0 && last.start > 0 {
		calm = calm && sameStart(last.start, h.start)
	} else if sv.marks != nil {
		_, up := crossed(sv.marks, lc, cur)
		calm = calm && !up
		raise(sv.marks, cur)
	}
	hc := h
	sv.last, sv.lastAt = &hc, now
	if !calm {
		sv.calm = 0
		return errSeesaw(sv.why)
	}
	if sv.calm++; sv.calm < seesawCalm {
		return errSeesaw(sv.why)
	}
	sv.on, sv.last, sv.calm = false, nil, 0
	if sv.marks != nil {
		sv.guard = seesawGuard
	}
	s.prev, s.lastScrape, s.refused = last, lastAt, nil
	return s.advance(now, h)
}

// seriesCounts are h's request counts by series ("h" and the series'
// labels), and its request counters' ("r" and theirs) where it has them.
// A total ("h" or "r" alone) is there only where it is the source's one
// count of its kind, never beside the series it sums.
func seriesCounts(h *histo) map[string]float64 {
	out := make(map[string]float64, len(h.series)+len(h.reqSeries)+2)
	if h.series != nil {
		for k, sh := range h.series {
			out["h"+k] = sh.count
		}
	} else if h.reqSeries == nil {
		out["h"] = h.count
	}
	// Triton's counters alone (no series, reqSeries): each model's
	// counters are there, and no total over them, which falls when one
	// model is unloaded or reloaded though none went back and forth.
	if h.reqSeries != nil {
		for k, r := range h.reqSeries {
			out["r"+k] = r.count
		}
	} else if h.req.set {
		out["r"] = h.req.count
	}
	return out
}

// firstFall is the first series (in key order) whose count fell from a
// to b.
func firstFall(a, b map[string]float64) (k string, from, to float64, ok bool) {
	for _, k := range sortedKeys(a) {
		if v, in := b[k]; in && v < a[k] {
			return seriesName(k), a[k], v, true
		}
	}
	return "", 0, 0, false
}

// fallenFrom are the counts in a of the series whose count fell from a
// to b; nil for none.
func fallenFrom(a, b map[string]float64) map[string]float64 {
	var out map[string]float64
	for k, v := range a {
		if w, in := b[k]; in && w < v {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = v
		}
	}
	return out
}

// fellBelow is the first series (in key order) that fell from a to b,
// to below its high mark.
func fellBelow(high, a, b map[string]float64) (string, bool) {
	for _, k := range sortedKeys(high) {
		av, ina := a[k]
		bv, inb := b[k]
		if ina && inb && bv < av && bv < high[k] {
			return k, true
		}
	}
	return "", false
}

// sameStart says whether start times a and b name the same process when
// no count fell: equal, or within startJitter (see there).
func sameStart(a, b float64) bool { return math.Abs(a-b) <= startJitter }

// crossed is the first series (in key order) that rose from under its
// high mark in a to above it in b.
func crossed(high, a, b map[string]float64) (string, bool) {
	for _, k := range sortedKeys(high) {
		av, ina := a[k]
		bv, inb := b[k]
		if ina && inb && av < high[k] && bv > high[k] {
			return k, true
		}
	}
	return "", false
}

// raise sets each count of high to at least c's, and returns high (made
// when nil).
func raise(high, c map[string]float64) map[string]float64 {
	if high == nil {
		high = make(map[string]float64, len(c))
	}
	for k, v := range c {
		if v > high[k] {
			high[k] = v
		}
	}
	return high
}

// seriesName names a seriesCounts key in an error.
func seriesName(k string) string {
	what := "the request count"
	if k[0] == 'r' {
		what = "the request counter"
	}
	if len(k) > 1 {
		return what + " of {" + clipKey(k[1:]) + "}"
	}
	return what
}

// clipKey is a series key as an error quotes it.
func clipKey(k string) string {
	return clip.Text(strings.TrimSuffix(k, ","), maxQuoted)
}

// unixSeconds is t in seconds since the epoch.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
