package autotune

import (
	"fmt"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The policy's memory of the latency tenants seen on each GPU: a sample
// that misses a latency tenant's process (its server restarting, a
// process list read between two of its processes) does not make the GPU
// one its last latency tenant left. As the tenants package keeps such a
// tenant's latency source (hostedSources), the tenant has left the GPU
// once it has had no usage there for its SLO window; until then, while
// its SLO status is served, it is away, and what the tuner set on the GPU
// holds as while a tenant's latency is unknown.
//
// The memory starts empty with the policy (a restart of the exporter),
// while the journal keeps the originals the start's restore left open (a
// restore that failed, an MPS client not listed yet, a GPU not in
// enforce): the tuner's settings are still in force. On a GPU where
// the policy has seen no latency tenant since its start, every latency
// tenant configured with an SLO may have been there before the start, its
// SLO status served or not (where sources are read only on the hosts
// their tenants run on, a tenant whose process is missing after the
// restart has none): each is away until its SLO window has passed since
// the policy's start, as if last seen then. (Being seen on another GPU
// since says nothing: a tenant may run on several.) Neither the journal
// nor the originals say which latency tenants a setting was made for (an
// original names the tenant it was set on, a batch tenant's cap or pause,
// and no one for a GPU's knob), so the configuration is all there is.
//
// What is held is what the policy would give back on the GPU: on a GPU
// without a latency tenant every action of the policy gives back what
// the tuner set for one (gone, mps, pauses, timeSlice), and Decide holds
// them all (tuner.Action.Held, with why: the GPU's round says it) while
// one is away. Where the tuner keeps no original of such a setting there
// is nothing to give back, and nothing to hold.

// latencySeen keeps, per GPU, when each latency tenant with an SLO last
// had usage on it, and when the policy started.
type latencySeen struct {
	mu    sync.Mutex
	start time.Time                       // the policy's first decision (zero: none yet)
	last  map[string]map[string]time.Time // GPU -> tenant -> last seen; a GPU is here once one was seen on it
}

// begin records now as the policy's start, at its first decision.
func (l *latencySeen) begin(now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() {
		l.start = now
	}
}

// away records the latency tenants of ds as seen on uuid at s.Now, and
// says, none being there, why one is away: one that was had usage on it
// within its SLO window and still has an SLO status, or, on a GPU none
// was seen on since the policy's start, one configured with an SLO may
// have been there before it (see above). "": none is away. A tenant whose
// SLO status is no longer served (a reload dropped it) has left.
func (l *latencySeen) away(s *tuner.State, uuid string, ds domainSignals) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]map[string]time.Time{}
	}
	seen := l.last[uuid]
	if len(ds.latency) > 0 {
		if seen == nil {
			seen = map[string]time.Time{}
			l.last[uuid] = seen
		}
		for _, m := range ds.latency {
			seen[m.name] = s.Now
		}
		return ""
	}
	if seen == nil {
		return l.awaySinceStart(s)
	}
	var last awayTenant
	for name, at := range seen {
		st := sloOf(s, name)
		if st == nil {
			delete(seen, name)
			continue
		}
		a := awayTenant{name: name, since: at, window: sloWindow(st)}
		if !a.until().After(s.Now) {
			delete(seen, name)
			continue
		}
		last = last.later(a)
	}
	if last.name == "" {
		return ""
	}
	return fmt.Sprintf("%s, a latency tenant of this GPU, has had no process on it for %v of its %v SLO window: away, not gone, its latency unknown, so what the tuner set here holds until it is back or %v from now",
		last.name, s.Now.Sub(last.since).Round(time.Second), last.window, last.until().Sub(s.Now).Round(time.Second))
}

// awaySinceStart says why, no latency tenant having been seen on a GPU
// since the policy's start, one may be away: a latency tenant configured
// with an SLO (a latency source: tenant.Info.SLOWindow) has had less than
// its SLO window since that start ("": none has). The configuration, not
// the SLO statuses served, says which may have been there: under the
// exporter's default --tenants.latency-sources=running, the status of a
// tenant without usage on this host is not served, so after a restart
// one whose process is missing has none until it is back. A tenant a
// reload left without an SLO is not one.
func (l *latencySeen) awaySinceStart(s *tuner.State) string {
	var last awayTenant
	for _, t := range s.Snapshot.Tenants {
		a := awayTenant{name: t.Name, since: l.start, window: t.SLOWindow}
		if t.Class == gpu.ClassLatency && t.SLOWindow > 0 && a.until().After(s.Now) {
			last = last.later(a)
		}
	}
	if last.name == "" {
		return ""
	}
	return fmt.Sprintf("no latency tenant has been seen on this GPU since the policy's first round %v ago (the exporter's start), and %s (SLO window %v) may have been on it before: away, not gone, its latency unknown, so what the tuner set here holds until it is back or %v from now",
		s.Now.Sub(l.start).Round(time.Second), last.name, last.window, last.until().Sub(s.Now).Round(time.Second))
}

// awayTenant is a latency tenant away from a GPU since since, for its
// SLO window.
type awayTenant struct {
	name   string
	since  time.Time
	window time.Duration
}

// until is when a has left the GPU.
func (a awayTenant) until() time.Time { return a.since.Add(a.window) }

// later is whichever of a and b leaves later (the first by name on a tie,
// so that the reason does not change with a map's order); a zero a is
// none.
func (a awayTenant) later(b awayTenant) awayTenant {
	switch {
	case a.name == "", b.until().After(a.until()):
		return b
	case b.until().Equal(a.until()) && b.name < a.name:
		return b
	}
	return a
}

// sloWindow is st's SLO window, the default's where the status gives none.
func sloWindow(st *tenant.SLOStatus) time.Duration {
	if st.Window <= 0 {
		return tenant.DefaultSLOWindow
	}
	return st.Window
}

// sloOf is the SLO status s serves for the tenant name (nil: none).
func sloOf(s *tuner.State, name string) *tenant.SLOStatus {
	for i := range s.Snapshot.SLOs {
		if s.Snapshot.SLOs[i].Tenant == name {
			return &s.Snapshot.SLOs[i]
		}
	}
	return nil
}
