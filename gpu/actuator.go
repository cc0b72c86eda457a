package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrNotSupported is returned by an actuator for a knob the GPU does not
// have (an MPS call on a GPU without an MPS server, a driver that lacks the
// call). A mechanism a backend has no code for at all is not an error: the
// backend does not implement that actuator interface. Callers test with
// errors.Is.
var ErrNotSupported = errors.New("not supported by this backend or GPU")

// ErrBusy is returned when a change is refused because of the GPU's current
// state (for example a MIG reconfiguration while processes run, or a vGPU
// scheduler change while VMs run), or not made because its context ended
// while the backend was held by another call (a sample of the NVML backend
// waiting on the driver). The wrapped message says what blocks it.
var ErrBusy = errors.New("refused while in use")

// RangeError is a setting refused before any driver call because its
// value lies outside the range the GPU accepts now (a driver or firmware
// update narrows it: a value read before, an original, may no longer be
// accepted). Min and Max bound the range in Unit; Min 0 where only the
// maximum is checked.
type RangeError struct {
	GPU, What, Unit string // the GPU's UUID; "power limit", "SM clock"; "W", "MHz"
	Value, Min, Max float64
}

func (e *RangeError) Error() string {
	if e.Min == 0 {
		return fmt.Sprintf("GPU %s: %s %.0f %s above the GPU's maximum %.0f %s", e.GPU, e.What, e.Value, e.Unit, e.Max, e.Unit)
	}
	return fmt.Sprintf("GPU %s: %s %.0f %s outside the GPU's range %.0f-%.0f %s", e.GPU, e.What, e.Value, e.Unit, e.Min, e.Max, e.Unit)
}

// Knob names a setting an actuator can change, as used in capability lists,
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
	KnobMIGDrain         Knob = "mig_drain"
	KnobPlacement        Knob = "placement"
	KnobProcessLifecycle Knob = "process_lifecycle"
	KnobPauseDuty        Knob = "pause_duty"
)

// VGPUPolicy is a vGPU scheduler policy (NVML's
// NVML_VGPU_SCHEDULER_POLICY_*).
type VGPUPolicy string

// vGPU scheduler policies.
const (
	VGPUPolicyBestEffort VGPUPolicy = "best-effort" // round robin, idle VMs yield
	VGPUPolicyEqualShare VGPUPolicy = "equal-share" // equal slots for every running VM
	VGPUPolicyFixedShare VGPUPolicy = "fixed-share" // slots fixed by the vGPU type
)

// TimeSliceLevel is a compute time-slice level, as set with
// `nvidia-smi compute-policy --set-timeslice`.
type TimeSliceLevel string

// Compute time-slice levels.
const (
	TimeSliceDefault TimeSliceLevel = "default"
	TimeSliceShort   TimeSliceLevel = "short"
	TimeSliceMedium  TimeSliceLevel = "medium"
	TimeSliceLong    TimeSliceLevel = "long"
)

// VGPUSchedulerSetting is a requested vGPU scheduler state (NVML's
// nvmlVgpuSchedulerSetState_t, v2 where available).
type VGPUSchedulerSetting struct {
	Policy     VGPUPolicy
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

// The actuators: one small interface per sharing mechanism, each
// implemented only by the backends that have that mechanism (package sim
// implements all of them; gpu/nvml the vGPU scheduler, clocks and power and
// the MIG layout). A consumer asserts or declares the ones it uses.
// Implementations must be safe for concurrent use with Source.Sample.

// CapabilityLister lists the knobs available on each GPU of a backend.
type CapabilityLister interface {
	// Capabilities lists the knobs available on the GPU with this UUID.
	// It does not wait on a call to the GPU or its driver: the tuner asks
	// it of every GPU every round, holding its own lock.
	Capabilities(uuid string) []Knob
}

// MPSActuator drives the MPS control daemon and the restart of its clients.
type MPSActuator interface {
	// SetMPSActiveThreads sets the MPS active-thread fraction (0-1] for the
	// MPS client or server with this PID; it applies to contexts created
	// after the call only (as the MPS control daemon does).
	SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error
	// RestartClient asks for an MPS client to be restarted (or switched over
	// to a standby) so that a new active-thread setting takes effect;
	// tenant is the tenant the client belongs to ("" when unknown), which
	// the restart hook hands to the serving stack.
	RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error
}

// KnobWithholder is an actuator that lists a knob on a GPU
// (CapabilityLister) but cannot turn it there the way the tuner does, and
// says why: the MPS controller without a restart hook, where a client's
// cap would never reach the client (a running client cannot be changed;
// one that restarts by itself is started by its own supervisor, which
// hands it no such value). The tuner counts such a knob not available
// and refuses its changes, not their reverts, untried.
type KnobWithholder interface {
	// Withheld says why knob k cannot be turned on the GPU uuid; "" where
	// it can. Like Capabilities it does not wait on a call: the tuner asks
	// it of every GPU every round.
	Withheld(uuid string, k Knob) string
}

// Hooked is an actuator whose slow calls (an MPS client's restart, a
// rebalancing plan or a move) run an outside program or wait on another
// system, for as long as that takes (minutes, up to its timeout): the
// tuner starts them off its round and collects their outcome at a later
// one, so that its other decisions do not wait for them. An actuator
// without it answers at once (the simulator's hooks, whose cost plays out
// in the simulated world).
type Hooked interface {
	// RunsHooks reports whether the actuator's slow calls run a hook on
	// this host (an MPS controller without a restart hook runs none).
	RunsHooks() bool
}

// MPSSuccessors is an MPSActuator whose client restart may go on under
// another PID (a restart hook that names the successor it started): what
// was set on the client, and is to be set back, follows it there. Where
// the hook named none the tuner looks for the successor among the
// client's tenant's new processes; an MPSActuator without it restarts a
// client under its own PID (the simulator).
type MPSSuccessors interface {
	// Successor returns the PID the client with this PID on the GPU uuid
	// runs under after its last restart, when another.
	Successor(uuid string, pid uint32) (uint32, bool)
}

// MPSClientState is what an MPS actuator knows of one client: the
// fraction set for its next context (pending) and its running context's
// (effective), each nil when unknown.
type MPSClientState struct {
	UUID      string
	PID       uint32
	Pending   *float64
	Effective *float64
}

// VGPUSchedulerActuator changes a vGPU host's scheduler.
type VGPUSchedulerActuator interface {
	// SetVGPUScheduler changes the vGPU scheduler; refused (ErrBusy) while VMs run.
	SetVGPUScheduler(ctx context.Context, uuid string, s VGPUSchedulerSetting) error
}

// TimeSliceActuator sets the compute time-slice level of a time-sliced GPU.
type TimeSliceActuator interface {
	// SetComputeTimeSlice sets the compute time-slice level.
	SetComputeTimeSlice(ctx context.Context, uuid string, level TimeSliceLevel) error
}

// ClockPowerActuator locks clocks and sets the power limit.
type ClockPowerActuator interface {
	// LockClocks locks the SM clock range; a zero ClockLock resets it.
	LockClocks(ctx context.Context, uuid string, l ClockLock) error
	// SetPowerLimit sets the power limit in watts; 0 restores the default.
	SetPowerLimit(ctx context.Context, uuid string, watts float64) error
}

// PowerLimitReader is a ClockPowerActuator that reads back the power
// limit in force, which a set that succeeded may not have left as asked:
// the driver holds a limit within the board's constraints, and another
// agent (an operator, a DCGM policy, a vGPU host's administrator) may
// set another one later. No backend reads a locked clock range back
// (NVML has no call that returns it).
type PowerLimitReader interface {
	// PowerLimitInForce returns the power limit the GPU with this UUID
	// enforces now, the limit set and its default limit.
	PowerLimitInForce(ctx context.Context, uuid string) (PowerLimit, error)
}

// PowerLimit is a GPU's power limit as read back, in watts. The limit
// set (what SetPowerLimit changes) and the limit enforced differ where
// another limiter holds the GPU lower (a BMC's out-of-band cap, a DCGM
// policy, a thermal or board limit).
type PowerLimit struct {
	InForceW float64 // the limit the GPU enforces, every limiter counted
	SetW     float64 // the limit set (NVML's management limit); 0 where not read
	DefaultW float64 // its default limit; 0 where not known
}

// MIGActuator changes a GPU's MIG layout.
type MIGActuator interface {
	// ConfigureMIG replaces the GPU's MIG instances with the given profiles
	// (for example ["3g.71gb", "4g.71gb"]); refused (ErrBusy) while any
	// instance has processes.
	ConfigureMIG(ctx context.Context, uuid string, profiles []string) error
}

// MIGModeOffHint tells the operator of a MIG layout refused on the GPU of
// this index, whose MIG mode is off, how to turn it on.
func MIGModeOffHint(index int) string {
	return fmt.Sprintf("MIG mode is off; enable it with `nvidia-smi -i %d -mig 1` (needs an idle GPU, and a GPU reset where nvidia-smi reports the change pending)", index)
}

// PlacementActuator moves workloads between GPUs.
type PlacementActuator interface {
	// MoveProcess moves a workload (identified by its PID) to another GPU.
	MoveProcess(ctx context.Context, pid uint32, toUUID string) error
}

// TenantLifecycleActuator stops and starts workloads.
type TenantLifecycleActuator interface {
	// StopProcess drains the process (no new admissions; in-flight work
	// finishes or is dropped after a timeout), then stops it, freeing its
	// memory.
	StopProcess(ctx context.Context, pid uint32) error
	// StartProcess starts a stopped process again where it is placed.
	StartProcess(ctx context.Context, pid uint32) error
}

// MIGDrainActuator empties a MIG instance so that the layout can change.
type MIGDrainActuator interface {
	// DrainMIGInstance stops every process of the MIG instance instUUID of
	// the GPU uuid as StopProcess does.
	DrainMIGInstance(ctx context.Context, uuid, instUUID string) error
}

// PauseActuator pauses a tenant's processes for a fraction of every
// period (its pause duty): a per-tenant time-slice weight on a shared GPU,
// changed in milliseconds and without restarting anyone. Paused processes
// launch no new GPU work; what they queued already runs to completion.
type PauseActuator interface {
	// SetPauseDuty pauses every process of the tenant (pids, all of them
	// together or none) for duty (0-1) of each period; 0 resumes them at
	// once. uuid is the GPU the setting is made for: a tenant on several
	// GPUs is paused by the largest duty any of them asks for.
	SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error
}

// PauseGroupChecker is a PauseActuator that pauses more than the
// processes it is given (a process's cgroup, or its process group), and
// tells where that would reach another tenant's processes: the tuner,
// which knows every tenant's, does not pause a tenant there.
type PauseGroupChecker interface {
	// CheckPauseGroups returns an error, naming the group, the other
	// tenant and its PID, where a group a pause of the tenant's pids
	// freezes, or its pause in force does, holds one of others (other
	// tenants' GPU processes, PID to tenant; a PID in both is the
	// other's); nil where none does.
	CheckPauseGroups(tenant string, pids []uint32, others map[uint32]string) error
}

// PauseReporter is a PauseActuator that tells what is in force: the
// duty a tenant is paused for can differ from the one a GPU asked for (a
// tenant on several GPUs is paused by the largest, the longest pause is
// capped), and a period whose freeze failed leaves the tenant running.
type PauseReporter interface {
	// PausesInForce returns, for each tenant paused and each GPU it is
	// paused for, the fraction of each period it is paused for now.
	PausesInForce() []PauseInForce
	// PauseFreezeFailures returns, per tenant, the periods whose freeze
	// failed since start (each thawed once its freeze did not settle).
	PauseFreezeFailures() map[string]uint64
	// PausePeriod returns the period of every pulse: the failures above
	// rise at most once each.
	PausePeriod() time.Duration
}

// PauseFailuresForgetter is a PauseReporter that drops, when told, the
// failed-freeze count of a tenant gone for good (its pauses ended, no
// process of it left), so that a host whose tenants come and go does not
// keep one for every tenant it ever paused.
type PauseFailuresForgetter interface {
	// ForgetPauseFailures drops tenant's count, unless it is paused now.
	ForgetPauseFailures(tenant string)
}

// PauseInForce is one tenant's pause on one GPU as it runs: Duty is the
// fraction of each period it is paused for, 0 where the latest period's
// freeze failed (FreezeFailed).
type PauseInForce struct {
	UUID, Tenant string
	Duty         float64
	FreezeFailed bool
}

// ProcessIdentifier is a PauseActuator that names what it pauses beyond
// PIDs, for a thaw after a crash: the processes, told from later ones of
// the same PID (a PID is taken again once its process exits, and a reboot
// starts them over, so a PID kept may name another process by then, whose
// cgroup someone else may have frozen), and the cgroups it freezes, which
// it thaws again where they are still the same.
type ProcessIdentifier interface {
	ProcessStarter
	// Cgroups returns the cgroups a pause of pids freezes (each once; a
	// process paused by its process group, or gone, adds none): a
	// process killed while frozen leaves the rest of its cgroup (a pod's
	// other processes, a unit's) frozen, which no PID names any more.
	Cgroups(pids []uint32) ([]Cgroup, error)
	// ThawCgroups thaws, for a pause of tenant an earlier run set (on
	// this boot), those of cgs that are still the cgroups it froze: the
	// same path with the same ID. One recreated under the path (another
	// ID) or gone is passed over, and so is one a pause holds now (the
	// tenant's on another GPU, another tenant's). It returns those it
	// thawed.
	ThawCgroups(ctx context.Context, tenant string, cgs []Cgroup) ([]Cgroup, error)
}

// ProcessStarter tells processes from later ones of the same PID: a
// PauseActuator that does (ProcessIdentifier), and an MPSActuator whose
// client the tuner restarts to set its cap back, after a crash too, only
// where the PID is still that client's.
type ProcessStarter interface {
	// ProcessStarts returns the host's boot ID (a UUID, new at every
	// boot) and the start time of each of pids, in its order, in clock
	// ticks after the boot (0 for one that does not run); an error where
	// it cannot tell (ErrNotSupported: it is not set up to).
	ProcessStarts(pids []uint32) (boot string, starts []uint64, err error)
}

// Cgroup names a cgroup a PauseActuator freezes, for a thaw after a
// crash: its path under its freezer hierarchy and its ID, the inode
// number of its directory (kernfs gives each cgroup a new one, never
// another's within a boot), which tells it from one created later under
// the same path (a systemd unit restarted, a container of the same name).
type Cgroup struct {
	// V1 says the cgroup is the v1 freezer's; else cgroup v2's.
	V1 bool `json:"v1,omitempty"`
	// Path is the cgroup's path under the hierarchy's root ("/"
	// separated, beginning "/").
	Path string `json:"path"`
	ID   uint64 `json:"id"`
}

func (c Cgroup) String() string {
	if c.V1 {
		return fmt.Sprintf("v1 %s (id %d)", c.Path, c.ID)
	}
	return fmt.Sprintf("%s (id %d)", c.Path, c.ID)
}

// Plan is a rebalancing plan: tenant moves across GPUs and MIG layout
// changes, applied together by a Rebalancer (on a real host, a hook command
// that hands it to the orchestrator). Its JSON form is what a hook reads on
// stdin (docs/backends.md, "Rebalancing hook").
type Plan struct {
	// Reason says why the plan was made, for logs and the hook's own.
	Reason string `json:"reason"`
	// DryRun asks the hook to check and print what it would do, changing
	// nothing.
	DryRun bool            `json:"dry_run"`
	Moves  []Move          `json:"moves,omitempty"`
	MIG    []MIGLayoutPlan `json:"mig,omitempty"`
}

// Move moves one tenant's workload to another GPU. The orchestrator finds
// the workload by the fields it knows: a Kubernetes pod, a systemd unit,
// or a PID.
type Move struct {
	Tenant string `json:"tenant"`
	PID    uint32 `json:"pid,omitempty"`
	// PIDs are every process of the workload on FromUUID, PID first,
	// where it has more than one: the orchestrator moves the workload
	// whole, a simulator moves each of them.
	PIDs     []uint32 `json:"pids,omitempty"`
	FromUUID string   `json:"from_uuid,omitempty"`
	ToUUID   string   `json:"to_uuid,omitempty"` // empty: anywhere the orchestrator chooses
	Pod      *Pod     `json:"pod,omitempty"`
	Unit     string   `json:"unit,omitempty"` // systemd unit, e.g. "llm-a.service"
}

// Processes are the PIDs the move moves: PIDs, else PID alone.
func (m Move) Processes() []uint32 {
	if len(m.PIDs) > 0 {
		return m.PIDs
	}
	return []uint32{m.PID}
}

// Pod names a Kubernetes pod: by namespace and name, and where known by
// the UID of the pod the process runs in (its cgroup's), which an eviction
// gives as its precondition: a pod of the same name made since (a
// StatefulSet's replacement) is not the one planned, and is not evicted.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// MIGLayoutPlan replaces a GPU's MIG instances with these profiles once the
// GPU is drained (see MIGActuator).
type MIGLayoutPlan struct {
	UUID     string   `json:"uuid"`
	Profiles []string `json:"profiles"`
}

// Rebalancer applies a rebalancing plan: the slow loop's actuator.
type Rebalancer interface {
	// Rebalance applies the plan (or, with p.DryRun, only checks it); the
	// error says which part failed, a *PartialError where some of the
	// moves were made.
	Rebalance(ctx context.Context, p Plan) error
}

// PartialError is the error of a plan applied in part: the moves at the
// indexes Applied (into the plan's Moves, in order) were made, the others
// failed as Err says. A Rebalancer that tries every move even after one
// fails (the built-in Kubernetes eviction) returns it, so that the tuner
// holds the tenants it moved (a moved tenant is not moved again soon) and
// the simulator beside real pods makes the moves made (rebalance.Modelled).
type PartialError struct {
	Applied []int
	Err     error
}

func (e *PartialError) Error() string { return e.Err.Error() }
func (e *PartialError) Unwrap() error { return e.Err }

// MPSPercent is the whole percentage an MPS active-thread fraction (0-1]
// reaches the control daemon as (set_active_thread_percentage and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE take whole numbers): rounded, at
// least 1.
func MPSPercent(f float64) int { return max(1, int(math.Round(f*100))) }
