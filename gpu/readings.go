// Package gpu is the hardware model every other part of vgpu_exporter speaks:
// the raw readings a backend takes from a host (devices, MIG instances, vGPU
// instances, processes, GPM-style activity counters, clocks, power, events),
// the Source and actuator interfaces a backend implements, an injectable Clock,
// and the Sampler that polls a Source and publishes immutable readings.
//
// Readings are what the host says, never per-tenant figures: attribution to
// tenants happens above this package (package tenant), so that the real NVML
// backend and the simulator feed exactly the same code.
//
// Optional values are pointers: nil means "the backend could not read this"
// (unsupported on this GPU, driver too old, NOT_SUPPORTED), which is exported as
// an absent series, never as zero.
package gpu

import (
	"time"
)

// Readings is one sample of a whole host. A Readings value is immutable once
// a Source has returned it: consumers share it without copying.
type Readings struct {
	// Time is when the sample was taken (the Source's clock).
	Time time.Time
	// Interval is the time covered by interval figures (utilization samples,
	// GPM ratios): the time since the previous sample of the same Source.
	// Zero on the first sample.
	Interval time.Duration
	// Backend names the Source that produced the readings ("nvml", "sim", ...).
	Backend string
	// DriverVersion and CUDAVersion as the driver reports them; empty if unknown.
	DriverVersion string
	CUDAVersion   string
	Devices       []Device
	// DCGMExporter is the health of the dcgm-exporter source that fills
	// DCGM fields into these readings; nil when none is configured.
	DCGMExporter *ScrapeHealth
}

// ScrapeHealth is the state of an outside page a Source scrapes.
type ScrapeHealth struct {
	Up                bool   // the last scrape succeeded
	ScrapeErrorsTotal uint64 // failed scrapes since the Source was made
	// PageAgeSeconds is how old the oldest timestamped series of the page
	// merged into these readings was; nil when its lines carry no
	// timestamps, or none was merged.
	PageAgeSeconds *float64
	// GPUsMatched is how many of the GPUs up in these readings the page
	// merged had a current series for; 0 when none was merged.
	GPUsMatched int
}

// SharingMode is how a GPU is shared between tenants.
type SharingMode string

// Sharing modes. A GPU in MIG mode may additionally run MPS or time-slicing
// inside each instance; Mode names the outermost mechanism.
const (
	SharingExclusive SharingMode = "exclusive"  // one tenant, no sharing
	SharingTimeSlice SharingMode = "time-slice" // default CUDA time-slicing
	SharingMPS       SharingMode = "mps"        // CUDA Multi-Process Service
	SharingMIG       SharingMode = "mig"        // Multi-Instance GPU
	SharingVGPU      SharingMode = "vgpu"       // NVIDIA vGPU (time-sliced VMs)
)

// Device is the reading of one physical GPU.
type Device struct {
	Index    int
	UUID     string
	Name     string // marketing name, e.g. "NVIDIA H100 80GB HBM3"
	PCIBusID string
	// Up is false when the GPU could not be read this time (lost, timed out);
	// Err then says why and every other field but the identity may be empty.
	Up  bool
	Err string

	Mode SharingMode
	// MIGEnabled reports the current MIG mode; MIG holds the instances.
	MIGEnabled bool

	SMCount                int
	MemoryTotalBytes       uint64
	MemoryUsedBytes        uint64
	MemoryBandwidthBytesPS float64 // peak HBM bandwidth, bytes per second; 0 if unknown
	// MIGSMCount is the SMs of the GPU's full-GPU MIG profile, its GPU
	// instance profile of the most slices (an A100's 7g.80gb: 98 of its
	// 108), read in MIG mode; 0 when unknown. Where SMCount is not known,
	// a MIG instance's part of the GPU is its SMs over these.
	MIGSMCount int

	SMClockHz      *float64
	SMClockMaxHz   *float64
	MemClockHz     *float64
	ClocksLocked   *bool // true when an application/locked clock range is set
	PowerWatts     *float64
	PowerLimitW    *float64
	TemperatureC   *float64
	ThrottleReason uint64 // NVML clock-event reason bitmask (nvmlClocksEventReason*)
	// ThrottleReasonUnknown is true when the backend could not read
	// ThrottleReason (then it is 0 but means "unknown", not "no reason").
	ThrottleReasonUnknown bool
	// EnergyJoules is the cumulative energy counter, if the GPU has one.
	EnergyJoules *float64
	// EnergyRepeated is true when EnergyJoules is a copy of the counter's
	// last reading, not read anew: dcgm-exporter's page refreshes it once
	// a collect interval (30 s by default) and serves it unchanged in
	// between. The next reading that moves is the increase since that
	// copy was first read, over the samples since (the tenant meter
	// spreads it over them). False where the counter is read at each
	// sample (NVML, the simulator).
	EnergyRepeated bool

	PersistenceMode *bool
	ComputeMode     string // "Default", "Exclusive_Process", "Prohibited"; empty if unknown
	ECCEnabled      *bool
	// ECCErrorsTotal are cumulative corrected/uncorrected volatile ECC counts.
	ECCCorrectedTotal   *uint64
	ECCUncorrectedTotal *uint64
	// Health is the interconnect and memory health: NVLink, PCIe,
	// remapped rows, retired pages.
	Health Health

	// Utilization is NVML's coarse utilization rates (GPU busy, memory
	// controller busy) over the driver's own window, 0-1.
	GPUUtil *float64
	MemUtil *float64

	// Activity is the GPM-style profiling view of the whole device over Interval.
	Activity Activity

	// ContextSwitchesTotal is the cumulative number of context switches the
	// graphics/compute engines performed (sum over GR engines); nil when the
	// backend cannot count them.
	ContextSwitchesTotal *uint64
	// ContextSwitchCyclesTotal is the cumulative number of engine cycles spent
	// switching contexts, if known.
	ContextSwitchCyclesTotal *uint64

	MIG       []MIGInstance
	VGPUs     []VGPUInstance
	Scheduler *VGPUScheduler // vGPU scheduler state; nil when not a vGPU host
	// ComputeTimeSlice is the compute time-slice level set with
	// `nvidia-smi compute-policy --set-timeslice`; empty when unknown.
	ComputeTimeSlice TimeSliceLevel

	Processes []Process
	// ProcessesUnread is true when the backend could not read the GPU's
	// process list (NVML refused it: no permission, not supported; in MIG
	// mode, the list of a MIG device, or a MIG device it could not ask):
	// Processes, empty or not, does not then say how many processes have a
	// context on the GPU. False where the list was read, and in the
	// simulator. The processes of the lists read are still in Processes.
	ProcessesUnread bool
	// MPSProcessesUnread is true when the backend could not read the list
	// of the GPU's MPS clients (NVML refused it, or the library lacks the
	// call): an MPS client not in Processes may still run. False where it
	// was read, and in the simulator.
	MPSProcessesUnread bool
	// MPSProcessesRefused is true when NVML refused the MPS clients' list
	// (no permission, a code that does not say why), as opposed to not
	// supporting it or the library lacking the call: MPS clients may run
	// whatever Mode reads (one read from the compute list alone, which
	// holds the MPS server and none of its clients), so ListsRead is
	// false. It comes with MPSProcessesUnread.
	MPSProcessesRefused bool
	// UnlistedActivity is true when the interval's per-process utilization
	// samples show SM or memory activity of processes not in Processes (nor
	// graphics processes, which are not kept): processes that came and
	// went between two samples, whose work the device's figures hold and
	// no listed process accounts for. False where the backend cannot tell
	// (no per-process utilization: MIG GPUs, an interval without samples,
	// a process list not read, the simulator).
	UnlistedActivity bool
	// NoProcessSamples is true when the backend read the per-process
	// utilization and the driver had no sample over more than its longest
	// sample period (NVML's ERROR_NOT_FOUND, since a last-seen timestamp
	// over a second old) while the GPU's own utilization read 0: no process
	// ran a kernel, so every process's SMUtil and MemUtil, nil, is known to
	// be 0. False where the backend does not read it (MIG GPUs, the
	// simulator, whose processes carry their figures), the call failed, it
	// answered samples, or its answer covers too short a time to tell.
	NoProcessSamples bool
	// Events are XID and other events seen since the previous sample.
	Events []Event
}

// Health is a GPU's interconnect and memory health. Each figure is nil when
// the backend could not read it (no NVLink on the board, page retirement on
// a GPU that remaps rows instead, an old driver). Counters are cumulative.
type Health struct {
	// NVLinkLinks is how many NVLink links the GPU has; NVLinkActive how
	// many of them are up.
	NVLinkLinks  *uint64
	NVLinkActive *uint64
	// NVLinkTxBytes and NVLinkRxBytes are the data bytes sent and received
	// over all links.
	NVLinkTxBytes *uint64
	NVLinkRxBytes *uint64
	// NVLink link-level errors summed over the links: CRC errors in flits
	// and in data, replays and recoveries.
	NVLinkCRCFlitErrors  *uint64
	NVLinkCRCDataErrors  *uint64
	NVLinkReplayErrors   *uint64
	NVLinkRecoveryErrors *uint64
	// PCIeTxBytesPS and PCIeRxBytesPS are the PCIe throughput the driver
	// measured over its own short window, bytes per second.
	PCIeTxBytesPS *float64
	PCIeRxBytesPS *float64
	// PCIeReplays counts PCIe link replays.
	PCIeReplays *uint64
	// Remapped rows of device memory (Ampere and later), by the kind of
	// error that caused them; RowRemapPending is true when a remap waits
	// for a GPU reset, RowRemapFailure when a remap failed.
	RemappedRowsCorrectable   *uint64
	RemappedRowsUncorrectable *uint64
	RowRemapPending           *bool
	RowRemapFailure           *bool
	// Retired pages of device memory (before Ampere), by cause;
	// RetiredPagesPending is true when a retirement waits for a reboot.
	RetiredPagesSingleBit *uint64
	RetiredPagesDoubleBit *uint64
	RetiredPagesPending   *bool
}

// Activity holds profiling ratios (0-1) over the sample interval, as NVML GPM
// or DCGM profiling fields report them. Each is nil when unavailable (GPM
// needs Hopper or later; DCGM may provide them on older GPUs).
type Activity struct {
	SMActive     *float64 // fraction of time at least one warp was resident per SM, averaged
	SMOccupancy  *float64 // resident warps / max warps, averaged over SMs
	DRAMActive   *float64 // fraction of peak HBM bandwidth used
	TensorActive *float64 // fraction of cycles the tensor pipes were busy
	// Source says where the figures came from: "gpm", "dcgm", "sim";
	// "dcgm-gr-engine" when SMActive is DCGM's graphics engine activity
	// (DCGM_FI_PROF_GR_ENGINE_ACTIVE) standing in for a missing SM
	// activity; empty if none. On a MIG GPU whose ratios are only per
	// instance, the device's Source (without ratios) names the instances'.
	Source string
}

// MIGInstance is one MIG GPU instance (with its compute instances) on a device.
type MIGInstance struct {
	UUID              string // MIG-... UUID of the MIG device of its first compute instance
	GPUInstanceID     int
	ComputeInstanceID int    // of its first compute instance (the lowest ID)
	Profile           string // e.g. "3g.71gb"
	// ProfileBuilt: Profile was not read from the instance's GPU instance
	// profile but built from the MIG device's slices and memory, which
	// carry no variant: "1g.24gb" may be a 1g.24gb+gfx (or -me, +me.all,
	// +me) instance, and a name with no plain profile ("3g.71gb" for
	// 3g.71gb+gfx) names none. The tuner plans no MIG layout from it.
	ProfileBuilt bool
	// SMCount is the SMs of its compute instances together (0 when one
	// did not say); the memory (which they share) and Activity are the
	// GPU instance's whole: NVML measures neither per compute instance.
	SMCount          int
	MemoryTotalBytes uint64
	MemoryUsedBytes  uint64
	Activity         Activity
	// OtherComputeInstances are the compute instances past the first of a
	// GPU instance split in several (nvidia-smi mig -cci): each a MIG
	// device of its own, which a device plugin may hand out alone.
	OtherComputeInstances []MIGComputeInstance
	// ProcessesUnread is true when the backend read the GPU's processes
	// per MIG device and could not read the list of one of the instance's
	// (refused), or could not ask a MIG device of the GPU (its handle
	// refused, its GPU instance not given: every instance's is set): a
	// process of the instance not in the device's Processes may still
	// run. False where its lists were read, and in the simulator.
	ProcessesUnread bool
	// ComputeInstancesRead are the compute instances (by ID, in order)
	// whose MIG device's process list the backend read, where it read the
	// GPU's processes per MIG device: a process listed in one of them
	// before and missing from Processes has no context there any more,
	// though another MIG device's list was not read (ProcessesUnread, of
	// every instance where that device's instance is not known). Nil
	// where the GPU's list was read whole, and in the simulator; a
	// compute instance of no known ID is not in it.
	ComputeInstancesRead []int
}

// MIGComputeInstance is one compute instance of a MIG GPU instance: its MIG
// device's UUID and its compute instance ID (-1 when unknown).
type MIGComputeInstance struct {
	UUID string
	ID   int
}

// ComputeInstances lists the instance's compute instances, its first
// (UUID, ComputeInstanceID) and then its others.
func (m *MIGInstance) ComputeInstances() []MIGComputeInstance {
	return append([]MIGComputeInstance{{m.UUID, m.ComputeInstanceID}}, m.OtherComputeInstances...)
}

// VGPUInstance is one vGPU instance on a vGPU host.
type VGPUInstance struct {
	ID     uint32
	UUID   string
	VMID   string
	VMName string
	// HostPID is the process on the host that runs the VM (its QEMU),
	// found from VMID; 0 when unknown. A VM is paused as a whole through
	// it: the PIDs of the processes in the VM are the guest's, not the
	// host's.
	HostPID          uint32
	Type             string // vGPU type name, e.g. "H100-20C"
	FramebufferBytes uint64
	// FramebufferUsed is the framebuffer the instance uses; nil where the
	// backend could not read it (unknown, not none).
	FramebufferUsed *uint64
	SMUtil          *float64 // 0-1 over the interval
	MemUtil         *float64
	EncUtil         *float64
	DecUtil         *float64
}

// VGPUScheduler is a vGPU host's scheduler state.
type VGPUScheduler struct {
	Policy     VGPUPolicy
	ARREnabled bool // adaptive round robin
	TimeSlice  time.Duration
	AvgFactor  uint32
	// Frequency is the adaptive round robin frequency in Hz (NVML: one
	// over the time slice it reports with ARR on); 0 when unknown.
	Frequency    uint32
	MinTimeSlice time.Duration
	MaxTimeSlice time.Duration
	// Log holds the scheduler log entries since the previous sample.
	Log []VGPUSchedulerLogEntry
}

// VGPUSchedulerLogEntry is one entry of the vGPU scheduler log: one slot
// of a software runlist, logged when the runlist was preempted. NVML names
// the runlist only by its ID; it has no call that maps a runlist to a vGPU
// instance or VM.
type VGPUSchedulerLogEntry struct {
	Timestamp       time.Time     // when the runlist was preempted
	Runlist         uint32        // software runlist ID
	RunTime         time.Duration // in this slot
	TargetTimeSlice time.Duration
	// RunTimeTotal and CumulativePreemp are the runlist's run and
	// preemption time so far (the driver's running totals, not this
	// slot's); RunTimeTotal is 0 where the driver does not fill it.
	RunTimeTotal     time.Duration
	CumulativePreemp time.Duration
	Weight           uint32
}

// ProcessType says how a process uses the GPU.
type ProcessType string

// Process types.
const (
	ProcessCompute  ProcessType = "compute"
	ProcessMPS      ProcessType = "mps" // an MPS client
	ProcessGraphics ProcessType = "graphics"
)

// Process is one process with a context on a GPU.
type Process struct {
	PID  uint32
	Name string // executable name, if known
	Type ProcessType
	// UsedMemoryBytes is device memory held by the process; nil if the driver
	// does not say (e.g. without permission, or in some containers).
	UsedMemoryBytes *uint64
	// GPUInstanceID / ComputeInstanceID place the process in a MIG instance;
	// -1 when the GPU is not in MIG mode.
	GPUInstanceID     int
	ComputeInstanceID int
	// VGPUInstance is the vGPU instance ID the process runs in (0 if none).
	VGPUInstance uint32
	// SMUtil and MemUtil are the process's SM and memory-controller
	// utilization (0-1) over the interval (NVML GetProcessUtilization); nil
	// where unsupported (MIG GPUs) or when no sample covered the interval.
	SMUtil  *float64
	MemUtil *float64
	// Cgroup is the process's cgroup path when the backend knows it (the
	// simulator does); empty on real hosts, where package tenant reads
	// /proc/PID/cgroup.
	Cgroup string
	// UID is the owning user ID, when the backend knows it; -1 otherwise.
	UID int
	// MPSActiveThreads is the MPS active-thread fraction (0-1] the process's
	// context was created with; nil when not an MPS client or unknown.
	MPSActiveThreads *float64
	// MPSServer says the backend found the process to be its GPU's MPS
	// server, which every MPS client of the GPU waits on: the GPU in MPS
	// mode, the process in its compute list (not among the MPS clients),
	// and an identity its name does not give (the name is argv[0], which
	// the process sets: exec -a, setproctitle). The NVML backend reads
	// the process's executable and its parent's (MPSServerName, a child of
	// MPSControlName); where it cannot read them (no ptrace read access
	// to the process: CAP_SYS_PTRACE), a process named MPSServerName is
	// taken for the server all the same, and MPSServerUnverified set.
	MPSServer bool
	// MPSServerUnverified says MPSServer was set by the process's name
	// alone, its executable or its parent's not read.
	MPSServerUnverified bool
}

// MPSServerName is the executable of an MPS server's process, which an
// MPS GPU's compute list holds beside its clients.
const MPSServerName = "nvidia-cuda-mps-server"

// MPSControlName is the executable of the MPS control daemon, which
// starts the MPS servers.
const MPSControlName = "nvidia-cuda-mps-control"

// EventKind classifies an event.
type EventKind string

// Event kinds.
const (
	EventXID    EventKind = "xid"
	EventOOM    EventKind = "oom" // device memory allocation failure (simulator, MPS limits)
	EventReconf EventKind = "reconfigure"
)

// Event is something that happened on a GPU between two samples.
type Event struct {
	Time    time.Time
	Kind    EventKind
	Code    uint64 // XID number for EventXID
	PID     uint32 // 0 if unknown (NVML's XID events carry none)
	Message string
}

// Float returns a pointer to v, for optional reading fields.
func Float(v float64) *float64 { return &v }

// Uint returns a pointer to v, for optional reading fields.
func Uint(v uint64) *uint64 { return &v }

// Bool returns a pointer to v, for optional reading fields.
func Bool(v bool) *bool { return &v }

// DeviceByUUID returns the device with this UUID, or nil.
func (r *Readings) DeviceByUUID(uuid string) *Device {
	for i := range r.Devices {
		if r.Devices[i].UUID == uuid {
			return &r.Devices[i]
		}
	}
	return nil
}

// MIGByGI returns the MIG instance with this GPU instance ID, or nil.
func (d *Device) MIGByGI(gi int) *MIGInstance {
	for i := range d.MIG {
		if d.MIG[i].GPUInstanceID == gi {
			return &d.MIG[i]
		}
	}
	return nil
}

// ListsRead says whether every process list that may hold a tenant's
// process on d was read: the compute processes' (every MIG device's in
// MIG mode), and the MPS clients' where it was refused or the GPU is in
// MPS mode. Where not, an empty Processes does not say that nothing runs
// there.
func (d *Device) ListsRead() bool {
	return !d.ProcessesUnread && !d.MPSProcessesRefused && !(d.Mode == SharingMPS && d.MPSProcessesUnread)
}
