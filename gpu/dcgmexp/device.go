package dcgmexp

import (
	"math"
	"sort"

	"github.com/go-kit/log/level"
)

// deviceLevel are the fields DCGM measures for the whole GPU only: in MIG
// mode dcgm-exporter serves them once per GPU instance, labelled with its
// GPU_I_ID, each copy the GPU's figure, and no series for the GPU itself.
// Utilization (not supported in MIG mode) and framebuffer (per instance
// there) are not among them.
var deviceLevel = []string{
	"DCGM_FI_DEV_SM_CLOCK",
	"DCGM_FI_DEV_MEM_CLOCK",
	"DCGM_FI_DEV_POWER_USAGE",
	"DCGM_FI_DEV_GPU_TEMP",
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
}

// agreeWithin is how far apart, relative to the larger, the copies of a
// device-level field may be and still be one figure read at slightly
// different times.
const agreeWithin = 0.01

// mismatch is a device-level field whose copies on a GPU's instance
// series disagree: not the GPU's figure copied, perhaps a share of it.
type mismatch struct {
	UUID     string
	Field    string
	Min, Max float64 // the copies' range, in the readings' units
	Used     float64 // the value taken: that of the lowest GPU_I_ID
}

// instances indexes the GPU_I_IDs of each GPU's instance series, in
// increasing order.
func instances(f Fields) map[string][]int {
	gis := map[string][]int{}
	for k := range f {
		if k.GI >= 0 {
			gis[k.UUID] = append(gis[k.UUID], k.GI)
		}
	}
	for _, l := range gis {
		sort.Ints(l)
	}
	return gis
}

// wholeGPU returns the whole-GPU fields of uuid: those of its own series,
// with each device-level field they lack taken from its instance series
// (gis, increasing): the lowest instance's value, deterministic whatever
// the page's order. Copies that disagree beyond agreeWithin are reported;
// the lowest instance's value is still taken. It returns nil when the page
// has neither; f is not modified.
func wholeGPU(f Fields, uuid string, gis []int) (*Values, []mismatch) {
	own := f[Key{UUID: uuid, GI: -1}]
	if len(gis) == 0 {
		return own, nil
	}
	out := &Values{}
	if own != nil {
		*out = *own
	}
	var odd []mismatch
	filled := false
	for _, name := range deviceLevel {
		set := fields[name].set
		dst := set(out)
		if *dst != nil {
			continue
		}
		var used *float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, gi := range gis {
			v := f[Key{UUID: uuid, GI: gi}]
			if v == nil || *set(v) == nil {
				continue
			}
			x := **set(v)
			if used == nil {
				used = &x
			}
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		if used == nil {
			continue
		}
		*dst, filled = used, true
		if hi-lo > agreeWithin*math.Max(math.Abs(lo), math.Abs(hi)) {
			odd = append(odd, mismatch{UUID: uuid, Field: name, Min: lo, Max: hi, Used: *used})
		}
	}
	if !filled {
		return own, nil
	}
	return out, odd
}

type mismatchKey struct{ uuid, field string }

// warnMismatches logs each GPU's disagreeing device-level field once in
// the life of the Source: a page that keeps them apart does so on every
// scrape, and its figures are not the GPU's.
func (s *Source) warnMismatches(odd []mismatch) {
	for _, m := range odd {
		k := mismatchKey{m.UUID, m.Field}
		s.mu.Lock()
		seen := s.mismatched[k]
		if !seen {
			if s.mismatched == nil {
				s.mismatched = map[mismatchKey]bool{}
			}
			s.mismatched[k] = true
		}
		s.mu.Unlock()
		if !seen {
			level.Warn(s.logger).Log("msg", "dcgm-exporter's MIG instances disagree on a whole-GPU field; using the lowest GPU_I_ID's (logged once)",
				"url", s.name, "uuid", m.UUID, "field", m.Field, "min", m.Min, "max", m.Max, "used", m.Used)
		}
	}
}
