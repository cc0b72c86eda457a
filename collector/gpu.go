package collector

import (
	"fmt"
	"strconv"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func init() {
	registerCollector("gpu", true, newGPUCollector)
}

// clockEventReasons names the bits of NVML's clock event reason mask
// (nvmlClocksEventReason* in nvml.h). The list is fixed, so the
// per-reason series are bounded.
var clockEventReasons = []struct {
	bit  uint64
	name string
}{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
	{0x200, "board_limit"},
	{0x400, "reliability"},
}

type gpuCollector struct {
	descSet
	info, up, smCount, bandwidth                            *prometheus.Desc
	smActive, smOccupancy, dramActive, tensorActive         *prometheus.Desc
	util, memUtil, memUsed, memTotal                        *prometheus.Desc
	smClock, smClockMax, memClock, clocksLocked             *prometheus.Desc
	power, powerLimit, energy, temperature                  *prometheus.Desc
	clockReasons, clockReason                               *prometheus.Desc
	ctxSwitches, ctxSwitchCycles, processes, unverified     *prometheus.Desc
	eccEnabled, eccErrors, persistence, computeMode, events *prometheus.Desc
	timeslice                                               *prometheus.Desc
	health                                                  healthDescs
}

func newGPUCollector(log.Logger) (Collector, error) {
	c := &gpuCollector{}
	l := []string{"gpu", "uuid"}
	with := func(extra ...string) []string { return append(append([]string{}, l...), extra...) }
	c.info = c.add("gpu_info", "Identity of a GPU; always 1.", with("name", "pci_bus_id", "mode", "driver_version", "cuda_version", "activity_source")...)
	c.up = c.add("gpu_up", "1 if the GPU was read in the last sample; 0 if it was lost, needs a reset or timed out (NVML's GPU_IS_LOST, RESET_REQUIRED, TIMEOUT), or an unknown error left it without a UUID or without any of memory, SM clock, power, temperature, utilization and energy. A reading failing alone leaves only its series absent.", l...)
	c.smCount = c.add("gpu_streaming_multiprocessors", "Number of streaming multiprocessors of the GPU.", l...)
	c.bandwidth = c.add("gpu_memory_bandwidth_max_bytes_per_second", "Peak device memory (HBM) bandwidth of the GPU.", l...)
	c.smActive = c.add("gpu_sm_active_ratio", "Fraction of time at least one warp was resident on an SM, averaged over SMs, over the sample interval.", l...)
	c.smOccupancy = c.add("gpu_sm_occupancy_ratio", "Resident warps over the maximum, averaged over SMs, over the sample interval.", l...)
	c.dramActive = c.add("gpu_dram_active_ratio", "Fraction of peak device memory (HBM) bandwidth used over the sample interval.", l...)
	c.tensorActive = c.add("gpu_tensor_active_ratio", "Fraction of cycles the tensor pipes were busy over the sample interval.", l...)
	c.util = c.add("gpu_utilization_ratio", "NVML's coarse GPU utilization: fraction of time a kernel was running, over the driver's window.", l...)
	c.memUtil = c.add("gpu_memory_utilization_ratio", "NVML's coarse memory utilization: fraction of time device memory was read or written, over the driver's window.", l...)
	c.memUsed = c.add("gpu_memory_used_bytes", "Device memory in use.", l...)
	c.memTotal = c.add("gpu_memory_total_bytes", "Device memory size.", l...)
	c.smClock = c.add("gpu_sm_clock_hertz", "Current SM clock.", l...)
	c.smClockMax = c.add("gpu_sm_clock_max_hertz", "Maximum SM clock.", l...)
	c.memClock = c.add("gpu_memory_clock_hertz", "Current memory clock.", l...)
	c.clocksLocked = c.add("gpu_clocks_locked", "1 if a locked or application clock range is set, 0 if the clocks are free.", l...)
	c.power = c.add("gpu_power_watts", "Current power draw.", l...)
	c.powerLimit = c.add("gpu_power_limit_watts", "Current power limit.", l...)
	c.energy = c.add("gpu_energy_joules_total", "Energy consumed since the driver loaded.", l...)
	c.temperature = c.add("gpu_temperature_celsius", "GPU core temperature.", l...)
	c.clockReasons = c.add("gpu_clock_event_reasons", "NVML clock event (throttle) reason bit mask; 0 when none is active.", l...)
	c.clockReason = c.add("gpu_clock_event_reason_active", "1 if the named clock event (throttle) reason is active, 0 if not; one series per known reason.", with("reason")...)
	c.ctxSwitches = c.add("gpu_context_switches_total", "Context switches performed by the graphics/compute engines.", l...)
	c.ctxSwitchCycles = c.add("gpu_context_switch_cycles_total", "Engine cycles spent switching contexts.", l...)
	c.processes = c.add("gpu_processes", "Processes with a context on the GPU.", l...)
	c.unverified = c.add("gpu_mps_servers_unverified", "Processes of a GPU in MPS mode taken for its MPS server by their name alone, their executable or their parent's not readable to the exporter (it lacks CAP_SYS_PTRACE): their pauses are refused, as the server's.", l...)
	c.eccEnabled = c.add("gpu_ecc_enabled", "1 if ECC is enabled, 0 if not.", l...)
	c.eccErrors = c.add("gpu_ecc_errors_total", "Volatile ECC errors since the driver loaded, by type (corrected, uncorrected).", with("type")...)
	c.persistence = c.add("gpu_persistence_mode", "1 if persistence mode is on, 0 if off.", l...)
	c.computeMode = c.add("gpu_compute_mode_info", "The GPU's compute mode; always 1.", with("compute_mode")...)
	c.events = c.add("gpu_events_total", "Device events (XID errors, allocation failures, reconfigurations) since the exporter started, by kind and code (XID number, \"other\" for XIDs outside the well-known list; 0 for other kinds); every known kind and code is served from 0.", with("kind", "code")...)
	c.timeslice = c.add("gpu_compute_timeslice_info", "The compute time-slice level set with nvidia-smi compute-policy; always 1.", with("timeslice")...)
	c.addHealth(l, with)
	return c, nil
}

func (c *gpuCollector) Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	e := c.emit(ch)
	defer e.close()
	if r := snap.Readings; r != nil {
		seen := make(firstSet[deviceKey], len(r.Devices))
		for i := range r.Devices {
			d := &r.Devices[i]
			if !seen.add(keyOf(d)) {
				e.fail(fmt.Errorf("device %s (index %d) reported twice; later copies skipped", d.UUID, d.Index))
				continue
			}
			c.device(e, r, d)
		}
	}
	type evKey struct {
		gpu  int
		uuid string
		kind gpu.EventKind
		code uint64
	}
	seenEv := make(firstSet[evKey], len(snap.Events))
	for _, ev := range snap.Events {
		if !seenEv.add(evKey{ev.GPU, ev.UUID, ev.Kind, ev.Code}) {
			e.fail(fmt.Errorf("event count %s/%d of GPU %s listed twice; later copies skipped", ev.Kind, ev.Code, ev.UUID))
			continue
		}
		e.counter(c.events, float64(ev.Total), itoa(ev.GPU), ev.UUID, string(ev.Kind), eventCode(ev.Kind, ev.Code))
	}
	return e.err()
}

// deviceKey tells devices apart: by UUID, and those without one (a GPU
// whose handle NVML did not give at start, never identified) by index.
type deviceKey struct {
	uuid  string
	index int
}

func keyOf(d *gpu.Device) deviceKey {
	if d.UUID != "" {
		return deviceKey{uuid: d.UUID}
	}
	return deviceKey{index: d.Index}
}

func (c *gpuCollector) device(e *emitter, r *gpu.Readings, d *gpu.Device) {
	g, u := itoa(d.Index), d.UUID
	e.gauge(c.info, 1, g, u, d.Name, d.PCIBusID, string(d.Mode), r.DriverVersion, r.CUDAVersion, d.Activity.Source)
	e.gauge(c.up, boolValue(d.Up), g, u)
	if !d.Up {
		// Nothing else of a lost GPU is current; absent, not zero.
		return
	}
	if d.SMCount > 0 {
		e.gauge(c.smCount, float64(d.SMCount), g, u)
	}
	if d.MemoryBandwidthBytesPS > 0 {
		e.gauge(c.bandwidth, d.MemoryBandwidthBytesPS, g, u)
	}
	e.optGauge(c.smActive, d.Activity.SMActive, g, u)
	e.optGauge(c.smOccupancy, d.Activity.SMOccupancy, g, u)
	e.optGauge(c.dramActive, d.Activity.DRAMActive, g, u)
	e.optGauge(c.tensorActive, d.Activity.TensorActive, g, u)
	e.optGauge(c.util, d.GPUUtil, g, u)
	e.optGauge(c.memUtil, d.MemUtil, g, u)
	if d.MemoryTotalBytes > 0 {
		e.gauge(c.memUsed, float64(d.MemoryUsedBytes), g, u)
		e.gauge(c.memTotal, float64(d.MemoryTotalBytes), g, u)
	}
	e.optGauge(c.smClock, d.SMClockHz, g, u)
	e.optGauge(c.smClockMax, d.SMClockMaxHz, g, u)
	e.optGauge(c.memClock, d.MemClockHz, g, u)
	e.optBool(c.clocksLocked, d.ClocksLocked, g, u)
	e.optGauge(c.power, d.PowerWatts, g, u)
	e.optGauge(c.powerLimit, d.PowerLimitW, g, u)
	if d.EnergyJoules != nil {
		e.counter(c.energy, *d.EnergyJoules, g, u)
	}
	e.optGauge(c.temperature, d.TemperatureC, g, u)
	if !d.ThrottleReasonUnknown {
		e.gauge(c.clockReasons, float64(d.ThrottleReason), g, u)
		for _, cr := range clockEventReasons {
			e.gauge(c.clockReason, boolValue(d.ThrottleReason&cr.bit != 0), g, u, cr.name)
		}
	}
	if d.ContextSwitchesTotal != nil {
		e.counter(c.ctxSwitches, float64(*d.ContextSwitchesTotal), g, u)
	}
	if d.ContextSwitchCyclesTotal != nil {
		e.counter(c.ctxSwitchCycles, float64(*d.ContextSwitchCyclesTotal), g, u)
	}
	if d.ListsRead() { // an MPS GPU's compute list alone holds its server, not its clients
		e.gauge(c.processes, float64(len(d.Processes)), g, u)
	}
	if d.Mode == gpu.SharingMPS {
		n := 0
		for _, p := range d.Processes {
			if p.MPSServerUnverified {
				n++
			}
		}
		e.gauge(c.unverified, float64(n), g, u)
	}
	e.optBool(c.eccEnabled, d.ECCEnabled, g, u)
	if d.ECCCorrectedTotal != nil {
		e.counter(c.eccErrors, float64(*d.ECCCorrectedTotal), g, u, "corrected")
	}
	if d.ECCUncorrectedTotal != nil {
		e.counter(c.eccErrors, float64(*d.ECCUncorrectedTotal), g, u, "uncorrected")
	}
	e.optBool(c.persistence, d.PersistenceMode, g, u)
	if d.ComputeMode != "" {
		e.gauge(c.computeMode, 1, g, u, d.ComputeMode)
	}
	if d.ComputeTimeSlice != "" {
		e.gauge(c.timeslice, 1, g, u, string(d.ComputeTimeSlice))
	}
	c.deviceHealth(e, &d.Health, g, u)
}

// eventCode is the code label of an event count: the XID number, "other"
// for XIDs outside gpu.WellKnownXIDs, "0" for the other kinds.
func eventCode(kind gpu.EventKind, code uint64) string {
	if kind == gpu.EventXID && code == gpu.XIDOther {
		return "other"
	}
	return strconv.FormatUint(code, 10)
}
