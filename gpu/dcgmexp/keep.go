package dcgmexp

import (
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// sourceSeen is the activity source a page last gave a GPU or MIG
// instance, and when.
type sourceSeen struct {
	source string
	at     time.Time
}

// keepSources notes the DCGM activity source of each GPU and MIG
// instance of out, and gives one without activity (a failed scrape, a
// page that lacked it) the source it last had from a page, without
// ratios, until that is older than the maximum age: the activity_source
// of vgpu_gpu_info names where the ratios come from, not whether this
// sample has one, and a dcgm-exporter restart (a failed scrape or a few)
// does not change it, as one sample GPM misses does not. out's devices and
// instances are copied before they are changed (they may be the inner
// source's).
func (s *Source) keepSources(out *gpu.Readings) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	copied := false
	for i := range out.Devices {
		d := &out.Devices[i]
		if !d.Up {
			continue
		}
		if src, ok := s.keepSource(Key{UUID: d.UUID, GI: -1}, &d.Activity, now); ok {
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
			if src, ok := s.keepSource(Key{UUID: d.UUID, GI: m.GPUInstanceID}, &m.Activity, now); ok {
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

// keepSource notes a's source for k where it is a page's, and returns the
// source to give an a without activity (ok false: none). Called with mu
// held.
func (s *Source) keepSource(k Key, a *gpu.Activity, now time.Time) (string, bool) {
	switch {
	case a.Source == ActivityDCGM || a.Source == ActivityDCGMGREngine:
		s.sources[k] = sourceSeen{a.Source, now}
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
