package collector

import (
	"fmt"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func init() {
	registerCollector("mig", true, newMIGCollector)
}

type migCollector struct {
	descSet
	info, smCount, smActive, smOccupancy, dramActive, tensorActive, memUsed, memTotal *prometheus.Desc
}

func newMIGCollector(log.Logger) (Collector, error) {
	c := &migCollector{}
	l := []string{"gpu", "uuid", "gpu_instance"}
	c.info = c.add("mig_instance_info", "Identity of a MIG instance; always 1.",
		"gpu", "uuid", "gpu_instance", "mig_uuid", "profile", "compute_instance")
	c.smCount = c.add("mig_streaming_multiprocessors", "Number of SMs of the MIG instance.", l...)
	c.smActive = c.add("mig_sm_active_ratio", "Fraction of time at least one warp was resident on an SM of the instance, averaged over its SMs, over the sample interval.", l...)
	c.smOccupancy = c.add("mig_sm_occupancy_ratio", "Resident warps over the maximum, averaged over the instance's SMs, over the sample interval.", l...)
	c.dramActive = c.add("mig_dram_active_ratio", "Fraction of the instance's share of peak device memory bandwidth used over the sample interval.", l...)
	c.tensorActive = c.add("mig_tensor_active_ratio", "Fraction of cycles the instance's tensor pipes were busy over the sample interval.", l...)
	c.memUsed = c.add("mig_memory_used_bytes", "Device memory in use in the MIG instance.", l...)
	c.memTotal = c.add("mig_memory_total_bytes", "Device memory size of the MIG instance.", l...)
	return c, nil
}

func (c *migCollector) Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	r := snap.Readings
	if r == nil {
		return nil
	}
	e := c.emit(ch)
	defer e.close()
	type key struct {
		uuid string
		gi   int
	}
	seen := firstSet[key]{}
	for i := range r.Devices {
		d := &r.Devices[i]
		if !d.Up || len(d.MIG) == 0 {
			continue
		}
		g, u := itoa(d.Index), d.UUID
		for j := range d.MIG {
			m := &d.MIG[j]
			if !seen.add(key{d.UUID, m.GPUInstanceID}) {
				e.fail(fmt.Errorf("GPU %s: GPU instance %d reported twice; later copies skipped", d.UUID, m.GPUInstanceID))
				continue
			}
			gi := itoa(m.GPUInstanceID)
			for _, ci := range m.ComputeInstances() { // one per MIG device
				e.gauge(c.info, 1, g, u, gi, ci.UUID, m.Profile, itoa(ci.ID))
			}
			if m.SMCount > 0 {
				e.gauge(c.smCount, float64(m.SMCount), g, u, gi)
			}
			e.optGauge(c.smActive, m.Activity.SMActive, g, u, gi)
			e.optGauge(c.smOccupancy, m.Activity.SMOccupancy, g, u, gi)
			e.optGauge(c.dramActive, m.Activity.DRAMActive, g, u, gi)
			e.optGauge(c.tensorActive, m.Activity.TensorActive, g, u, gi)
			if m.MemoryTotalBytes > 0 {
				e.gauge(c.memUsed, float64(m.MemoryUsedBytes), g, u, gi)
				e.gauge(c.memTotal, float64(m.MemoryTotalBytes), g, u, gi)
			}
		}
	}
	return e.err()
}
