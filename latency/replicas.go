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
// forth, and taking each fall for a counter reset counts a pod's whole
// history at every switch (two pods of 100,000 and 40,000 requests, 380
// requests served in 20 scrapes: 941,190 counted).
//
// judge tells such answers apart only where they carry
// process_start_time_seconds, which names the process: a start after the
// previous answer is a restart (its counts all new); a start before it
// that is not the previous answer's is another process that was running
// all along, and a fall with the same start time is not a restart. A start
// time within startJitter of the previous one, no count fallen, is the
// same process. Answers of another process are refused, counting nothing,
// until seesawCalm in a row are each of the process before.
//
// Without start times nothing tells a restart followed by traffic from
// another server's answer: a fall of a series' count is a counter reset,
// counted as ever, and several servers behind one URL are counted wrongly
// so.
//
// Series are each model's (or label set's) own: Triton's counters alone
// are judged by model, never by their total, which falls when one model
// is unloaded or reloaded.
//
// What it keeps is bounded whatever the number of scrapes: the previous
// answer, while answers are refused.

const (
	// seesawCalm is how many answers in a row, each of the same process
	// as the one before (same start time within startJitter, no count
	// fallen), end a seesaw: counting resumes from the last but one.
	seesawCalm = 3
	// startJitter is how far a start time may move and still name the
	// same process, when no count fell: client_golang derives it from
	// the boot time in /proc/stat at each scrape, in whole seconds, so a
	// clock step moves it.
	startJitter = 2
	// startSkew is how far a process's start time may be before the
	// previous answer and still be taken for a restart after it: the
	// server's clock against this one's.
	startSkew = 5 * time.Second
)

// servers is what a tracker keeps to tell one server's answers from
// several servers': while in a seesaw, the previous answer.
type servers struct {
	on     bool   // in a seesaw: answers are refused
	last   *histo // while on: the previous answer, refused too
	lastAt time.Time
	calm   int
	why    string // what began the seesaw
}

// errSeesaw is the error of an answer refused in a seesaw.
func errSeesaw(why string) error {
	return fmt.Errorf("the counts went back and forth (%s): several servers behind one URL? a source must reach one server process (a pod, not a Service)", why)
}

// judge counts or refuses h, answered at now, after s.prev.
func (s *sloTracker) judge(now time.Time, h histo) error {
	if s.servers.on {
		return s.inSeesaw(now, h)
	}
	p := s.prev
	if p.start == 0 || h.start == 0 {
		return s.advance(now, h) // a fall is a counter reset
	}
	k, from, to, fell := firstFall(seriesCounts(p), seriesCounts(&h))
	if h.start != p.start && (fell || !sameStart(p.start, h.start)) {
		if h.start < unixSeconds(s.lastScrape.Add(-startSkew)) {
			return s.seesaw(now, h, fmt.Sprintf("process_start_time_seconds went from %v to %v, a process started before the previous answer", p.start, h.start))
		}
		// A restart since the previous answer: all h counts came
		// after it.
		d := h
		d.series, d.reqSeries = nil, nil
		if err := checkMove(d, true, now.Sub(s.lastScrape)); err != nil {
			return err
		}
		s.accept(s.lastScrape, now, h, &d)
		return nil
	}
	if fell {
		return s.seesaw(now, h, fmt.Sprintf("%s fell from %v to %v while process_start_time_seconds stayed %v", k, from, to, h.start))
	}
	return s.advance(now, h)
}

// seesaw begins a seesaw with h, answered at now: refused, as the answers
// after it are while it goes on.
func (s *sloTracker) seesaw(now time.Time, h histo, why string) error {
	hc := h
	s.servers = servers{on: true, last: &hc, lastAt: now, why: why}
	s.refused = nil
	return errSeesaw(why)
}

// inSeesaw refuses h, answered at now in a seesaw, unless it is the
// seesawCalm-th answer in a row of the process before it: then counting
// resumes, from the answer before.
func (s *sloTracker) inSeesaw(now time.Time, h histo) error {
	sv := &s.servers
	last, lastAt := sv.last, sv.lastAt
	_, _, _, fell := firstFall(seriesCounts(last), seriesCounts(&h))
	calm := !fell && (h.start == 0 || last.start == 0 || sameStart(last.start, h.start))
	hc := h
	sv.last, sv.lastAt = &hc, now
	if !calm {
		sv.calm = 0
		return errSeesaw(sv.why)
	}
	if sv.calm++; sv.calm < seesawCalm {
		return errSeesaw(sv.why)
	}
	s.servers = servers{}
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
// to b, named as an error names it.
func firstFall(a, b map[string]float64) (k string, from, to float64, ok bool) {
	for _, k := range sortedKeys(a) {
		if v, in := b[k]; in && v < a[k] {
			return seriesName(k), a[k], v, true
		}
	}
	return "", 0, 0, false
}

// sameStart says whether start times a and b name the same process when
// no count fell: equal, or within startJitter (see there).
func sameStart(a, b float64) bool { return math.Abs(a-b) <= startJitter }

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
