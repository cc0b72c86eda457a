package autotune

import (
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The slow loop's memory of how long the SLOs on each GPU have held: a
// cap is given back when the gain over as long again (slack that has held
// for an hour is likely to hold for another) is worth the restarts.

// heldSince keeps, per GPU, since when every latency SLO on it has held.
type heldSince struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// observe records whether every SLO on uuid holds at now, and returns
// since when they have (now where they do not).
func (h *heldSince) observe(uuid string, now time.Time, held bool) time.Time {
	if h == nil {
		return now
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since == nil {
		h.since = map[string]time.Time{}
	}
	if !held {
		delete(h.since, uuid)
		return now
	}
	t, ok := h.since[uuid]
	if !ok {
		t = now
		h.since[uuid] = t
	}
	return t
}

// sloHeld says whether m's SLO holds (never while unknown): idle, or its
// SLO window's quantile within the target and no miss over the fast
// window beyond what chance gives (three standard deviations, Poisson, as
// the fast loop's verdict).
func (p *Autotune) sloHeld(s *tuner.State, m *member) bool {
	if m.unknown {
		return false // not known to hold: the release's horizon starts over
	}
	if m.slo.WindowRequests == 0 {
		return true
	}
	if !m.hasRatio || m.ratio > 1 {
		return false
	}
	return !m.violating || chanceMiss(s, m)
}

// heldFor is how long every latency SLO of ds on uuid has held since the
// caps last changed (observed every round).
func (p *Autotune) heldFor(s *tuner.State, uuid string, ds domainSignals) time.Duration {
	held := true
	for _, m := range ds.latency {
		held = held && p.sloHeld(s, m)
	}
	since := p.held.observe(uuid, s.Now, held)
	if c, ok := s.LastChange(tuner.Target{GPU: uuid, Knob: gpu.KnobMPSActiveThreads}); ok && c.At.After(since) {
		since = c.At
	}
	return max(0, s.Now.Sub(since))
}
