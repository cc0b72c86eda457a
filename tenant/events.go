package tenant

import (
	"sort"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// AddEvents returns prev plus the events in r (each Device.Events, which
// hold what happened since the previous sample), as a new sorted slice:
// prev belongs to a published Snapshot and is never modified. A nil r
// returns prev unchanged.
func AddEvents(prev []EventCount, r *gpu.Readings) []EventCount {
	if r == nil {
		return prev
	}
	n := 0
	for i := range r.Devices {
		n += len(r.Devices[i].Events)
	}
	if n == 0 {
		return prev
	}
	type key struct {
		uuid string
		kind gpu.EventKind
		code uint64
	}
	out := make([]EventCount, len(prev), len(prev)+n)
	copy(out, prev)
	idx := make(map[key]int, len(prev)+n)
	for i, e := range out {
		idx[key{e.UUID, e.Kind, e.Code}] = i
	}
	for i := range r.Devices {
		d := &r.Devices[i]
		for _, ev := range d.Events {
			k := key{d.UUID, ev.Kind, ev.Code}
			if j, ok := idx[k]; ok {
				out[j].Total++
				out[j].GPU = d.Index
				continue
			}
			idx[k] = len(out)
			out = append(out, EventCount{GPU: d.Index, UUID: d.UUID, Kind: ev.Kind, Code: ev.Code, Total: 1})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.GPU != y.GPU {
			return x.GPU < y.GPU
		}
		if x.UUID != y.UUID {
			return x.UUID < y.UUID
		}
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		return x.Code < y.Code
	})
	return out
}
