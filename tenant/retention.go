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

// lastUsage follows, by GPU and tenant, the latest sample in which the
// tenant had usage on the GPU, the time the GPU was listed but not read
// not counted: what departures and hostedSources measure a tenant's
// absence from a GPU by (guarded by the Builder's buildMu).
type lastUsage struct {
	last map[meterKey]time.Time
	prev time.Time // the latest sample's time
}

func newLastUsage() lastUsage {
	return lastUsage{last: map[meterKey]time.Time{}}
}

// record records the usage of the sample r of the tenants follow says
// (nil: every tenant) and returns the GPUs r lists but does not read, or
// whose process lists it does not all read (nil: none). The latest usage of a tenant on such a GPU moves on by the
// interval since the previous sample: the tenant is not known to have
// left it, and only the time before it stopped being read counts.
func (l *lastUsage) record(r *gpu.Readings, usage []Usage, follow func(tenant string) bool) map[string]bool {
	at := r.Time
	var lost time.Duration
	if !l.prev.IsZero() && at.After(l.prev) {
		lost = at.Sub(l.prev)
	}
	if at.After(l.prev) {
		l.prev = at
	}
	for _, u := range usage {
		if follow != nil && !follow(u.Tenant) {
			continue
		}
		if k := (meterKey{u.UUID, u.Tenant}); at.After(l.last[k]) {
			l.last[k] = at
		}
	}
	var down map[string]bool
	for i := range r.Devices {
		// a GPU whose process lists were not all read (on an MPS GPU,
		// the MPS clients' list too) does not show that a tenant left
		// it, as one not read at all
		d := &r.Devices[i]
		if !d.Up || !d.ListsRead() {
			if down == nil {
				down = map[string]bool{}
			}
			down[d.UUID] = true
		}
	}
	if lost > 0 && down != nil {
		for k, t := range l.last {
			if down[k.uuid] && at.After(t) {
				l.last[k] = t.Add(lost)
			}
		}
	}
	return down
}

// absence is how long the tenant of k is known, as of the sample at time
// at whose unread GPUs record returned (down), to have had no usage on
// k's GPU; false while it is not known to have left: usage in that
// sample, or a GPU not read. For a tenant whose attribution rests on a
// source that can fail (its pods' mapping), known (nil: none) gives the
// time of the source's last good answer: its absence counts up to that
// time alone (a zero time: none), for usage after it may have gone to
// Unassigned, not away.
func (l *lastUsage) absence(k meterKey, at time.Time, down map[string]bool, known func(tenant string) time.Time) (time.Duration, bool) {
	t := l.last[k]
	if !at.After(t) || down[k.uuid] {
		return 0, false
	}
	seen := at // as of when the tenant is known to have had no usage
	if known != nil {
		if s := known(k.tenant); s.Before(at) {
			seen = s
		}
	}
	return seen.Sub(t), true
}

// departures follows, by GPU and tenant, the latest sample in which the
// tenant had usage on the GPU, so that what is kept of a tenant that left
// a GPU (its meters, its context-switch count) is forgotten once it has
// had no usage there for the retention (guarded by the Builder's buildMu).
type departures struct {
	keep time.Duration // 0: nothing is forgotten
	lastUsage
}

func newDepartures(keep time.Duration) departures {
	return departures{keep: keep, lastUsage: newLastUsage()}
}

// expire records the usage of the sample r (nil: none) and returns the
// GPUs' tenants to forget: those without usage on a GPU for the retention
// or more, as of r's time, and on a GPU with more than MaxDepartedPerGPU
// tenants without usage, the oldest of them beyond it. The time a GPU is
// listed but not read does not count, nor, for a tenant of pods, the time
// after known's (lastUsage.absence); such a tenant counts toward the cap
// all the same.
func (d *departures) expire(r *gpu.Readings, usage []Usage, known func(tenant string) time.Time) []meterKey {
	if d.keep <= 0 || r == nil {
		return nil
	}
	down := d.record(r, usage, nil)
	var gone []meterKey
	var away map[string][]meterKey // by GPU UUID, those kept
	for k := range d.last {
		switch age, left := d.absence(k, r.Time, down, known); {
		case !left:
		case age < d.keep:
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
	for _, k := range b.departed.expire(r, usage, knownAsOf(c, r, ks)) {
		b.meters.forget(k)
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
