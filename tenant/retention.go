package tenant

import (
	"cmp"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// MaxDepartedPerGPU bounds the tenants without usage on one GPU whose
// meters and context-switch counts are kept within the retention: beyond
// it, those whose latest usage is oldest are forgotten first (batch jobs
// that are each a tenant, leaving faster than the retention lets go of
// them).
const MaxDepartedPerGPU = 256

// departures follows, by GPU and tenant, the latest sample in which the
// tenant had usage on the GPU, so that what is kept of a tenant that left
// a GPU (its meters, its context-switch count) is forgotten once it has
// had no usage there for the retention (guarded by the Builder's buildMu).
type departures struct {
	keep time.Duration // 0: nothing is forgotten
	last map[meterKey]time.Time
	prev time.Time // the latest sample's time
}

func newDepartures(keep time.Duration) departures {
	return departures{keep: keep, last: map[meterKey]time.Time{}}
}

// expire records the usage of the sample r (nil: none) and returns the
// GPUs' tenants to forget: those without usage on a GPU for the retention
// or more, as of r's time, and on a GPU with more than MaxDepartedPerGPU
// tenants without usage, the oldest of them beyond it. The time a GPU is
// listed but not read (lost: the interval since the previous sample) does
// not count: its tenants are not known to have left. The time before it
// does: their latest usage moves on by the lost interval alone.
func (d *departures) expire(r *gpu.Readings, usage []Usage) []meterKey {
	if d.keep <= 0 || r == nil {
		return nil
	}
	at := r.Time
	var lost time.Duration
	if !d.prev.IsZero() && at.After(d.prev) {
		lost = at.Sub(d.prev)
	}
	if at.After(d.prev) {
		d.prev = at
	}
	for _, u := range usage {
		if k := (meterKey{u.UUID, u.Tenant}); at.After(d.last[k]) {
			d.last[k] = at
		}
	}
	var down map[string]bool
	for i := range r.Devices {
		if !r.Devices[i].Up {
			if down == nil {
				down = map[string]bool{}
			}
			down[r.Devices[i].UUID] = true
		}
	}
	var gone []meterKey
	var away map[string][]meterKey // by GPU UUID, those kept
	for k, t := range d.last {
		switch {
		case !at.After(t): // usage in this sample
		case down[k.uuid]:
			d.last[k] = t.Add(lost)
		case at.Sub(t) >= d.keep:
			gone = append(gone, k)
		default:
			if away == nil {
				away = map[string][]meterKey{}
			}
			away[k.uuid] = append(away[k.uuid], k)
		}
	}
	for _, ks := range away {
		if len(ks) <= MaxDepartedPerGPU {
			continue
		}
		slices.SortFunc(ks, func(a, b meterKey) int {
			return cmp.Or(d.last[a].Compare(d.last[b]), cmp.Compare(a.tenant, b.tenant))
		})
		gone = append(gone, ks[:len(ks)-MaxDepartedPerGPU]...)
	}
	for _, k := range gone {
		delete(d.last, k)
	}
	return gone
}

// forgetDeparted forgets the meters and context-switch counts of the
// tenants that left a GPU for the retention (departures.expire) as of r.
// Called with buildMu held.
func (b *Builder) forgetDeparted(r *gpu.Readings, usage []Usage) {
	for _, k := range b.departed.expire(r, usage) {
		delete(b.meters.tenants, k)
		delete(b.attr.csAcc, k)
	}
}
