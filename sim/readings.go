package sim

import (
	"context"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Driver and CUDA versions the simulated host reports.
const (
	simDriverVersion = "580.95.05"
	simCUDAVersion   = "13.0"
)

// Sample returns the readings of the simulated host: what NVML would say,
// never per-tenant figures. In real-time mode it first advances the model
// to the Clock's time.
func (s *Simulator) Sample(ctx context.Context) (*gpu.Readings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncClock()
	s.flush()
	r := &gpu.Readings{
		Time: s.at(s.now), Backend: "sim",
		DriverVersion: simDriverVersion, CUDAVersion: simCUDAVersion,
	}
	if s.sampled {
		r.Interval = time.Duration(s.now - s.lastSample)
	}
	for _, g := range s.gpus {
		r.Devices = append(r.Devices, s.device(g, r.Interval))
	}
	// reset the sample interval accumulators
	for _, g := range s.gpus {
		g.acc[0] = deviceTotals{}
		g.events = g.events[:0] // the readings hold clones
		g.schedLog = g.schedLog[:0]
		for _, d := range g.domains {
			d.acc[0] = domainTotals{}
		}
	}
	for _, t := range s.tenants {
		t.acc[0] = tenantTotals{}
	}
	s.lastSample, s.sampled = s.now, true
	return r, nil
}

func activity(fig *figures, a *domainTotals, ns, smFrac float64, peakBW, peakFLOPS float64) gpu.Activity {
	if ns <= 0 {
		return gpu.Activity{Source: "sim"}
	}
	sec := ns / 1e9
	return gpu.Activity{
		SMActive:     fig.float(clamp01(a.sm / ns)),
		SMOccupancy:  fig.float(clamp01(a.occ / ns)),
		DRAMActive:   fig.float(clamp01(a.bytes / (peakBW * sec))),
		TensorActive: fig.float(clamp01(a.flops / (peakFLOPS * smFrac * sec))),
		Source:       "sim",
	}
}

// figures hands out pointers to a device's optional figures from a few
// allocations instead of one each: a figure is appended and never
// changed, so a pointer stays good when a later append moves on to a new
// array.
type figures struct {
	f []float64
	u []uint64
	b []bool
}

func (x *figures) float(v float64) *float64 {
	x.f = append(x.f, v)
	return &x.f[len(x.f)-1]
}

func (x *figures) uint(v uint64) *uint64 {
	x.u = append(x.u, v)
	return &x.u[len(x.u)-1]
}

func (x *figures) bool(v bool) *bool {
	x.b = append(x.b, v)
	return &x.b[len(x.b)-1]
}

// cloneOrNil copies s; empty is nil, so that readings look alike whether
// or not a buffer was used before.
func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func clamp01(v float64) float64 { return min(1, max(0, v)) }

func (s *Simulator) device(g *gpuState, interval time.Duration) gpu.Device {
	m := g.m
	a := &g.acc[0]
	ns := float64(interval)
	if g.lost {
		return gpu.Device{Index: g.idx, UUID: g.uuid, Name: m.Marketing, PCIBusID: g.bus,
			Err: "GPU is lost: Unknown Error", Events: cloneOrNil(g.events)}
	}
	// the processes, and room for every figure of the device and of them
	procs := 0
	for _, dom := range g.domains {
		for _, t := range dom.members {
			if t.alive {
				procs++
			}
		}
	}
	fig := figures{f: make([]float64, 0, 15+4*len(g.migs)+5*procs), u: make([]uint64, 0, 15+procs), b: make([]bool, 0, 5)}
	d := gpu.Device{
		Index: g.idx, UUID: g.uuid, Name: m.Marketing, PCIBusID: g.bus, Up: true,
		Mode: g.mode, MIGEnabled: g.mode == gpu.SharingMIG,
		SMCount: m.SMs, MemoryTotalBytes: m.MemBytes,
		MemoryBandwidthBytesPS: m.BandwidthBS,
		SMClockHz:              fig.float(g.clock * 1e6),
		SMClockMaxHz:           fig.float(m.MaxClockMHz * 1e6),
		ClocksLocked:           fig.bool(g.lockMax > 0),
		PowerLimitW:            fig.float(g.limit()),
		TemperatureC:           fig.float(float64(int(g.temp*10)) / 10),
		ThrottleReason:         g.throttle,
		EnergyJoules:           fig.float(g.energy),
		PersistenceMode:        fig.bool(true),
		ComputeMode:            "Default",
		ECCEnabled:             fig.bool(true),
		ECCCorrectedTotal:      fig.uint(0),
		ECCUncorrectedTotal:    fig.uint(s.uncorrectedECC(g, s.now)),
		ContextSwitchesTotal:   fig.uint(g.ctxSwitches),
		// time spent switching, in cycles of the maximum SM clock
		ContextSwitchCyclesTotal: fig.uint(uint64(g.switchNs * m.MaxClockMHz / 1e3)),
		Health:                   s.health(&fig, g, s.now),
		Events:                   cloneOrNil(g.events),
	}
	memClk := m.MemClockMHz
	if g.memLock > 0 {
		memClk = g.memLock
	}
	d.MemClockHz = fig.float(memClk * 1e6)
	if g.mode == gpu.SharingMPS || g.mode == gpu.SharingExclusive {
		d.ComputeMode = "Exclusive_Process"
	}
	if g.mode != gpu.SharingVGPU {
		d.ComputeTimeSlice = g.level
	}
	if ns > 0 {
		d.PowerWatts = fig.float(a.energy / (ns / 1e9))
		if g.mode != gpu.SharingMIG {
			d.GPUUtil = fig.float(clamp01(a.busy / ns))
		}
		d.MemUtil = fig.float(clamp01(a.bytes / (m.BandwidthBS * ns / 1e9)))
		d.Activity = gpu.Activity{
			SMActive:     fig.float(clamp01(a.sm / ns)),
			SMOccupancy:  fig.float(clamp01(a.occ / ns)),
			DRAMActive:   fig.float(clamp01(a.bytes / (m.BandwidthBS * ns / 1e9))),
			TensorActive: fig.float(clamp01(a.flops / (m.PeakFLOPS * ns / 1e9))),
			Source:       "sim",
		}
	} else {
		d.PowerWatts = fig.float(g.power)
		// no interval yet, no ratio: the source is named all the same,
		// as the ratios of every later sample will have it
		d.Activity = gpu.Activity{Source: "sim"}
	}
	used := uint64(g.spec.Reserved)
	for i, dom := range g.domains {
		var dused uint64
		for _, t := range dom.members {
			if t.alive {
				dused += uint64(t.spec.Memory)
			}
			if t.standby {
				dused += uint64(t.spec.Memory) // its warming standby's copy
			}
		}
		used += dused
		if g.mode == gpu.SharingMIG {
			mi := g.migs[i]
			inst := gpu.MIGInstance{
				UUID: mi.uuid, GPUInstanceID: mi.gi, ComputeInstanceID: 0,
				Profile: mi.profile.Name, SMCount: mi.profile.SMs,
				MemoryTotalBytes: mi.profile.MemoryBytes, MemoryUsedBytes: dused,
			}
			if ns > 0 {
				inst.Activity = activity(&fig, &dom.acc[0], ns, dom.smFrac, m.BandwidthBS*dom.bwFrac, m.PeakFLOPS)
			}
			d.MIG = append(d.MIG, inst)
		}
	}
	d.MemoryUsedBytes = min(used, m.MemBytes)
	if g.mode == gpu.SharingVGPU {
		v := g.vgpu
		d.Scheduler = &gpu.VGPUScheduler{
			Policy: v.Policy, ARREnabled: v.ARR, TimeSlice: time.Duration(v.TimeSlice),
			MinTimeSlice: time.Duration(v.MinTimeSlice), MaxTimeSlice: time.Duration(v.MaxTimeSlice),
			Log: cloneOrNil(g.schedLog[max(0, len(g.schedLog)-schedLogMax):]),
		}
		// NVML's scheduler state carries the average factor with ARR on,
		// and never the frequency.
		if v.ARR {
			d.Scheduler.AvgFactor = v.AvgFactor
		}
	}
	if procs > 0 {
		d.Processes = make([]gpu.Process, 0, procs)
	}
	for _, dom := range g.domains {
		for _, t := range dom.members {
			if !t.alive {
				continue
			}
			d.Processes = append(d.Processes, s.process(&fig, g, dom, t, ns))
			if g.mode == gpu.SharingVGPU {
				d.VGPUs = append(d.VGPUs, s.vgpuInstance(&fig, g, t, ns))
			}
		}
	}
	slices.SortFunc(d.Processes, func(a, b gpu.Process) int { return int(a.PID) - int(b.PID) })
	return d
}

func (s *Simulator) process(fig *figures, g *gpuState, dom *domain, t *tenant, ns float64) gpu.Process {
	p := gpu.Process{
		PID: t.spec.Process.PID, Name: t.spec.Process.Executable, Type: gpu.ProcessCompute,
		UsedMemoryBytes: fig.uint(uint64(t.spec.Memory)),
		GPUInstanceID:   -1, ComputeInstanceID: -1,
		Cgroup: t.spec.Process.Cgroup, UID: *t.spec.Process.UID,
	}
	if g.mode == gpu.SharingMIG {
		p.GPUInstanceID = g.migs[dom.inst].gi
		p.ComputeInstanceID = 0
	}
	if dom.kind == schedMPS {
		p.Type = gpu.ProcessMPS
		p.MPSActiveThreads = fig.float(t.mpsEff)
	}
	if g.mode == gpu.SharingVGPU {
		p.VGPUInstance = vgpuID(t)
	}
	// NVML has no per-process utilization on MIG GPUs (docs/calibration.md, NVML).
	if g.mode != gpu.SharingMIG && ns > 0 {
		p.SMUtil, p.MemUtil = processUtil(fig, &t.acc[0], ns)
	}
	return p
}

// processUtil is a process's (or a VM's) SM and memory utilization over
// an interval of ns, as NVML's process utilization samples report them:
// busy-time fractions of the interval (the time a kernel of the process
// was running, and the time the process had memory traffic), not its share
// of SMs or of peak bandwidth. Several processes sharing the GPU through
// MPS can each be near 1 at once.
func processUtil(fig *figures, a *tenantTotals, ns float64) (sm, mem *float64) {
	return fig.float(clamp01(a.busy / ns)), fig.float(clamp01(a.memBusy / ns))
}

func vgpuID(t *tenant) uint32 { return uint32(3251634000 + t.idx) }

func (s *Simulator) vgpuInstance(fig *figures, g *gpuState, t *tenant, ns float64) gpu.VGPUInstance {
	v := gpu.VGPUInstance{
		ID: vgpuID(t), UUID: deriveUUID("", "vgpusim/vgpu/"+t.spec.Name),
		VMID: deriveUUID("", "vgpusim/vm/"+t.spec.Name), VMName: t.spec.VM.Name, HostPID: t.spec.VM.HostPID,
		// a type that names no size has no framebuffer figure, as NVML
		// reports none where it cannot read the type's
		Type: t.spec.VM.Type, FramebufferBytes: t.spec.VM.fb, FramebufferUsed: gpu.Uint(uint64(t.spec.Memory)),
	}
	if ns > 0 {
		v.SMUtil, v.MemUtil = processUtil(fig, &t.acc[0], ns)
		v.EncUtil = fig.float(0)
		v.DecUtil = fig.float(0)
	}
	return v
}
