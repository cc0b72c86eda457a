package tenant

import (
	"cmp"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
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
// not count: its tenants are not known to have left. Nor does, for a
// tenant blind says is (nil: none), the interval of a sample whose
// attribution cannot see it (its pods' source failing: its usage went to
// Unassigned, not away), though such a tenant counts toward the cap. The
// time before either does: their latest usage moves on by the lost
// interval alone.
func (d *departures) expire(r *gpu.Readings, usage []Usage, blind func(tenant string) bool) []meterKey {
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
		case blind != nil && blind(k.tenant):
			d.last[k] = t.Add(lost)
			fallthrough // within the cap all the same
		case at.Sub(t) < d.keep:
			if away == nil {
				away = map[string][]meterKey{}
			}
			away[k.uuid] = append(away[k.uuid], k)
		default:
			gone = append(gone, k)
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
// tenants that left a GPU for the retention (departures.expire) as of r;
// while the pod mapping fails (ks, nil: no mapping), the tenants c gives
// pods are not known to have left. Called with buildMu held.
func (b *Builder) forgetDeparted(c *compiledConfig, r *gpu.Readings, usage []Usage, ks *kube.Status) {
	var blind func(string) bool
	if podSourceFailing(ks) {
		blind = c.ofPods
	}
	for _, k := range b.departed.expire(r, usage, blind) {
		delete(b.meters.tenants, k)
		delete(b.attr.csAcc, k)
	}
}

// podSourceFailing says whether the pod mapping's source failed its latest
// query (ks nil: no mapping): the pod-resources API, or the pod metadata
// where there is one (pods new since its last good read have no labels).
// The last good mapping is still used, but pods started since are not in
// it, and their processes' usage goes to Unassigned.
func podSourceFailing(ks *kube.Status) bool {
	return ks != nil && (!ks.Up || ks.Metadata.Source != "" && !ks.Metadata.Up)
}

// ofPods says whether tenant's usage rests on the pod mapping: a tenant of
// the pod tenancy, or one of the file's with a kubernetes selector.
func (c *compiledConfig) ofPods(tenant string) bool {
	if _, file := c.class[tenant]; file {
		return c.kubeSelected[tenant]
	}
	return tenant != Unassigned
}
