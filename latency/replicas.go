package latency

import (
	"fmt"
	"slices"
	"time"
)

// A source's URL must reach one server process. Behind a Kubernetes
// Service each scrape may reach another ready pod; the pods serve the same
// series with histories of their own, so the cumulative counts go back and
// forth, and taking each fall for a counter reset counts a pod's whole
// history at every switch (two pods of 100,000 and 40,000 requests, 380
// requests served in 20 scrapes: 941,190 counted).
//
// judge tells such answers apart only where they carry
// process_start_time_seconds, which names the process, by equality alone
// (the counts are asked only of an answer without a start time in a
// seesaw: below):
//   - the previous answer's start time: the same process, and a fall of a
//     count is a counter reset (advance);
//   - a start time none of the recent answers had (the last maxStarts
//     distinct ones): a new process, a restart, counted as a reset
//     whether it is earlier or later (a clock step moves the start time
//     a Go server serves either way);
//   - a start time of a recent answer but not of the previous one: a
//     process came back, so several answer the URL. That answer is
//     refused, counting nothing, and so are the answers after it until
//     seesawCalm in a row, it among them, have one start time. (A
//     process whose start time comes back, its counts rising, cannot be
//     told from two pods serving alike: a Go server's, derived from the
//     boot time at each scrape, can flip between two seconds; it is
//     refused so, as two pods started within a second or with disjoint
//     series would not be if the counts were asked.)
//
// A Service's second pod thus counts its history once, as a restart, at
// the first switch; it is refused from the first switch back.
//
// Without start times (none served, 0, NaN, or several in one answer)
// nothing tells a restart followed by traffic from another server's
// answer: a fall of a series' count is a counter reset, counted as ever,
// and several servers behind one URL are counted wrongly so.
//
// In a seesaw, an answer without a start time (or after one without)
// continues the run where no series' count fell from the answer before.
// Series are each model's (or label set's) own: Triton's counters alone
// are judged by model, never by their total, which falls when one model
// is unloaded or reloaded.
//
// What it keeps is bounded whatever the number of scrapes: maxStarts
// start times, and the previous answer while answers are refused.

const (
	// seesawCalm is how many answers in a row of one process (the same
	// start time; without start times, no count fallen), the one that
	// began the seesaw among them, end it: counting resumes from the
	// last but one.
	seesawCalm = 3
	// maxStarts is how many distinct start times of the recent answers
	// are kept to tell a process come back from a new one.
	maxStarts = 4
)

// servers is what a tracker keeps to tell one server's answers from
// several servers': the recent start times and, while in a seesaw, the
// previous answer.
type servers struct {
	starts []float64 // distinct, the latest first, at most maxStarts
	last   *histo    // in a seesaw (answers refused): the previous answer
	lastAt time.Time
	calm   int
	why    string // what began the seesaw
}

// saw records start (0: none) as the latest start time seen.
func (sv *servers) saw(start float64) {
	if start == 0 || (len(sv.starts) > 0 && sv.starts[0] == start) {
		return
	}
	if i := slices.Index(sv.starts, start); i >= 0 {
		sv.starts = slices.Delete(sv.starts, i, i+1)
	}
	sv.starts = slices.Insert(sv.starts, 0, start)
	if len(sv.starts) > maxStarts {
		sv.starts = sv.starts[:maxStarts]
	}
}

// errSeesaw is the error of an answer refused in a seesaw.
func errSeesaw(why string) error {
	return fmt.Errorf("the counts went back and forth (%s): several servers behind one URL? a source must reach one server process (a pod, not a Service)", why)
}

// judge counts or refuses h, answered at now, after s.prev. The caller
// holds judging (j), not mu (see sloTracker.judging).
func (s *sloTracker) judge(j *judged, now time.Time, h histo) error {
	j.servers.saw(s.prev.start) // the first answer's, judged by none
	defer j.servers.saw(h.start)
	if j.servers.last != nil {
		return s.inSeesaw(j, now, h)
	}
	p := s.prev
	if p.start == 0 || h.start == 0 || h.start == p.start || !slices.Contains(j.servers.starts, h.start) {
		return s.advance(j, now, h) // a fall is a counter reset
	}
	return s.seesaw(j, now, h, fmt.Sprintf("process_start_time_seconds went from %v back to %v, an earlier answer's", p.start, h.start))
}

// seesaw begins a seesaw with h, answered at now: refused, as the answers
// after it are while it goes on.
func (s *sloTracker) seesaw(j *judged, now time.Time, h histo, why string) error {
	hc := forNextDelta(h)
	j.servers = servers{starts: j.servers.starts, last: &hc, lastAt: now, calm: 1, why: why}
	j.refused = nil
	return errSeesaw(why)
}

// inSeesaw refuses h, answered at now in a seesaw, unless it is the
// seesawCalm-th answer in a row of one process: then counting resumes,
// from the answer before.
func (s *sloTracker) inSeesaw(j *judged, now time.Time, h histo) error {
	sv := &j.servers
	last, lastAt := sv.last, sv.lastAt
	calm := h.start == last.start
	if h.start == 0 || last.start == 0 {
		calm = !fell(seriesCounts(last), seriesCounts(&h))
	}
	hc := forNextDelta(h)
	sv.last, sv.lastAt = &hc, now
	if !calm {
		sv.calm = 1 // the first of a new run
		return errSeesaw(sv.why)
	}
	if sv.calm++; sv.calm < seesawCalm {
		return errSeesaw(sv.why)
	}
	j.servers = servers{starts: sv.starts}
	s.mu.Lock()
	s.prev, s.lastScrape = last, lastAt // (refused: cleared as the seesaw began)
	s.mu.Unlock()
	return s.advance(j, now, h)
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

// fell says whether a series' count fell from a to b.
func fell(a, b map[string]float64) bool {
	for k, v := range a {
		if w, in := b[k]; in && w < v {
			return true
		}
	}
	return false
}
