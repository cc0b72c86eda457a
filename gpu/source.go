package gpu

import (
	"context"
	"errors"
	"io"
	"time"
)

// Source is a backend that reads a host's GPUs: NVML on a real host, the
// simulator, or DCGM fields from a running dcgm-exporter.
type Source interface {
	// Name is a short backend name ("nvml", "sim", "dcgm-exporter").
	Name() string
	// Sample takes one reading of the whole host. An error means nothing
	// could be read at all; a single GPU that fails is reported in its
	// Device (Up=false, Err) and the others are still returned.
	Sample(ctx context.Context) (*Readings, error)
	// Close releases the backend (NVML Shutdown, connections).
	Close() error
}

// AppMetricsSource is implemented by backends that also play the tenants'
// applications, as the simulator does: it writes, in the Prometheus text
// exposition format, what the application named app would serve on its own
// /metrics (for example vLLM's latency histograms). Package tenant reads it
// through the same parser as a real HTTP latency source ("sim://app").
type AppMetricsSource interface {
	AppMetrics(app string, w io.Writer) error
}

// ErrNotSupported is returned by a Control method for a knob the backend or
// the GPU does not have. Callers test with errors.Is.
var ErrNotSupported = errors.New("not supported by this backend or GPU")

// ErrBusy is returned when a change is refused because of the GPU's current
// state (for example a MIG reconfiguration while processes run, or a vGPU
// scheduler change while VMs run). The wrapped message says what blocks it.
var ErrBusy = errors.New("refused while in use")

// Knob names a setting a Control can change, as used in capability lists,
// journals and metrics labels.
type Knob string

// Knobs.
const (
	KnobMPSActiveThreads Knob = "mps_active_threads"
	KnobMPSPinnedMemory  Knob = "mps_pinned_memory"
	KnobVGPUScheduler    Knob = "vgpu_scheduler"
	KnobComputeTimeSlice Knob = "compute_timeslice"
	KnobLockedClocks     Knob = "locked_clocks"
	KnobPowerLimit       Knob = "power_limit"
	KnobMIGLayout        Knob = "mig_layout"
	KnobPlacement        Knob = "placement"
)

// VGPUSchedulerSetting is a requested vGPU scheduler state (NVML's
// nvmlVgpuSchedulerSetState_t, v2 where available).
type VGPUSchedulerSetting struct {
	Policy     string        // "best-effort", "equal-share", "fixed-share"
	ARREnabled bool          // adaptive round robin (best-effort only)
	TimeSlice  time.Duration // within the device's min/max; 0 = driver default
	AvgFactor  uint32        // ARR average factor
	Frequency  uint32        // ARR frequency
}

// ClockLock is a locked clock range; zero values mean "reset to default".
type ClockLock struct {
	MinMHz uint32
	MaxMHz uint32
}

// Control is the set of knobs a tuner may turn. Every method is optional for
// a backend: one it cannot do returns an error wrapping ErrNotSupported.
// Implementations must be safe for concurrent use with Source.Sample.
type Control interface {
	// Capabilities lists the knobs available on the GPU with this UUID.
	Capabilities(uuid string) []Knob

	// SetMPSActiveThreads sets the MPS active-thread fraction (0-1] for the
	// MPS client or server with this PID; it applies to contexts created
	// after the call only (as the MPS control daemon does).
	SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error
	// SetMPSDefaultActiveThreads sets the default for new clients.
	SetMPSDefaultActiveThreads(ctx context.Context, uuid string, fraction float64) error
	// SetMPSPinnedMemoryLimit limits the device memory a client may pin.
	SetMPSPinnedMemoryLimit(ctx context.Context, uuid string, pid uint32, bytes uint64) error
	// RestartClient asks for an MPS client to be restarted (or switched over
	// to a standby) so that a new active-thread setting takes effect.
	RestartClient(ctx context.Context, uuid string, pid uint32) error

	// SetVGPUScheduler changes the vGPU scheduler; refused (ErrBusy) while VMs run.
	SetVGPUScheduler(ctx context.Context, uuid string, s VGPUSchedulerSetting) error
	// SetComputeTimeSlice sets the compute time-slice level: "default",
	// "short", "medium" or "long".
	SetComputeTimeSlice(ctx context.Context, uuid string, level string) error

	// LockClocks locks the SM clock range; a zero ClockLock resets it.
	LockClocks(ctx context.Context, uuid string, l ClockLock) error
	// LockMemoryClocks locks the memory clock range; zero resets it.
	LockMemoryClocks(ctx context.Context, uuid string, l ClockLock) error
	// SetPowerLimit sets the power limit in watts; 0 restores the default.
	SetPowerLimit(ctx context.Context, uuid string, watts float64) error

	// ConfigureMIG replaces the GPU's MIG instances with the given profiles
	// (for example ["3g.71gb", "4g.71gb"]); refused (ErrBusy) while any
	// instance has processes.
	ConfigureMIG(ctx context.Context, uuid string, profiles []string) error
	// MoveProcess moves a workload (identified by its PID) to another GPU.
	MoveProcess(ctx context.Context, pid uint32, toUUID string) error
}
