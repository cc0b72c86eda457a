package dcgmexp

import (
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/energyguard"
)

// pageEnergy is what is kept between pages of one GPU's energy counter.
type pageEnergy struct {
	guard energyguard.Guard
}

// checkEnergy runs the energy counters out took from the page (those rd,
// the inner readings, lacks) through their GPU's guard, as the NVML
// backend does its own: a reading that does not follow from the last one
// taken (a 0 between true readings, a value ahead by more than the GPU can
// draw) is left out, the sample read without its counter, and logged at
// most once a minute. The bound on the draw is twice the power limit the
// inner source read. out's devices are its own (merge's copy).
func (s *Source) checkEnergy(rd, out *gpu.Readings) {
	at := rd.Time
	if at.IsZero() {
		at = s.clock.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out.Devices {
		d := &out.Devices[i]
		if d.EnergyJoules == nil || i >= len(rd.Devices) || rd.Devices[i].EnergyJoules != nil {
			continue
		}
		pe := s.energy[d.UUID]
		if pe == nil {
			pe = &pageEnergy{}
			s.energy[d.UUID] = pe
		}
		v, last, watts := *d.EnergyJoules, pe.guard.Last(), energyguard.Watts(d.PowerLimitW)
		ok, relevel := pe.guard.Take(v, at, watts)
		switch {
		case relevel && s.energyLimit.AllowN(s.clock.Now(), 1):
			level.Warn(s.logger).Log("msg", "dcgm-exporter page's energy counter taken at a new level after readings in a row agreed with it (logged at most once a minute)",
				"url", s.name, "uuid", d.UUID, "joules", v, "was", last)
		case !ok:
			d.EnergyJoules = nil
			if s.energyLimit.AllowN(s.clock.Now(), 1) {
				level.Warn(s.logger).Log("msg", "dcgm-exporter page's energy counter refused: not where the last one allows; sample read without it (logged at most once a minute)",
					"url", s.name, "uuid", d.UUID, "joules", v, "last", last, "max_watts", watts)
			}
		}
	}
}
