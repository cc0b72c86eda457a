// Package energyguard tells a GPU energy counter's reading from a glitch:
// a reading that does not follow from the last one kept (behind it, or
// ahead by more than the GPU can draw) is refused, so that neither a
// reading of 2^64-1 mJ nor one of 0 between true ones is served and
// billed. Every backend that serves an energy counter checks it here.
package energyguard

import "time"

// Bounds on what a GPU's energy counter (J since the driver loaded) can
// read.
const (
	// MaxWatts bounds any GPU's draw where its power limit is not read:
	// several times a GB200's 1200 W.
	MaxWatts = 10_000
	// Slack is time added to the time between two readings: a counter is
	// read later in a sample than the sample's time, by up to the time
	// the GPUs before it took.
	Slack = 5 * time.Second
	// MostJoules is more than any GPU draws in 100 years at MaxWatts: a
	// reading above it is no counter at all.
	MostJoules = MaxWatts * 100 * 365 * 24 * 3600
	// Confirm is how many refused readings in a row, each following from
	// the one before, show that the counter really is elsewhere than the
	// reading kept (restarted, or that reading was the glitch): the last
	// of them is then taken.
	Confirm = 3
)

// Watts is the most a GPU whose power limit is limitW (nil or 0 where not
// read) can draw, as the guard bounds it: twice its limit, at most
// MaxWatts.
func Watts(limitW *float64) float64 {
	w := float64(MaxWatts)
	if limitW != nil && *limitW > 0 {
		w = min(2**limitW, w)
	}
	return w
}

// Draw is the bound on a GPU's draw (Watts) over the time since a reading
// of its counter: the highest bound of any sample since, that reading's
// included. A power limit lowered since bounds none of the energy drawn
// before it was: the limit read at one sample says nothing of the time
// before it. The zero Draw has seen no sample.
type Draw struct{ w float64 }

// See notes the bound w of a sample and returns the bound on the draw
// since the reading, this sample's included.
func (d *Draw) See(w float64) float64 {
	d.w = max(d.w, w)
	return d.w
}

// From starts again at a reading taken at a sample whose bound is w.
func (d *Draw) From(w float64) { d.w = w }

// Guard is what is kept between readings of one GPU's counter: the last
// reading taken, and the refused readings that follow from one another
// since, each with the bound on the draw since it. The zero Guard knows
// nothing: it takes the first reading.
type Guard struct {
	known bool
	last  float64 // J
	at    time.Time
	draw  Draw // since last
	// the latest refused reading, and how many refused in a row lead
	// up to it, each following from the one before
	cand     float64
	candAt   time.Time
	candDraw Draw
	n        int
}

// Last is the last reading taken (0 before the first).
func (g *Guard) Last() float64 { return g.last }

// Bound is the most the GPU can draw, as the guard bounds it, since the
// last reading taken: the highest watts of the samples since, that
// reading's included (0 before the first).
func (g *Guard) Bound() float64 { return g.draw.w }

// Repeats says whether v is the last reading taken, the counter unmoved
// since (false before the first).
func (g *Guard) Repeats(v float64) bool { return g.known && v == g.last }

// follows says whether a counter reading v at at can come after from,
// read at fromAt, on a GPU drawing at most watts: not lower, and higher
// by no more than watts over the time between (and Slack).
func follows(from float64, fromAt time.Time, v float64, at time.Time, watts float64) bool {
	return v >= from && v-from <= watts*(at.Sub(fromAt)+Slack).Seconds()
}

// See notes the bound watts of a sample read without the counter: the
// next reading's step is bounded by it too.
func (g *Guard) See(watts float64) {
	g.draw.See(watts)
	g.candDraw.See(watts)
}

// Take says whether the reading v (J) at at, on a GPU drawing at most
// watts now, is served. The first reading, and one that follows from the
// last taken, are. One that does not (ahead by more than the GPU can
// draw, or behind) is refused, a sample read
// without its counter: the last taken stays what the next is checked
// against, so that a glitch neither turns the counter served back nor
// bills the energy it never counted. Confirm refused readings in a row
// that follow from one another are the counter itself (it restarted, or
// the reading kept was the glitch): the last is taken. relevel reports
// that case. A reading that repeats the last taken keeps the time that
// one was first taken: a copy of the counter that moves once a collect
// interval (dcgm-exporter's, 30 s by default) moves by what the GPU drew
// since then, which the time of its last repeat, a second ago, bounds
// to a fraction of it. A step is bounded by the highest watts of the
// samples since the reading it starts from (Draw, See): a power limit
// lowered in a gap between readings bounds only the time after it.
func (g *Guard) Take(v float64, at time.Time, watts float64) (ok, relevel bool) {
	if v > MostJoules {
		g.See(watts)
		return false, false
	}
	if !g.known || follows(g.last, g.at, v, at, g.draw.See(watts)) {
		draw := Draw{watts}
		if g.Repeats(v) {
			at, draw = g.at, g.draw // the time since it first was
		}
		*g = Guard{known: true, last: v, at: at, draw: draw}
		return true, false
	}
	if g.n > 0 && follows(g.cand, g.candAt, v, at, g.candDraw.See(watts)) {
		g.n++
	} else {
		g.n = 1
	}
	g.cand, g.candAt = v, at
	g.candDraw.From(watts)
	if g.n >= Confirm {
		*g = Guard{known: true, last: v, at: at, draw: Draw{watts}}
		return true, true
	}
	return false, false
}
