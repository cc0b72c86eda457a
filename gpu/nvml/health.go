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
// call, with where each goes; the first is the link count.
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
	{nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 0, "CRC flit errors", func(h *gpu.Health) **uint64 { return &h.NVLinkCRCFlitErrors }, 1},
	{nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, 0, "CRC data errors", func(h *gpu.Health) **uint64 { return &h.NVLinkCRCDataErrors }, 1},
	{nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 0, "replay errors", func(h *gpu.Health) **uint64 { return &h.NVLinkReplayErrors }, 1},
	{nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 0, "recovery errors", func(h *gpu.Health) **uint64 { return &h.NVLinkRecoveryErrors }, 1},
}

// readHealth reads NVLink, PCIe, remapped rows and retired pages. Each
// figure the GPU does not support stays nil; a GPU that stops answering is
// recorded as fatal by ok().
func (rd *devReader) readHealth(d *gpu.Device) {
	h := rd.ds.handle
	hl := &d.Health
	rd.readNVLink(h, hl)
	if v, r := h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); rd.ok("nvmlDeviceGetPcieThroughput(TX)", r) {
		hl.PCIeTxBytesPS = gpu.Float(float64(v) * 1024) // KB/s
	}
	if v, r := h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); rd.ok("nvmlDeviceGetPcieThroughput(RX)", r) {
		hl.PCIeRxBytesPS = gpu.Float(float64(v) * 1024)
	}
	if v, r := h.GetPcieReplayCounter(); rd.ok("nvmlDeviceGetPcieReplayCounter", r) && v >= 0 {
		hl.PCIeReplays = gpu.Uint(uint64(v))
	}
	if rd.b.has(symRemappedRows) {
		if corr, unc, pending, failed, r := h.GetRemappedRows(); rd.ok("nvmlDeviceGetRemappedRows", r) {
			hl.RemappedRowsCorrectable = gpu.Uint(uint64(max(corr, 0)))
			hl.RemappedRowsUncorrectable = gpu.Uint(uint64(max(unc, 0)))
			hl.RowRemapPending, hl.RowRemapFailure = gpu.Bool(pending), gpu.Bool(failed)
		}
	} else {
		rd.skip(symRemappedRows)
	}
	if v, r := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS); rd.ok("nvmlDeviceGetRetiredPages(single-bit)", r) {
		hl.RetiredPagesSingleBit = gpu.Uint(uint64(len(v)))
	}
	if v, r := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); rd.ok("nvmlDeviceGetRetiredPages(double-bit)", r) {
		hl.RetiredPagesDoubleBit = gpu.Uint(uint64(len(v)))
	}
	if v, r := h.GetRetiredPagesPendingStatus(); rd.ok("nvmlDeviceGetRetiredPagesPendingStatus", r) {
		hl.RetiredPagesPending = gpu.Bool(v == nvml.FEATURE_ENABLED)
	}
}

// readNVLink reads the NVLink counters in one field-value call, then the
// state of each link. A GPU without NVLink (the link count unsupported or
// 0) has no NVLink figures.
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
	var active uint64
	for link := 0; link < int(min(*hl.NVLinkLinks, nvml.NVLINK_MAX_LINKS)); link++ {
		s, r := h.GetNvLinkState(link)
		if !rd.ok("nvmlDeviceGetNvLinkState", r) {
			return // NVLinkActive stays unknown
		}
		if s == nvml.FEATURE_ENABLED {
			active++
		}
	}
	hl.NVLinkActive = gpu.Uint(active)
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
