package report

import (
	"math"
	"time"
)

// GoodputWindow is the window a GPU's SLOs are judged in for goodput:
// a tenant's work counts towards its goodput only in the windows in which
// every SLO on its GPU held.
const GoodputWindow = time.Minute

// minuteAcc is one tenant's figures in the goodput window being filled.
type minuteAcc struct {
	gpu         string // at the last step of the window
	good, ended int
	overdue     int // at the last step of the window
	sloQuantile float64
	slo         bool
	work        map[string]float64 // by the GPU the work was done on
}

// minuteIndex is the goodput window the step ending now belongs to.
func (r *Recorder) minuteIndex() int {
	return max(0, int(math.Ceil(r.elapsed/GoodputWindow.Seconds()-1e-9))-1)
}

func (r *Recorder) addMinute(tw TenantWindow) {
	if r.minute == nil {
		r.minute = map[string]*minuteAcc{}
	}
	m := r.minute[tw.Tenant]
	if m == nil {
		m = &minuteAcc{work: map[string]float64{}}
		r.minute[tw.Tenant] = m
	}
	m.gpu = tw.GPU
	m.good += tw.Good
	m.ended += tw.Ended()
	m.overdue = tw.Overdue
	m.sloQuantile, m.slo = tw.SLOQuantile, tw.SLOTarget > 0
	m.work[tw.GPU] += tw.Work
}

// heldGPUs returns the GPUs on which every SLO held over a goodput window:
// each tenant with an SLO reached its quantile over the requests that
// ended in the window and those overdue at its end (WindowHeld). A window
// in which none ended and none was overdue holds.
func heldGPUs(minute map[string]*minuteAcc) map[string]bool {
	held := map[string]bool{}
	for _, m := range minute {
		for g := range m.work {
			if _, seen := held[g]; !seen {
				held[g] = true
			}
		}
	}
	for _, m := range minute {
		if m.slo && !WindowHeld(m.good, m.ended+m.overdue, m.sloQuantile) {
			held[m.gpu] = false
		}
	}
	return held
}

// WindowHeld says whether an SLO held over a goodput window in which good
// of ended requests met its target. ended is every request that ended
// (completed or dropped; TenantWindow.Ended) and every one overdue at the
// window's end (still waiting or running, already past the target: it
// will not be good when it ends, and a window that served nothing while
// it waited did not hold its SLO). A window in which none ended and none
// was overdue holds: the tenant had no request to judge there.
func WindowHeld(good, ended int, quantile float64) bool {
	return ended <= 0 || float64(good)/float64(ended) >= quantile
}

// Held says whether tw's SLO held over the window, judged as a goodput
// window is: good over what ended and what was overdue at the end
// (WindowHeld). A tenant without an SLO always holds.
func Held(tw TenantWindow) bool {
	return tw.SLOTarget <= 0 || WindowHeld(tw.Good, tw.Ended()+tw.Overdue, tw.SLOQuantile)
}

// SLOMet says whether an SLO was met over a whole run in which good of
// ended requests met its target (ended as in WindowHeld, overdue at the
// run's end): judged as a goodput window is, except that a run in which
// none ended and none was overdue did not meet it. Over a window, no
// request to judge holds (a quiet minute of a tenant that serves); over
// the run, it means the tenant never served.
func SLOMet(good, ended int, quantile float64) bool {
	return ended > 0 && WindowHeld(good, ended, quantile)
}

// RunMet says whether tw's SLO was met, tw being a whole run (or the run
// so far) summed: as the run's Summary judges it (SLOMet; a tenant with
// an SLO that never served has not met it). A tenant without an SLO has
// none to meet.
func RunMet(tw TenantWindow) bool {
	return tw.SLOTarget > 0 && SLOMet(tw.Good, tw.Ended()+tw.Overdue, tw.SLOQuantile)
}

// minuteGoodWork is each tenant's work in the window on GPUs whose SLOs held.
func minuteGoodWork(minute map[string]*minuteAcc) map[string]float64 {
	held := heldGPUs(minute)
	out := map[string]float64{}
	for name, m := range minute {
		for g, w := range m.work {
			if held[g] {
				out[name] += w
			}
		}
	}
	return out
}

// countHeld returns how many GPUs a goodput window has and on how many of
// them every SLO held.
func countHeld(minute map[string]*minuteAcc) (gpus, held int) {
	for _, ok := range heldGPUs(minute) {
		gpus++
		if ok {
			held++
		}
	}
	return gpus, held
}

func (r *Recorder) flushMinute(minute map[string]*minuteAcc) {
	g, h := countHeld(minute)
	r.gpuMinutes += g
	r.heldMinutes += h
	for name, w := range minuteGoodWork(minute) {
		a := r.tenants[name]
		a.goodWork += w
		a.minutes[r.minuteN].good += w
	}
}
