package dcgmexp

import (
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// sourceSeen is the activity source a page last gave a GPU or MIG
// instance, and when that page was last fresh (freshAt).
type sourceSeen struct {
	source string
	at     time.Time
}

// freshAt is when each series of the page f was last fresh, now at the
// latest: its timestamp where its lines carry one, else when its GPU's
// page energy counter last moved (a page not refreshed since, a frozen
// one once that is older than the maximum age, frozen), else now; of a
// MIG GPU without a series of its own, its instances' oldest. Called
// after frozen, which notes the counter's moves.
func (s *Source) freshAt(f Fields, now time.Time) map[Key]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Key]time.Time, len(f))
	for k, v := range f {
		at := now
		switch pe := s.energy[k.UUID]; {
		case !v.Time.IsZero():
			at = v.Time
		case pe != nil && pe.seen:
			at = pe.movedAt
		}
		out[k] = at
	}
	// a MIG GPU without a series of its own: its instances' oldest
	for k, at := range out {
		g := Key{UUID: k.UUID, GI: -1}
		if _, own := f[g]; k.GI < 0 || own {
			continue
		}
		if was, ok := out[g]; !ok || at.Before(was) {
			out[g] = at
		}
	}
	return out
}

// keepSources notes the DCGM activity source of each GPU and MIG
// instance of out, and gives one without activity (a failed scrape, a
// page that lacked it, a frozen page) the source it last had from a page,
// without ratios, until that page is older than the maximum age, as of
// when it was last fresh (fresh, by freshAt; nil or a key not in it:
// now): a frozen page's source goes with its figures, not one maximum age
// after them. The activity_source of vgpu_gpu_info names where the ratios
// come from, not whether this sample has one, and a dcgm-exporter restart
// (a failed scrape or a few) does not change it, as one sample GPM misses
// does not. out's devices and instances are copied before they are
// changed (they may be the inner source's).
func (s *Source) keepSources(out *gpu.Readings, fresh map[Key]time.Time) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	copied := false
	for i := range out.Devices {
		d := &out.Devices[i]
		if !d.Up {
			continue
		}
		if src, ok := s.keepSource(Key{UUID: d.UUID, GI: -1}, &d.Activity, now, fresh); ok {
			if !copied {
				out.Devices, copied = slices.Clone(out.Devices), true
				d = &out.Devices[i]
			}
			d.Activity.Source = src
		}
		migCopied := false
		for j := range d.MIG {
			m := &d.MIG[j]
			if m.GPUInstanceID < 0 {
				continue
			}
			if src, ok := s.keepSource(Key{UUID: d.UUID, GI: m.GPUInstanceID}, &m.Activity, now, fresh); ok {
				if !copied {
					out.Devices, copied = slices.Clone(out.Devices), true
					d = &out.Devices[i]
				}
				if !migCopied {
					d.MIG, migCopied = slices.Clone(d.MIG), true
				}
				d.MIG[j].Activity.Source = src
			}
		}
	}
	for k, v := range s.sources {
		if now.Sub(v.at) > s.maxAge {
			delete(s.sources, k)
		}
	}
}

// keepSource notes a's source for k where it is a page's, with the time
// the page was last fresh, and returns the source to give an a without
// activity (ok false: none). Called with mu held.
func (s *Source) keepSource(k Key, a *gpu.Activity, now time.Time, fresh map[Key]time.Time) (string, bool) {
	switch {
	case a.Source == ActivityDCGM || a.Source == ActivityDCGMGREngine:
		at, ok := fresh[k]
		if !ok || at.After(now) {
			at = now
		}
		s.sources[k] = sourceSeen{a.Source, at}
		return "", false
	case a.Source != "" || a.SMActive != nil || a.SMOccupancy != nil || a.DRAMActive != nil || a.TensorActive != nil:
		return "", false
	}
	v, ok := s.sources[k]
	if !ok || now.Sub(v.at) > s.maxAge {
		return "", false
	}
	return v.source, true
}
