package nvml

import (
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/energyguard"
)

// energyLogEvery is how often a GPU's refused energy readings are logged.
const energyLogEvery = 10 * time.Minute

// readEnergy checks an energy reading of mJ through the GPU's guard
// (package energyguard): the counter served, or nil for a reading refused
// (logged at most once per energyLogEvery per GPU and kind).
func (rd *devReader) readEnergy(d *gpu.Device, mJ uint64) *float64 {
	v := float64(mJ) / 1000
	g := &rd.ds.energy
	last := g.Last()
	ok, relevel := g.Take(v, rd.now, energyguard.Watts(d.PowerLimitW))
	switch {
	case relevel:
		rd.logEnergy("relevel", "msg", "GPU energy counter taken at a new level after readings in a row agreed with it",
			"joules", v, "was", last)
	case !ok:
		rd.logEnergy("refused", "msg", "GPU energy counter reading refused: not where the last one allows; sample read without it",
			"joules", v, "last", last, "max_watts", g.Bound())
		return nil
	}
	return gpu.Float(v)
}

// noEnergy notes a sample of d read without its energy counter (the read
// failed): the GPU's power limit at it still bounds the counter's next
// step (package energyguard, Guard.See).
func (rd *devReader) noEnergy(d *gpu.Device) {
	rd.ds.energy.See(energyguard.Watts(d.PowerLimitW))
}

// logEnergy logs a line about the GPU's energy counter, at most once per
// energyLogEvery per GPU and kind.
func (rd *devReader) logEnergy(kind string, keyvals ...any) {
	held, ok := rd.b.energyLog.NoteAt(rd.ds.uuid+"/"+kind, rd.now)
	if !ok {
		return
	}
	_ = level.Warn(rd.b.logger).Log(append(keyvals, "gpu", rd.ds.index, "uuid", rd.ds.uuid, "held", held)...)
}
