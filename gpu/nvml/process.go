package nvml

import (
	"math"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// noInstance is the GPU/compute instance ID NVML reports for a process on a
// GPU that is not in MIG mode.
const noInstance = math.MaxUint32

// readProcesses fills the compute and MPS client processes with their used
// memory, and on GPUs not in MIG mode their SM and memory utilization over
// the interval since the previous sample.
func (rd *devReader) readProcesses(d *gpu.Device) {
	b, ds, h := rd.b, rd.ds, rd.ds.handle
	byPID := map[uint32]*gpu.Process{}
	add := func(list []nvml.ProcessInfo, typ gpu.ProcessType) {
		for _, p := range list {
			proc, ok := byPID[p.Pid]
			if !ok {
				proc = &gpu.Process{PID: p.Pid, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1}
				byPID[p.Pid] = proc
			}
			proc.Type = typ
			// NVML_VALUE_NOT_AVAILABLE (all ones) when the driver does not
			// say, e.g. without permission or in some containers.
			if p.UsedGpuMemory != math.MaxUint64 {
				proc.UsedMemoryBytes = gpu.Uint(p.UsedGpuMemory)
			}
			if d.MIGEnabled && p.GpuInstanceId != noInstance {
				proc.GPUInstanceID = int(p.GpuInstanceId)
				if p.ComputeInstanceId != noInstance {
					proc.ComputeInstanceID = int(p.ComputeInstanceId)
				}
			}
		}
	}
	// complete is whether the lists read name every process with a
	// context on the GPU: the compute list, the MPS clients' and the
	// graphics processes' (not kept: no tenant's work is graphics), so
	// that a utilization sample of a PID none names is of a process gone
	// since (UnlistedActivity). A list not read leaves it unknown.
	complete := false
	list, r := h.GetComputeRunningProcesses()
	switch {
	case rd.ok("nvmlDeviceGetComputeRunningProcesses", r) && !(d.MIGEnabled && unplaced(list)):
		add(list, gpu.ProcessCompute)
		complete = true
	case rd.fatal == nil && d.MIGEnabled:
		// In MIG mode the whole-GPU list needs privileges, and through
		// the v1 call (older drivers) it does not say the instances;
		// the list of each MIG device has neither problem.
		d.ProcessesUnread = !rd.readMIGProcesses(d, add)
	default: // refused: how many processes run is not known
		d.ProcessesUnread = true
	}
	if rd.fatal != nil {
		return
	}
	if b.has(symMPSProcesses) {
		if list, r := h.GetMPSComputeRunningProcesses(); rd.ok("nvmlDeviceGetMPSComputeRunningProcesses", r) {
			add(list, gpu.ProcessMPS)
		} else {
			complete, d.MPSProcessesUnread = false, true
			d.MPSProcessesRefused = r != nvml.ERROR_NOT_SUPPORTED && r != nvml.ERROR_FUNCTION_NOT_FOUND
		}
	} else {
		rd.skip(symMPSProcesses)
		complete, d.MPSProcessesUnread = false, true
	}
	if rd.fatal != nil {
		return
	}
	graphics := map[uint32]bool{}
	if complete && !d.MIGEnabled && len(byPID) > 0 {
		list, r := h.GetGraphicsRunningProcesses()
		complete = rd.ok("nvmlDeviceGetGraphicsRunningProcesses", r)
		for _, p := range list {
			graphics[p.Pid] = true
		}
		if rd.fatal != nil {
			return
		}
	}

	// Per-process utilization is not supported on MIG-enabled GPUs
	// (docs/calibration.md, NVML); GPM per GPU instance covers those.
	if !d.MIGEnabled && len(byPID) > 0 {
		if b.has(symProcessUtil) {
			asked := ds.procLastSeen.since(usNow(rd.now))
			samples, r := processUtilization(h, asked)
			switch {
			case r == nvml.ERROR_NOT_FOUND:
				// No sample since lastSeen, and nothing wrong with the
				// GPU. That no process ran a kernel (every one at 0,
				// known) is told only where the answer covers at least
				// one of the driver's sample periods (at most a second:
				// a shorter interval, or a lastSeen ahead of the clock
				// after it stepped back, may close none) and the GPU's
				// own utilization, read this sample, is 0.
				ds.procLastSeen.noSample()
				d.NoProcessSamples = asked != 0 && asked+driverPeriodMax <= usNow(rd.now) &&
					d.GPUUtil != nil && *d.GPUUtil == 0
			case r == nvml.ERROR_INSUFFICIENT_SIZE:
				// The number of samples grew between the wrapper's two
				// calls: no figure this time; the next call asks again.
			case rd.ok("nvmlDeviceGetProcessUtilization", r):
				means := newUtilMeans[uint32](&ds.procLastSeen, usNow(rd.now))
				for _, s := range samples {
					means.add(s.Pid, s.TimeStamp, float64(s.SmUtil), float64(s.MemUtil))
				}
				rd.oddSamples("nvmlDeviceGetProcessUtilization", means.odd)
				for _, pid := range means.keys {
					a := means.acc[pid]
					if p := byPID[pid]; p != nil {
						p.SMUtil, p.MemUtil = a.ratio(0), a.ratio(1)
					} else if complete && !graphics[pid] && (a.sum[0] > 0 || a.sum[1] > 0) {
						// a process gone from the lists: it ran during
						// the interval and exited before the sample
						d.UnlistedActivity = true
					}
				}
			}
		} else {
			rd.skip(symProcessUtil)
		}
	}
	if rd.fatal != nil {
		return
	}
	for _, p := range byPID {
		// named by Sample, outside the lock (procname.go)
		d.Processes = append(d.Processes, *p)
	}
	sortProcesses(d.Processes)
}

// processUtilization calls nvmlDeviceGetProcessUtilization through
// go-nvml's wrapper, which sizes its buffer with a first call and slices it
// with the count of the second: when processes produce more samples between
// the two calls the wrapper panics (slice bounds out of range). That is
// reported as ERROR_INSUFFICIENT_SIZE, so that it costs one interval's
// figures, not the GPU.
func processUtilization(h nvml.Device, lastSeen uint64) (samples []nvml.ProcessUtilizationSample, r nvml.Return) {
	defer func() {
		if recover() != nil {
			samples, r = nil, nvml.ERROR_INSUFFICIENT_SIZE
		}
	}()
	return h.GetProcessUtilization(lastSeen)
}

// unplaced says whether a process of the list has no GPU instance.
func unplaced(list []nvml.ProcessInfo) bool {
	for _, p := range list {
		if p.GpuInstanceId == noInstance {
			return true
		}
	}
	return false
}

// readMIGProcesses lists the compute processes of each MIG device (one per
// compute instance), placing them in its GPU and compute instance where the
// driver leaves them unset. A MIG device whose list is refused is left out,
// its instance's ProcessesUnread set; the others are still read. It says
// whether every list was read: not where a MIG device has no handle to
// read it with (rd.migUnlisted), and then every instance's ProcessesUnread
// is set: the instance of a device not asked is not known. Each instance
// says the compute instances whose lists were read (ComputeInstancesRead):
// a process listed in one of them before is known gone from it when
// missing, whichever device was not asked.
func (rd *devReader) readMIGProcesses(d *gpu.Device, add func([]nvml.ProcessInfo, gpu.ProcessType)) (all bool) {
	for i := range d.MIG {
		d.MIG[i].ProcessesUnread = rd.migUnlisted || d.MIG[i].GPUInstanceID < 0
	}
	hs := rd.migHandles
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].gi != hs[j].gi {
			return hs[i].gi < hs[j].gi
		}
		return hs[i].ci < hs[j].ci
	})
	all = !rd.migUnlisted
	for _, m := range hs {
		inst := d.MIGByGI(m.gi)
		list, r := m.h.GetComputeRunningProcesses()
		if !rd.ok("nvmlDeviceGetComputeRunningProcesses(MIG)", r) {
			if rd.fatal != nil {
				return false
			}
			all = false
			if inst != nil {
				inst.ProcessesUnread = true
			}
			continue
		}
		for i := range list {
			if list[i].GpuInstanceId == noInstance {
				list[i].GpuInstanceId = uint32(m.gi)
			}
			if list[i].ComputeInstanceId == noInstance && m.ci >= 0 {
				list[i].ComputeInstanceId = uint32(m.ci)
			}
		}
		add(list, gpu.ProcessCompute)
		if inst != nil && m.ci >= 0 {
			inst.ComputeInstancesRead = append(inst.ComputeInstancesRead, m.ci)
		}
	}
	return all
}

func sortProcesses(ps []gpu.Process) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].VGPUInstance != ps[j].VGPUInstance {
			return ps[i].VGPUInstance < ps[j].VGPUInstance
		}
		return ps[i].PID < ps[j].PID
	})
}

func clamp01(v float64) float64 {
	switch {
	case v < 0 || math.IsNaN(v):
		return 0
	case v > 1:
		return 1
	}
	return v
}
