package nvml

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// allLinks is the field-value scope that sums an NVLink counter over every
// link of the GPU (nvml.h: a scopeId of UINT_MAX).
const allLinks = math.MaxUint32

// nvlinkFields are the NVLink figures read in one nvmlDeviceGetFieldValues
// call, with where each goes; the first is the link count. The error
// totals among them are only the fallback of the per-link counters below
// (see nvlinkErrorCounters).
var nvlinkFields = []struct {
	id    uint32
	scope uint32
	name  string
	dst   func(h *gpu.Health) **uint64
	scale uint64 // multiplier into base units
}{
	{nvml.FI_DEV_NVLINK_LINK_COUNT, 0, "link count", func(h *gpu.Health) **uint64 { return &h.NVLinkLinks }, 1},
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, allLinks, "data TX", func(h *gpu.Health) **uint64 { return &h.NVLinkTxBytes }, 1024}, // KiB
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, allLinks, "data RX", func(h *gpu.Health) **uint64 { return &h.NVLinkRxBytes }, 1024},
	{nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 0, "CRC flit errors", nvlinkCRCFlit, 1},
	{nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, 0, "CRC data errors", nvlinkCRCData, 1},
	{nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 0, "replay errors", nvlinkReplay, 1},
	{nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 0, "recovery errors", nvlinkRecovery, 1},
}

func nvlinkCRCFlit(h *gpu.Health) **uint64  { return &h.NVLinkCRCFlitErrors }
func nvlinkCRCData(h *gpu.Health) **uint64  { return &h.NVLinkCRCDataErrors }
func nvlinkReplay(h *gpu.Health) **uint64   { return &h.NVLinkReplayErrors }
func nvlinkRecovery(h *gpu.Health) **uint64 { return &h.NVLinkRecoveryErrors }

// nvlinkErrorCounters are the link-level error counters read link by link
// with nvmlDeviceGetNvLinkErrorCounter and summed over the GPU's active
// links, as nvidia-smi nvlink -e reads them. The whole-GPU field totals
// (FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL) report success with zero on Hopper
// (https://github.com/DataDog/datadog-agent/pull/55966), so they are served
// only for a counter no link has answered (fallback path). Hopper may not
// support DL_CRC_DATA per link; its crc_data then stays the field total.
var nvlinkErrorCounters = []struct {
	counter nvml.NvLinkErrorCounter
	name    string
	dst     func(h *gpu.Health) **uint64
}{
	{nvml.NVLINK_ERROR_DL_CRC_FLIT, "DL_CRC_FLIT", nvlinkCRCFlit},
	{nvml.NVLINK_ERROR_DL_CRC_DATA, "DL_CRC_DATA", nvlinkCRCData},
	{nvml.NVLINK_ERROR_DL_REPLAY, "DL_REPLAY", nvlinkReplay},
	{nvml.NVLINK_ERROR_DL_RECOVERY, "DL_RECOVERY", nvlinkRecovery},
}

// readHealth reads NVLink, PCIe, remapped rows and retired pages. Each
// figure the GPU does not support stays nil; a GPU that stops answering is
// recorded as fatal by ok(), and nothing more is asked of it.
func (rd *devReader) readHealth(d *gpu.Device) {
	h := rd.ds.handle
	hl := &d.Health
	rd.inTurn(func() {
		rd.readNVLink(h, hl)
	}, func() {
		if v, r := h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); rd.ok("nvmlDeviceGetPcieThroughput(TX)", r) {
			hl.PCIeTxBytesPS = gpu.Float(float64(v) * 1024) // KB/s
		}
	}, func() {
		if v, r := h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); rd.ok("nvmlDeviceGetPcieThroughput(RX)", r) {
			hl.PCIeRxBytesPS = gpu.Float(float64(v) * 1024)
		}
	}, func() {
		if v, r := h.GetPcieReplayCounter(); rd.ok("nvmlDeviceGetPcieReplayCounter", r) && v >= 0 {
			hl.PCIeReplays = gpu.Uint(uint64(v))
		}
	}, func() {
		if !rd.b.has(symRemappedRows) {
			rd.skip(symRemappedRows)
		} else if corr, unc, pending, failed, r := h.GetRemappedRows(); rd.ok("nvmlDeviceGetRemappedRows", r) {
			hl.RemappedRowsCorrectable = gpu.Uint(uint64(max(corr, 0)))
			hl.RemappedRowsUncorrectable = gpu.Uint(uint64(max(unc, 0)))
			hl.RowRemapPending, hl.RowRemapFailure = gpu.Bool(pending), gpu.Bool(failed)
		}
	}, func() {
		if v, r := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS); rd.ok("nvmlDeviceGetRetiredPages(single-bit)", r) {
			hl.RetiredPagesSingleBit = gpu.Uint(uint64(len(v)))
		}
	}, func() {
		if v, r := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); rd.ok("nvmlDeviceGetRetiredPages(double-bit)", r) {
			hl.RetiredPagesDoubleBit = gpu.Uint(uint64(len(v)))
		}
	}, func() {
		if v, r := h.GetRetiredPagesPendingStatus(); rd.ok("nvmlDeviceGetRetiredPagesPendingStatus", r) {
			hl.RetiredPagesPending = gpu.Bool(v == nvml.FEATURE_ENABLED)
		}
	})
}

// readNVLink reads the NVLink counters in one field-value call, then the
// state of each link, then the error counters of each active link. A GPU
// without NVLink (the link count unsupported or 0) has no NVLink figures.
func (rd *devReader) readNVLink(h nvml.Device, hl *gpu.Health) {
	vals := make([]nvml.FieldValue, len(nvlinkFields))
	for i, f := range nvlinkFields {
		vals[i] = nvml.FieldValue{FieldId: f.id, ScopeId: f.scope}
	}
	if !rd.ok("nvmlDeviceGetFieldValues(NVLink)", h.GetFieldValues(vals)) {
		return
	}
	for i, f := range nvlinkFields {
		if !rd.ok("nvmlDeviceGetFieldValues(NVLink "+f.name+")", nvml.Return(vals[i].NvmlReturn)) {
			if i == 0 {
				return // no link count: no NVLink
			}
			continue
		}
		if v, ok := fieldUint(vals[i]); ok {
			*f.dst(hl) = gpu.Uint(v * f.scale)
		}
	}
	if hl.NVLinkLinks == nil || *hl.NVLinkLinks == 0 {
		for _, f := range nvlinkFields {
			*f.dst(hl) = nil
		}
		return
	}
	links := int(min(*hl.NVLinkLinks, nvml.NVLINK_MAX_LINKS))
	var active []int
	stateKnown := true
	for link := 0; link < links; link++ {
		s, r := h.GetNvLinkState(link)
		if !rd.ok("nvmlDeviceGetNvLinkState", r) {
			if rd.fatal != nil {
				return
			}
			stateKnown = false // NVLinkActive stays unknown; the link is skipped
			continue
		}
		if s == nvml.FEATURE_ENABLED {
			active = append(active, link)
		}
	}
	if stateKnown {
		hl.NVLinkActive = gpu.Uint(uint64(len(active)))
	}
	rd.readNVLinkErrors(h, hl, active)
}

// nvlinkErrors are the latest per-link error counts of a GPU, by counter
// (the index in nvlinkErrorCounters) and link; nil until one was read.
type nvlinkErrors [][]*uint64

// readNVLinkErrors replaces the field totals of the error counters with
// the per-link counters summed over the links: each active link's count
// read now, each other link's as last read, so that a link going down does
// not take its errors out of the sum (a fall Prometheus would take for a
// counter reset). Where no link ever supported a counter (a driver
// without it, no link ever active), the field total read before stays:
// the fallback path.
func (rd *devReader) readNVLinkErrors(h nvml.Device, hl *gpu.Health, active []int) {
	st := &rd.ds.nvlinkErrs
	if *st == nil {
		*st = make(nvlinkErrors, len(nvlinkErrorCounters))
		for i := range *st {
			(*st)[i] = make([]*uint64, nvml.NVLINK_MAX_LINKS)
		}
	}
	for i, c := range nvlinkErrorCounters {
		last := (*st)[i]
		for _, link := range active {
			v, r := h.GetNvLinkErrorCounter(link, c.counter)
			if !rd.ok("nvmlDeviceGetNvLinkErrorCounter("+c.name+")", r) {
				if rd.fatal != nil {
					return
				}
				continue // not supported on this link
			}
			last[link] = gpu.Uint(v)
		}
		var sum uint64
		read := false
		for _, v := range last {
			if v != nil {
				sum += *v
				read = true
			}
		}
		if read {
			*c.dst(hl) = gpu.Uint(sum)
		}
	}
}

// fieldUint decodes a field value as an unsigned count; false for a
// negative or floating-point value.
func fieldUint(v nvml.FieldValue) (uint64, bool) {
	le := binary.LittleEndian
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(le.Uint32(v.Value[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return le.Uint64(v.Value[:]), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		if s := int64(le.Uint64(v.Value[:])); s >= 0 {
			return uint64(s), true
		}
	case nvml.VALUE_TYPE_SIGNED_INT:
		if s := int32(le.Uint32(v.Value[:4])); s >= 0 {
			return uint64(s), true
		}
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(le.Uint16(v.Value[:2])), true
	}
	return 0, false
}
