package collector

import (
	"fmt"
	"strconv"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func init() {
	registerCollector("vgpu", true, newVGPUCollector)
}

type vgpuCollector struct {
	descSet
	info, smUtil, memUtil, encUtil, decUtil, fbTotal, fbUsed *prometheus.Desc
	schedInfo, arrEnabled, timeslice, timesliceMin, timesliceMax,
	arrAvgFactor, arrFrequency *prometheus.Desc
	runTime, preemption, slices *prometheus.Desc
}

func newVGPUCollector(log.Logger) (Collector, error) {
	c := &vgpuCollector{}
	l := []string{"gpu", "uuid", "vgpu_instance"}
	d := []string{"gpu", "uuid"}
	c.info = c.add("vgpu_instance_info", "Identity of a vGPU instance and the VM it serves; always 1.",
		"gpu", "uuid", "vgpu_instance", "vgpu_uuid", "vm_id", "vm_name", "type")
	c.smUtil = c.add("vgpu_sm_utilization_ratio", "Fraction of time the vGPU instance's work ran on the SMs over the sample interval.", l...)
	c.memUtil = c.add("vgpu_memory_utilization_ratio", "Fraction of time the vGPU instance read or wrote device memory over the sample interval.", l...)
	c.encUtil = c.add("vgpu_encoder_utilization_ratio", "Video encoder utilization of the vGPU instance over the sample interval.", l...)
	c.decUtil = c.add("vgpu_decoder_utilization_ratio", "Video decoder utilization of the vGPU instance over the sample interval.", l...)
	c.fbTotal = c.add("vgpu_framebuffer_total_bytes", "Framebuffer (device memory) size of the vGPU instance.", l...)
	c.fbUsed = c.add("vgpu_framebuffer_used_bytes", "Framebuffer (device memory) in use by the vGPU instance.", l...)
	c.schedInfo = c.add("vgpu_scheduler_info", "The vGPU scheduler policy of the GPU; always 1.", append(d, "policy")...)
	c.arrEnabled = c.add("vgpu_scheduler_arr_enabled", "1 if the vGPU scheduler's adaptive round robin is on, 0 if off.", d...)
	c.timeslice = c.add("vgpu_scheduler_timeslice_seconds", "vGPU scheduler time slice.", d...)
	c.timesliceMin = c.add("vgpu_scheduler_timeslice_min_seconds", "Smallest vGPU scheduler time slice the GPU accepts.", d...)
	c.timesliceMax = c.add("vgpu_scheduler_timeslice_max_seconds", "Largest vGPU scheduler time slice the GPU accepts.", d...)
	c.arrAvgFactor = c.add("vgpu_scheduler_arr_average_factor", "Adaptive round robin average factor, as NVML reports it.", d...)
	c.arrFrequency = c.add("vgpu_scheduler_arr_frequency", "Adaptive round robin scheduling frequency in hertz: one over the time slice NVML reports with ARR on.", d...)
	rl := append(d, "runlist")
	c.runTime = c.add("vgpu_scheduler_run_seconds_total", "Time the software runlist ran on the GPU, from the vGPU scheduler log.", rl...)
	c.preemption = c.add("vgpu_scheduler_preemption_seconds_total", "Time the software runlist was preempted, from the vGPU scheduler log.", rl...)
	c.slices = c.add("vgpu_scheduler_slices_total", "Time slices (scheduler log entries) of the software runlist.", rl...)
	return c, nil
}

func (c *vgpuCollector) Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	e := c.emit(ch)
	defer e.close()
	type rlKey struct {
		uuid    string
		runlist uint32
	}
	seenRL := make(firstSet[rlKey], len(snap.VGPURunlists))
	for _, rc := range snap.VGPURunlists {
		if !seenRL.add(rlKey{rc.UUID, rc.Runlist}) {
			e.fail(fmt.Errorf("GPU %s: vGPU scheduler runlist %d listed twice; later copies skipped", rc.UUID, rc.Runlist))
			continue
		}
		g, u, id := itoa(rc.GPU), rc.UUID, strconv.FormatUint(uint64(rc.Runlist), 10)
		e.counter(c.runTime, rc.RunTime.Seconds(), g, u, id)
		e.counter(c.preemption, rc.Preemption.Seconds(), g, u, id)
		e.counter(c.slices, float64(rc.Slices), g, u, id)
	}
	r := snap.Readings
	if r == nil {
		return e.err()
	}
	type key struct {
		uuid string
		id   uint32
	}
	seen := firstSet[key]{}
	seenDev := make(firstSet[string], len(r.Devices))
	for i := range r.Devices {
		d := &r.Devices[i]
		if !d.Up || !seenDev.add(d.UUID) {
			// A device listed twice is reported by the gpu collector.
			continue
		}
		g, u := itoa(d.Index), d.UUID
		if s := d.Scheduler; s != nil {
			if s.Policy != "" {
				e.gauge(c.schedInfo, 1, g, u, string(s.Policy))
			}
			e.gauge(c.arrEnabled, boolValue(s.ARREnabled), g, u)
			if s.TimeSlice > 0 {
				e.gauge(c.timeslice, s.TimeSlice.Seconds(), g, u)
			}
			if s.MinTimeSlice > 0 {
				e.gauge(c.timesliceMin, s.MinTimeSlice.Seconds(), g, u)
			}
			if s.MaxTimeSlice > 0 {
				e.gauge(c.timesliceMax, s.MaxTimeSlice.Seconds(), g, u)
			}
			if s.ARREnabled {
				e.gauge(c.arrAvgFactor, float64(s.AvgFactor), g, u)
				if s.Frequency > 0 { // absent, not 0, where the backend cannot say
					e.gauge(c.arrFrequency, float64(s.Frequency), g, u)
				}
			}
		}
		for j := range d.VGPUs {
			v := &d.VGPUs[j]
			if !seen.add(key{d.UUID, v.ID}) {
				e.fail(fmt.Errorf("GPU %s: vGPU instance %d reported twice; later copies skipped", d.UUID, v.ID))
				continue
			}
			id := strconv.FormatUint(uint64(v.ID), 10)
			e.gauge(c.info, 1, g, u, id, v.UUID, v.VMID, v.VMName, v.Type)
			e.optGauge(c.smUtil, v.SMUtil, g, u, id)
			e.optGauge(c.memUtil, v.MemUtil, g, u, id)
			e.optGauge(c.encUtil, v.EncUtil, g, u, id)
			e.optGauge(c.decUtil, v.DecUtil, g, u, id)
			if v.FramebufferBytes > 0 {
				e.gauge(c.fbTotal, float64(v.FramebufferBytes), g, u, id)
				if v.FramebufferUsed != nil { // absent, not 0, where NVML did not give it
					e.gauge(c.fbUsed, float64(*v.FramebufferUsed), g, u, id)
				}
			}
		}
	}
	return e.err()
}
