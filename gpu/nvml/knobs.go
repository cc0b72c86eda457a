package nvml

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Capabilities lists the knobs NVML can turn on the GPU with this UUID, as
// the last sample found them; none before the first sample, for a GPU
// that sample found down and once the backend is closed. It takes no
// lock a sample or a control call holds: the tuner asks it of every GPU
// every round, and a sample stuck in a driver call would hold every round
// with it. MPS active threads, pinned memory, the compute time-slice
// level and process placement are never listed: NVML has no call for
// them (they belong to the MPS control daemon, `nvidia-smi
// compute-policy` and the orchestrator), and the Backend implements none
// of gpu.MPSActuator, gpu.TimeSliceActuator and gpu.PlacementActuator.
func (b *Backend) Capabilities(uuid string) []gpu.Knob {
	return b.knobs.get(uuid)
}

// knobsOf lists the knobs of the GPU of ds, read as d by the sample
// under way (the caller holds b.mu): the locked clocks where the library
// has their calls, the power limit where NVML gives its range, the MIG
// layout in MIG mode, the vGPU scheduler on a vGPU host out of MIG mode.
// None for a GPU down.
func (b *Backend) knobsOf(ds *devState, d *gpu.Device) []gpu.Knob {
	if !d.Up {
		return nil
	}
	var knobs []gpu.Knob
	if b.has(symSetGpuLocked, symResetGpuLocked) {
		knobs = append(knobs, gpu.KnobLockedClocks)
	}
	if b.powerLimitsGiven(ds) {
		knobs = append(knobs, gpu.KnobPowerLimit)
	}
	migOn := d.MIGEnabled && b.has(symMigMode, symCreateGI, symGIProfileInfo)
	if migOn {
		knobs = append(knobs, gpu.KnobMIGLayout)
	}
	if !migOn && (b.has(symSetSchedState) || b.has(symSetSchedStateV2)) && b.has(symVirtMode) && ds.hostVGPU {
		knobs = append(knobs, gpu.KnobVGPUScheduler)
	}
	return knobs
}

// powerLimitsGiven says whether NVML gives the GPU's power limit range
// (the caller holds b.mu): asked until it answers that it does, or that
// it does not (NOT_SUPPORTED); the answer is kept while the GPU's handle
// is.
func (b *Backend) powerLimitsGiven(ds *devState) bool {
	if !b.has(symPowerConstraints) {
		return false
	}
	if ds.powerLimits == nil {
		switch _, _, r := ds.handle.GetPowerManagementLimitConstraints(); r {
		case nvml.SUCCESS:
			ds.powerLimits = gpu.Bool(true)
		case nvml.ERROR_NOT_SUPPORTED:
			ds.powerLimits = gpu.Bool(false)
		default:
			return false
		}
	}
	return *ds.powerLimits
}

// knobLists are the knobs of each GPU by UUID, under their own lock.
type knobLists struct {
	mu sync.Mutex
	m  map[string][]gpu.Knob
}

func (l *knobLists) get(uuid string) []gpu.Knob {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[uuid]
}

// set keeps knobs as the GPU's list; a list is not changed once set (get
// hands it out).
func (l *knobLists) set(uuid string, knobs []gpu.Knob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]gpu.Knob{}
	}
	l.m[uuid] = knobs
}

func (l *knobLists) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = nil
}
