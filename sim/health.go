package sim

import (
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Health events: scenario events that change only what a GPU's health
// readings report (NVLink and PCIe error counters, remapped rows, retired
// pages), so that alerts on them can be seen firing. They never touch a
// workload: they are kept out of the events the engine runs (which cut its
// steps), and the readings are worked out from them at each reading.
const (
	// nvlink-crc-errors and nvlink-replays: the GPU's NVLink CRC flit
	// errors or replays rise at rate per second from then on (rate 0
	// stops them).
	actionNVLinkCRCErrors = "nvlink-crc-errors"
	actionNVLinkReplays   = "nvlink-replays"
	// pcie-replays: the GPU's PCIe replays rise at rate per second.
	actionPCIeReplays = "pcie-replays"
	// row-remap-pending: an uncorrectable error remapped a row that takes
	// effect at the next GPU reset (one more uncorrectable remapped row,
	// pending from then on).
	actionRowRemapPending = "row-remap-pending"
	// row-remap-failure: a row remap failed (no spare rows left).
	actionRowRemapFailure = "row-remap-failure"
	// page-retired: a double-bit ECC error retired a page, pending until a
	// reboot, as a GPU before Ampere reports it (from then on the retired
	// page series are served, absent before as on Hopper).
	actionPageRetired = "page-retired"
)

// isHealthAction says whether a scenario event action is a health event.
func isHealthAction(a string) bool {
	switch a {
	case actionNVLinkCRCErrors, actionNVLinkReplays, actionPCIeReplays,
		actionRowRemapPending, actionRowRemapFailure, actionPageRetired:
		return true
	}
	return false
}

// ratedHealthAction says whether a health event sets a counter's rate.
func ratedHealthAction(a string) bool {
	return a == actionNVLinkCRCErrors || a == actionNVLinkReplays || a == actionPCIeReplays
}

// rising is a counter that rises at a rate set by events.
type rising struct {
	rate  float64 // per second
	since int64   // ns since start
	base  float64 // the count at since
}

func (r *rising) set(at int64, rate float64) {
	r.base = r.at(at)
	r.since, r.rate = at, rate
}

func (r *rising) at(now int64) float64 {
	return r.base + r.rate*float64(now-r.since)/1e9
}

func (r *rising) count(now int64) *uint64 { return gpu.Uint(uint64(r.at(now))) }

// uncorrectedECC is GPU g's volatile count of uncorrectable ECC errors at
// now (ns since start): one for each error a health event says happened
// (a row remapped after an uncorrectable error, a page retired after a
// double-bit error), as the driver counts each such error before it
// remaps or retires. An xid event counts nothing: it is a message, whose
// error a scenario states with the health event.
func (s *Simulator) uncorrectedECC(g *gpuState, now int64) uint64 {
	var n uint64
	for _, e := range s.sc.health {
		if int64(e.At) > now {
			break
		}
		if *e.GPU == g.idx && (e.Action == actionRowRemapPending || e.Action == actionPageRetired) {
			n++
		}
	}
	return n
}

// health returns GPU g's health readings at now (ns since start): its
// model's healthy readings changed by the health events on g due by then;
// fig holds the healthy figures.
func (s *Simulator) health(fig *figures, g *gpuState, now int64) gpu.Health {
	h := g.m.health(fig)
	var crc, replay, pcie rising
	var remapped uint64
	var pending, failure bool
	var retired uint64
	for _, e := range s.sc.health {
		if int64(e.At) > now {
			break
		}
		if *e.GPU != g.idx {
			continue
		}
		switch e.Action {
		case actionNVLinkCRCErrors:
			crc.set(int64(e.At), e.Rate)
		case actionNVLinkReplays:
			replay.set(int64(e.At), e.Rate)
		case actionPCIeReplays:
			pcie.set(int64(e.At), e.Rate)
		case actionRowRemapPending:
			remapped++
			pending = true
		case actionRowRemapFailure:
			failure = true
		case actionPageRetired:
			retired++
		}
	}
	h.NVLinkCRCFlitErrors = crc.count(now)
	h.NVLinkReplayErrors = replay.count(now)
	h.PCIeReplays = pcie.count(now)
	h.RemappedRowsUncorrectable = gpu.Uint(remapped)
	h.RowRemapPending = gpu.Bool(pending)
	h.RowRemapFailure = gpu.Bool(failure)
	if retired > 0 {
		h.RetiredPagesSingleBit, h.RetiredPagesDoubleBit = gpu.Uint(0), gpu.Uint(retired)
		h.RetiredPagesPending = gpu.Bool(true)
	}
	return h
}
