package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// healthDescs are the gpu collector's interconnect and memory health
// series: NVLink, PCIe, remapped rows, retired pages.
type healthDescs struct {
	nvlinkLinks, nvlinkBytes, nvlinkErrors   *prometheus.Desc
	pcieBytes, pcieReplays                   *prometheus.Desc
	remappedRows, remapPending, remapFailure *prometheus.Desc
	retiredPages, retiredPending             *prometheus.Desc
}

func (c *gpuCollector) addHealth(l []string, with func(...string) []string) {
	h := &c.health
	h.nvlinkLinks = c.add("gpu_nvlink_links", "NVLink links of the GPU, by state (active, inactive).", with("state")...)
	h.nvlinkBytes = c.add("gpu_nvlink_bytes_total", "Data bytes sent and received over all NVLink links, by direction (transmit, receive).", with("direction")...)
	h.nvlinkErrors = c.add("gpu_nvlink_errors_total", "NVLink link-level errors summed over the links, by type (crc_flit, crc_data, replay, recovery).", with("type")...)
	h.pcieBytes = c.add("gpu_pcie_bytes_per_second", "PCIe throughput over the driver's short window, by direction (transmit, receive).", with("direction")...)
	h.pcieReplays = c.add("gpu_pcie_replays_total", "PCIe link replays.", l...)
	h.remappedRows = c.add("gpu_remapped_rows_total", "Device memory rows remapped, by the kind of error that caused it (correctable, uncorrectable).", with("cause")...)
	h.remapPending = c.add("gpu_row_remap_pending", "1 if a row remapping waits for a GPU reset, 0 if not.", l...)
	h.remapFailure = c.add("gpu_row_remap_failure", "1 if a row remapping failed (the GPU needs service), 0 if not.", l...)
	h.retiredPages = c.add("gpu_retired_pages_total", "Device memory pages retired, by cause (single_bit_ecc, double_bit_ecc).", with("cause")...)
	h.retiredPending = c.add("gpu_retired_pages_pending", "1 if a page retirement waits for a reboot, 0 if not.", l...)
}

func (c *gpuCollector) deviceHealth(e *emitter, h *gpu.Health, g, u string) {
	d := &c.health
	if h.NVLinkActive != nil && h.NVLinkLinks != nil {
		active := min(*h.NVLinkActive, *h.NVLinkLinks)
		e.gauge(d.nvlinkLinks, float64(active), g, u, "active")
		e.gauge(d.nvlinkLinks, float64(*h.NVLinkLinks-active), g, u, "inactive")
	}
	optCounter(e, d.nvlinkBytes, h.NVLinkTxBytes, g, u, "transmit")
	optCounter(e, d.nvlinkBytes, h.NVLinkRxBytes, g, u, "receive")
	optCounter(e, d.nvlinkErrors, h.NVLinkCRCFlitErrors, g, u, "crc_flit")
	optCounter(e, d.nvlinkErrors, h.NVLinkCRCDataErrors, g, u, "crc_data")
	optCounter(e, d.nvlinkErrors, h.NVLinkReplayErrors, g, u, "replay")
	optCounter(e, d.nvlinkErrors, h.NVLinkRecoveryErrors, g, u, "recovery")
	e.optGauge(d.pcieBytes, h.PCIeTxBytesPS, g, u, "transmit")
	e.optGauge(d.pcieBytes, h.PCIeRxBytesPS, g, u, "receive")
	optCounter(e, d.pcieReplays, h.PCIeReplays, g, u)
	optCounter(e, d.remappedRows, h.RemappedRowsCorrectable, g, u, "correctable")
	optCounter(e, d.remappedRows, h.RemappedRowsUncorrectable, g, u, "uncorrectable")
	e.optBool(d.remapPending, h.RowRemapPending, g, u)
	e.optBool(d.remapFailure, h.RowRemapFailure, g, u)
	optCounter(e, d.retiredPages, h.RetiredPagesSingleBit, g, u, "single_bit_ecc")
	optCounter(e, d.retiredPages, h.RetiredPagesDoubleBit, g, u, "double_bit_ecc")
	e.optBool(d.retiredPending, h.RetiredPagesPending, g, u)
}

// optCounter sends a counter for a count that may be absent (nil).
func optCounter(e *emitter, d *prometheus.Desc, v *uint64, lv ...string) {
	if v != nil {
		e.counter(d, float64(*v), lv...)
	}
}
