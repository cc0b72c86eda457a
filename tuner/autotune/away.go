package autotune

import (
	"slices"
	"strings"
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
// while what the tuner set is adopted from the journal. On a GPU where
// the policy has seen no latency tenant since its start and the tuner
// keeps an original of a setting it gives back when the last one leaves
// (heldByTuner), every latency tenant configured with an SLO may have
// been there before the start, its SLO status served or not (where
// sources are read only on the hosts their tenants run on, a tenant whose
// process is missing after the restart has none): each is away until its
// SLO window has passed since the policy's start, as if last seen then. (Being seen on
// another GPU since says nothing: a tenant may run on several.) Where the
// tuner keeps no such original, nothing is held, and a GPU without a
// latency tenant is one as before.

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
// says whether, none being there, one that was had usage on it within its
// SLO window and still has an SLO status: it is away, not gone. A tenant
// whose SLO status is no longer served (a reload dropped it) has left. On
// a GPU none was seen on since the policy's start, where the tuner holds
// settings of its own, one may have been there before it (see above).
func (l *latencySeen) away(s *tuner.State, uuid string, ds domainSignals) bool {
	if l == nil {
		return false
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
		return false
	}
	if seen == nil {
		return heldByTuner(s, uuid) && l.awaySinceStart(s)
	}
	away := false
	for name, at := range seen {
		st := sloOf(s, name)
		if st == nil {
			delete(seen, name)
			continue
		}
		if s.Now.Sub(at) >= sloWindow(st) {
			delete(seen, name)
			continue
		}
		away = true
	}
	return away
}

// awaySinceStart says whether a latency tenant configured with an SLO (a
// latency source: tenant.Info.SLOWindow) has had less than its SLO window
// since the policy's start. The configuration, not the SLO statuses
// served, says which may have been there: under the exporter's default
// --tenants.latency-sources=running, the status of a tenant without usage
// on this host is not served, so after a restart one whose process is
// missing has none until it is back. A tenant a reload left without an
// SLO is not one.
func (l *latencySeen) awaySinceStart(s *tuner.State) bool {
	for _, t := range s.Snapshot.Tenants {
		if t.Class == gpu.ClassLatency && t.SLOWindow > 0 && s.Now.Sub(l.start) < t.SLOWindow {
			return true
		}
	}
	return false
}

// givenBackKnobs are the knobs whose settings the policy gives back on a
// GPU its last latency tenant left (gone, mps, pauses, timeSlice).
var givenBackKnobs = []gpu.Knob{gpu.KnobPauseDuty, gpu.KnobMPSActiveThreads, gpu.KnobComputeTimeSlice, gpu.KnobLockedClocks, gpu.KnobPowerLimit}

// heldByTuner says whether the tuner keeps an original of a setting of
// uuid that the policy gives back once no latency tenant is left there:
// without one, there is nothing to give back, and nothing to hold.
func heldByTuner(s *tuner.State, uuid string) bool {
	for k := range s.Originals { // (Target.String: GPU/knob[/pidN])
		if rest, ok := strings.CutPrefix(k, uuid+"/"); ok {
			knob, _, _ := strings.Cut(rest, "/")
			if slices.Contains(givenBackKnobs, gpu.Knob(knob)) {
				return true
			}
		}
	}
	return false
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
