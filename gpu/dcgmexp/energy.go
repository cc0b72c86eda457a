package dcgmexp

import (
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/energyguard"
)

// pageEnergy is what is kept between pages of one GPU's energy counter.
type pageEnergy struct {
	guard energyguard.Guard
	// the page's counter as last read, and when it last moved
	seen    bool
	value   float64
	movedAt time.Time
}

// checkEnergy runs the energy counters out took from the page (those rd,
// the inner readings, lacks) through their GPU's guard, as the NVML
// backend does its own: a reading that does not follow from the last one
// taken (a 0 between true readings, a value ahead by more than the GPU can
// draw) is left out, the sample read without its counter, and logged at
// most once a minute per GPU. The bound on the draw is twice the highest
// power limit the inner source read since the last reading taken: the
// guard sees the limit of a sample without the page's counter too (a
// failed scrape, a page without it). A reading the guard took that
// repeats the last one taken (a page not refreshed since: dcgm-exporter
// collects every -c, 30 s by default) is marked gpu.Device.EnergyRepeated.
// out's devices are its own (merge's copy), or rd's (without) where the
// page gave no counter.
func (s *Source) checkEnergy(rd, out *gpu.Readings) {
	at := rd.Time
	if at.IsZero() {
		at = s.clock.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out.Devices {
		d := &out.Devices[i]
		if i >= len(rd.Devices) || rd.Devices[i].EnergyJoules != nil {
			continue
		}
		if d.EnergyJoules == nil {
			if pe := s.energy[d.UUID]; pe != nil && d.Up {
				pe.guard.See(energyguard.Watts(d.PowerLimitW))
			}
			continue
		}
		pe := s.pageEnergyOf(d.UUID)
		v, last := *d.EnergyJoules, pe.guard.Last()
		repeated := pe.guard.Repeats(v)
		ok, relevel := pe.guard.Take(v, at, energyguard.Watts(d.PowerLimitW))
		d.EnergyRepeated = ok && repeated
		switch {
		case relevel:
			if held, ok := s.allowWarn("energy-relevel", []string{d.UUID}); ok {
				level.Warn(s.logger).Log("msg", "dcgm-exporter page's energy counter taken at a new level after readings in a row agreed with it (logged at most once a minute per GPU)",
					"url", s.name, "uuid", d.UUID, "joules", v, "was", last, "held", held)
			}
		case !ok:
			d.EnergyJoules = nil
			if held, ok := s.allowWarn("energy-refused", []string{d.UUID}); ok {
				level.Warn(s.logger).Log("msg", "dcgm-exporter page's energy counter refused: not where the last one allows; sample read without it (logged at most once a minute per GPU)",
					"url", s.name, "uuid", d.UUID, "joules", v, "last", last, "max_watts", pe.guard.Bound(), "held", held)
			}
		}
	}
}

// frozen drops from f the series of the GPUs whose page energy counter has
// not moved for longer than the maximum age while the inner readings rd
// say they draw power: a dcgm-exporter whose host engine went away serves
// its last page for good, without timestamps and with /health fine, its
// ratios those of a past it no longer reads. Those GPUs are stale, left
// out as if the page lacked them (and so not counted matched); it returns
// their UUIDs.
func (s *Source) frozen(rd *gpu.Readings, f Fields, now time.Time) []string {
	gis := instances(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	done := map[string]bool{}
	for _, d := range rd.Devices {
		if !d.Up || done[d.UUID] {
			continue
		}
		done[d.UUID] = true
		v, _ := wholeGPU(f, d.UUID, gis[d.UUID])
		if v == nil || v.EnergyJoules == nil {
			continue
		}
		pe := s.pageEnergyOf(d.UUID)
		if e := *v.EnergyJoules; !pe.seen || e != pe.value {
			pe.seen, pe.value, pe.movedAt = true, e, now
			continue
		}
		if now.Sub(pe.movedAt) <= s.maxAge || d.PowerWatts == nil || *d.PowerWatts <= 0 {
			continue
		}
		for k := range f {
			if k.UUID == d.UUID {
				delete(f, k)
			}
		}
		out = append(out, d.UUID)
	}
	return out
}

// pageEnergyOf is what is kept of GPU uuid's page energy counter, made at
// its first use.
func (s *Source) pageEnergyOf(uuid string) *pageEnergy {
	pe := s.energy[uuid]
	if pe == nil {
		pe = &pageEnergy{}
		s.energy[uuid] = pe
	}
	return pe
}
