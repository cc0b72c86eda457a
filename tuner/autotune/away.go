package autotune

import (
	"sync"
	"time"

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

// latencySeen keeps, per GPU, when each latency tenant with an SLO last
// had usage on it.
type latencySeen struct {
	mu   sync.Mutex
	last map[string]map[string]time.Time // GPU -> tenant -> last seen
}

// away records the latency tenants of ds as seen on uuid at s.Now, and
// says whether, none being there, one that was had usage on it within its
// SLO window and still has an SLO status: it is away, not gone. A tenant
// whose SLO status is no longer served (a reload dropped it) has left.
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
	if seen == nil {
		seen = map[string]time.Time{}
		l.last[uuid] = seen
	}
	for _, m := range ds.latency {
		seen[m.name] = s.Now
	}
	if len(ds.latency) > 0 {
		return false
	}
	away := false
	for name, at := range seen {
		st := sloOf(s, name)
		if st == nil {
			delete(seen, name)
			continue
		}
		window := st.Window
		if window <= 0 {
			window = tenant.DefaultSLOWindow // (a status without its window)
		}
		if s.Now.Sub(at) >= window {
			delete(seen, name)
			continue
		}
		away = true
	}
	return away
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
