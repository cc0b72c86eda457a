package tenant

import (
	"cmp"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// AddEvents returns prev plus the events in r (each Device.Events, which
// hold what happened since the previous sample), as a new sorted slice:
// prev belongs to a published Snapshot and is never modified. A nil r
// returns prev unchanged.
//
// Every device of r gets, the first time it is seen, a count at 0 for each
// known label set: each of gpu.WellKnownXIDs, gpu.XIDOther, and the other
// kinds (code 0). A counter that appears only with its first event is
// missed by increase() and rate(); one that is there at 0 before is not.
// An XID outside gpu.WellKnownXIDs is counted under gpu.XIDOther.
func AddEvents(prev []EventCount, r *gpu.Readings) []EventCount {
	if r == nil {
		return prev
	}
	type key struct {
		uuid string
		kind gpu.EventKind
		code uint64
	}
	known := make(map[string]bool, len(r.Devices))
	for _, e := range prev {
		known[e.UUID] = true
	}
	n, fresh := 0, 0
	for i := range r.Devices {
		n += len(r.Devices[i].Events)
		if !known[r.Devices[i].UUID] {
			fresh++
		}
	}
	if n == 0 && fresh == 0 {
		return prev
	}
	out := make([]EventCount, len(prev), len(prev)+n+fresh*(len(gpu.WellKnownXIDs)+len(gpu.EventKinds)))
	copy(out, prev)
	idx := make(map[key]int, cap(out))
	for i, e := range out {
		idx[key{e.UUID, e.Kind, e.Code}] = i
	}
	add := func(d *gpu.Device, kind gpu.EventKind, code uint64) int {
		k := key{d.UUID, kind, code}
		if j, ok := idx[k]; ok {
			return j
		}
		idx[k] = len(out)
		out = append(out, EventCount{GPU: d.Index, UUID: d.UUID, Kind: kind, Code: code})
		return len(out) - 1
	}
	for i := range r.Devices {
		d := &r.Devices[i]
		if !known[d.UUID] {
			known[d.UUID] = true
			for _, x := range gpu.WellKnownXIDs {
				add(d, gpu.EventXID, x.Code)
			}
			for _, kind := range gpu.EventKinds {
				add(d, kind, 0) // gpu.XIDOther for EventXID
			}
		}
		for _, ev := range d.Events {
			code := ev.Code
			if ev.Kind == gpu.EventXID && !gpu.IsWellKnownXID(code) {
				code = gpu.XIDOther
			} else if ev.Kind != gpu.EventXID {
				code = 0
			}
			j := add(d, ev.Kind, code)
			out[j].Total++
			out[j].GPU = d.Index
		}
	}
	slices.SortFunc(out, func(x, y EventCount) int {
		return cmp.Or(cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.UUID, y.UUID), cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Code, y.Code))
	})
	return out
}
