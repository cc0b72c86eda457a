package nvml

import (
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Bounds on what a GPU's energy counter (mJ since the driver loaded) can
// read, for telling a reading from a glitch (one reading of 2^64-1 mJ has
// been seen between true ones).
const (
	// energyMaxWatts bounds any GPU's draw where its power limit is not
	// read: several times a GB200's 1200 W.
	energyMaxWatts = 10_000
	// energySlack is time added to the time between two readings: the
	// counter is read later in a sample than the sample's time, by up to
	// the time the GPUs before it took.
	energySlack = 5 * time.Second
	// energyMostJoules is more than any GPU draws in 100 years at
	// energyMaxWatts: a reading above it is no counter at all.
	energyMostJoules = energyMaxWatts * 100 * 365 * 24 * 3600
	// energyConfirm is how many refused readings in a row, each
	// following from the one before, show that the counter really is
	// elsewhere than the reading kept (restarted, or that reading was the
	// glitch): the last of them is then taken.
	energyConfirm = 3
)

// energyLogEvery is how often a GPU's refused energy readings are logged.
const energyLogEvery = 10 * time.Minute

// energyGuard is what is kept between samples to check a GPU's energy
// counter: the last reading served, and the refused readings that follow
// from one another since.
type energyGuard struct {
	known bool
	last  float64 // J
	at    time.Time
	// the latest refused reading, and how many refused in a row lead
	// up to it, each following from the one before
	cand   float64
	candAt time.Time
	n      int
}

// follows says whether a counter reading v at at can come after from,
// read at fromAt, on a GPU drawing at most watts: not lower, and higher
// by no more than watts over the time between (and energySlack).
func follows(from float64, fromAt time.Time, v float64, at time.Time, watts float64) bool {
	return v >= from && v-from <= watts*(at.Sub(fromAt)+energySlack).Seconds()
}

// take says whether the reading v (J) at at is served. The first reading,
// and one that follows from the last served, are. One that does not
// (ahead by more than the GPU can draw, or behind) is refused, a sample
// read without its counter: the last served stays what the next is
// checked against, so that a glitch neither turns the counter served back
// nor bills the energy it never counted. energyConfirm refused readings
// in a row that follow from one another are the counter itself (it
// restarted, or the reading kept was the glitch): the last is taken.
// relevel reports that case.
func (g *energyGuard) take(v float64, at time.Time, watts float64) (ok, relevel bool) {
	if v > energyMostJoules {
		return false, false
	}
	if !g.known || follows(g.last, g.at, v, at, watts) {
		*g = energyGuard{known: true, last: v, at: at}
		return true, false
	}
	if g.n > 0 && follows(g.cand, g.candAt, v, at, watts) {
		g.n++
	} else {
		g.n = 1
	}
	g.cand, g.candAt = v, at
	if g.n >= energyConfirm {
		*g = energyGuard{known: true, last: v, at: at}
		return true, true
	}
	return false, false
}

// readEnergy checks an energy reading of mJ through the GPU's guard: the
// counter served, or nil for a reading refused (logged at most once per
// energyLogEvery per GPU and kind).
func (rd *devReader) readEnergy(d *gpu.Device, mJ uint64) *float64 {
	v := float64(mJ) / 1000
	watts := float64(energyMaxWatts)
	if l := d.PowerLimitW; l != nil && *l > 0 {
		watts = min(2**l, watts)
	}
	g := &rd.ds.energy
	last := g.last
	ok, relevel := g.take(v, rd.now, watts)
	switch {
	case relevel:
		rd.logEnergy("relevel", "msg", "GPU energy counter taken at a new level after readings in a row agreed with it",
			"joules", v, "was", last)
	case !ok:
		rd.logEnergy("refused", "msg", "GPU energy counter reading refused: not where the last one allows; sample read without it",
			"joules", v, "last", last, "max_watts", watts)
		return nil
	}
	return gpu.Float(v)
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
