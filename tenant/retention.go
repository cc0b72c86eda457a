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
// not count: its tenants are not known to have left; the time before does
// (their latest usage moves on by the lost interval). For a tenant whose
// attribution rests on a source that can fail (its pods' mapping), known
// (nil: none) gives the time of the source's last good answer: its absence
// counts up to that time alone (a zero time: none, it is kept), for usage
// after it may have gone to Unassigned, not away; such a tenant counts
// toward the cap all the same.
func (d *departures) expire(r *gpu.Readings, usage []Usage, known func(tenant string) time.Time) []meterKey {
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
		seen := at // as of when the tenant is known to have had no usage
		if known != nil {
			if s := known(k.tenant); s.Before(at) {
				seen = s
			}
		}
		switch {
		case !at.After(t): // usage in this sample
		case down[k.uuid]:
			d.last[k] = t.Add(lost)
		case seen.Sub(t) < d.keep:
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
// tenants that left a GPU for the retention (departures.expire) as of r.
// The absence of a tenant that c gives pods counts up to the last good
// pod mapping (ks, nil: no mapping) alone: pods started since are in no
// mapping, their usage goes to Unassigned. Called with buildMu held.
func (b *Builder) forgetDeparted(c *compiledConfig, r *gpu.Readings, usage []Usage, ks *kube.Status) {
	var known func(string) time.Time
	if ks != nil {
		pods, labels := mappingAsOf(ks)
		known = func(tenant string) time.Time {
			switch {
			case c.ofLabels(tenant):
				return labels
			case c.ofPods(tenant):
				return pods
			}
			return r.Time
		}
	}
	for _, k := range b.departed.expire(r, usage, known) {
		delete(b.meters.tenants, k)
		delete(b.meters.seen, k)
		delete(b.attr.csAcc, k)
	}
}

// mappingAsOf is when the pod mapping in use was fetched from the
// pod-resources API (pods), and when the pod metadata in use was read
// where there is a source of it, else pods (labels); zero: never. A tenant
// of pods is in the latest mapping unless its pods started since: a
// pod-resources answer places a pod in its namespace, its labels come
// from the metadata alone (pods new since its last good read have none).
func mappingAsOf(ks *kube.Status) (pods, labels time.Time) {
	pods, labels = ks.LastSuccess, ks.LastSuccess
	if ks.Metadata.Source != "" && ks.Metadata.LastSuccess.Before(labels) {
		labels = ks.Metadata.LastSuccess
	}
	return pods, labels
}

// ofPods says whether tenant's usage rests on the pod mapping: a tenant of
// the pod tenancy (any tenant not in the file, with one on), or one of the
// file's with a kubernetes selector; never Unassigned.
func (c *compiledConfig) ofPods(tenant string) bool {
	if _, file := c.class[tenant]; file {
		return c.kubeSelected[tenant]
	}
	return c.pods.On() && tenant != Unassigned
}

// ofLabels says whether tenant's usage rests on pods' labels: a tenant of
// the pod tenancy by a label, or one of the file's with a kubernetes
// selector that names labels.
func (c *compiledConfig) ofLabels(tenant string) bool {
	if _, file := c.class[tenant]; file {
		return c.labelSelected[tenant]
	}
	return c.pods.Label != "" && tenant != Unassigned
}
