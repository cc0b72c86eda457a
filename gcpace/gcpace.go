// Package gcpace paces the garbage collector of a process whose live heap
// is small and whose allocation comes in bursts: the exporter encodes
// each snapshot once, allocating about as much as its whole live heap, so
// that at the default GOGC=100 a collection runs after nearly every
// publication, and a scrape served during its mark phase waits for a
// processor. The pacer gives the heap a floor of headroom instead: a
// collection runs once the heap has grown by Floor past the live heap,
// but never by more than MaxPercent of it, nor by less than the default
// 100%. The heap thus stays within the larger of twice the live heap and
// the live heap plus Floor.
package gcpace

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

const (
	// Floor is the headroom the heap is given past the live heap.
	Floor = 32 << 20
	// MaxPercent bounds the GC percent the pacer sets.
	MaxPercent = 400
	// minPercent is the runtime's default, below which the pacer never
	// goes.
	minPercent = 100
)

// liveHeap is the runtime's measure of the heap the last collection
// found reachable.
const liveHeap = "/gc/heap/live:bytes"

// Pacer sets the GC percent from the live heap; Adjust is called after
// each burst of allocation (each publication).
type Pacer struct {
	floor uint64
	max   int
	live  func() uint64
	set   func(int) int
	cur   int
}

// New returns a pacer of the process's collector, or nil when the
// environment sets GOGC: the operator's choice stands.
func New(floor uint64, maxPercent int) *Pacer {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	sample := []metrics.Sample{{Name: liveHeap}}
	return &Pacer{floor: floor, max: maxPercent, set: debug.SetGCPercent, cur: minPercent, live: func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}}
}

// Adjust sets the GC percent for the live heap measured now; a nil Pacer
// does nothing.
func (p *Pacer) Adjust() {
	if p == nil {
		return
	}
	if pc := Percent(p.live(), p.floor, p.max); pc != p.cur {
		p.set(pc)
		p.cur = pc
	}
}

// Percent is the GC percent that gives a live heap of live bytes floor
// bytes of headroom, within [100, maxPercent].
func Percent(live, floor uint64, maxPercent int) int {
	if live == 0 {
		return maxPercent
	}
	pc := floor * 100 / live
	switch {
	case pc > uint64(maxPercent):
		return maxPercent
	case pc < minPercent:
		return minPercent
	}
	return int(pc)
}
