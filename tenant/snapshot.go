package tenant

import (
	"sync/atomic"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

// Unassigned is the tenant name under which usage that matches no tenant's
// selectors is reported.
const Unassigned = "unassigned"

// Method says how a per-tenant figure was obtained.
type Method string

// Methods.
const (
	// Measured: the share domain's own counters, those of a MIG instance
	// that one tenant had over the sample's interval.
	Measured Method = "measured"
	// Apportioned: a whole GPU's figure divided among its tenants by a
	// documented rule (see docs/tenants.md), because the hardware does not
	// split it, also when one tenant has the GPU; and a MIG instance's
	// figure split among the several tenants that had the instance in the
	// interval.
	Apportioned Method = "apportioned"
)

// Snapshot is everything the exporter knows after one sample: the raw
// readings and what they mean per tenant. A Snapshot is immutable once
// published; collectors and the tuner share it without copying.
type Snapshot struct {
	Time     time.Time
	Readings *gpu.Readings
	Sampler  gpu.SamplerStats
	// Tenants is the configured tenants, in configuration order, then the
	// tenants the pod tenancy gave pods with usage in this sample
	// (namespaces or label values the file does not name), ascending.
	Tenants []Info
	// Usage has one entry per tenant and GPU (and MIG GPU instance) that the
	// tenant used during the sample, Unassigned included.
	Usage []Usage
	// KeptContextSwitches are the context-switch counts of the tenants
	// without usage on a GPU that counts them (tenants that left it, for
	// BuilderOptions.DepartedRetention), by GPU UUID and tenant: with
	// Usage's, the tenants of a GPU add up to its context switches since
	// the exporter started, less those of the tenants forgotten.
	KeptContextSwitches []KeptCount
	// Meters are the cumulative energy, GPU time and memory time of every
	// tenant on every GPU since the exporter started (tenants that left
	// included, for BuilderOptions.DepartedRetention), by GPU and tenant;
	// GPUMeters what no tenant is charged for on each GPU. Per GPU, the
	// tenants' energy and the idle energy add up to the GPU's energy
	// counter's increase over any time in which no forgotten tenant had
	// usage on it.
	Meters    []Meter
	GPUMeters []GPUMeter
	// SLOs has one entry per tenant with a latency source.
	SLOs []SLOStatus
	// Config is the state of the tenants file and its reloads.
	Config ConfigStatus
	// Kubelet is the state of the kubelet pod-resources mapping; nil when
	// no pod-resources socket is configured.
	Kubelet *KubeletStatus
	// PodInfo is which container of which pod holds which GPU, by the
	// pod mapping; nil unless BuilderOptions.PodInfo is on (with Pods).
	PodInfo *PodInfo
	// Events are cumulative counts of device events (XID, OOM, ...) by GPU,
	// kind and code since the exporter started: Readings hold only the
	// events since the previous sample, so the snapshot builder carries the
	// totals forward with AddEvents. Sorted by GPU, kind, code.
	Events []EventCount
	// VGPURunlists are cumulative vGPU scheduler figures by GPU and
	// software runlist since the exporter first saw the runlist, carried
	// forward from each sample's scheduler log by AddSchedulerLog (which
	// drops a GPU's once it has no vGPU scheduler).
	VGPURunlists []RunlistCount
	// Attribution counts processes that could not be attributed cleanly.
	Attribution AttributionStatus
}

// EventCount is the cumulative number of events of one kind and code seen
// on one GPU.
type EventCount struct {
	GPU   int    // device index
	UUID  string // device UUID
	Kind  gpu.EventKind
	Code  uint64 // XID number for gpu.EventXID, 0 otherwise
	Total uint64
}

// ConfigStatus is the state of the tenants configuration.
type ConfigStatus struct {
	File                  string // path of the tenants file; "" when none
	LastReloadSuccessful  bool
	LastReloadSuccessTime time.Time
	ReloadsTotal          uint64
	ReloadFailuresTotal   uint64
}

// KubeletStatus is the state of the pod-resources mapping (Up: the last
// refresh succeeded; LastSuccess: when the mapping in use was fetched).
type KubeletStatus = kube.Status

// Info is a tenant's configured identity.
type Info struct {
	Name     string
	Class    gpu.TenantClass
	Priority int
	// ShareMin and ShareMax are the tenant's share bounds (share.min and
	// share.max; 0 and 1 when the tenants file sets none).
	ShareMin, ShareMax float64
	// RestartCost is the tenant's restart_cost (0: not set).
	RestartCost time.Duration
	// SLOWindow is, for a tenant with a latency_source, the window its
	// SLO status is judged over (its slo.window, else the file's
	// defaults.slo_window); 0: no latency source. The tenant is
	// configured with it whether or not its status is served yet: under
	// BuilderOptions.SourcesWhereRunning a source is read, and its status
	// served, only once the tenant has usage on this host.
	SLOWindow time.Duration
}

// Workload is what runs one GPU process: a Kubernetes pod (when the
// attribution resolved one) and a systemd service (from the process's
// cgroup, read whatever the selectors: the readings' path
// (kube.SystemdService), else /proc/PID/cgroup's systemd hierarchy
// (kube.SystemdUnit)).
type Workload struct {
	PID  uint32
	Pod  *gpu.Pod
	Unit string
}

// Usage is what one tenant got from one GPU (or one MIG instance of it)
// over the sample interval.
type Usage struct {
	Tenant string
	Class  gpu.TenantClass
	GPU    int    // device index
	UUID   string // device UUID
	// GPUInstance is the MIG GPU instance ID as a string; "" when the usage
	// is not inside a MIG instance.
	GPUInstance string
	Processes   int
	// PIDs are the processes attributed to the tenant on this GPU (or
	// instance), ascending; the tuner uses them to address per-process knobs
	// such as the MPS active-thread percentage. Never exported as labels.
	PIDs []uint32
	// VMPIDs are, on a vGPU host, the processes on the host that run the
	// tenant's VMs on this GPU (their QEMU), ascending, where known: a VM
	// is paused as a whole through them, never through PIDs, which are
	// the guests' own. Never exported as labels.
	VMPIDs []uint32
	// Workloads say, for those of PIDs the attribution knows it, what
	// runs each process (its Kubernetes pod, its systemd service), by PID,
	// ascending: an orchestrator moves a workload, not a PID. Nil when
	// nothing is known.
	Workloads []Workload

	// Method says how SMActive, DRAMActive and ContextSwitchesTotal were
	// obtained. On a whole GPU it is Apportioned, however many tenants
	// share it; on a MIG instance it is Measured when one tenant had the
	// instance over the sample's interval and Apportioned when several had
	// it in the interval (their split is by the memory each held over it)
	// or its process list was refused (its tenants carried forward). It
	// is "" for processes of a MIG GPU the readings place in no instance
	// (GPUInstance ""), whose usage has memory only.
	Method Method
	// SMActive is the tenant's share of the SM activity of the GPU (or MIG
	// instance), 0-1 of it; nil if the device figure is unknown. The
	// tenants of one GPU (or instance), Unassigned included, add up to the
	// device's (instance's) Activity.SMActive.
	SMActive *float64
	// DRAMActive is the tenant's share of the HBM bandwidth of the GPU (or
	// instance), 0-1 of its peak; it adds up over tenants like SMActive.
	DRAMActive *float64
	// KernelBusy is the fraction of the interval during which a kernel of
	// the tenant ran (NVML per-process or vGPU instance utilization, summed
	// over its processes, at most 1), however many SMs it filled; nil on
	// MIG GPUs and where unknown. Tenants' figures may add up to more than
	// 1 (MPS runs them at once).
	KernelBusy *float64
	// MemoryUsedBytes is the device memory held by the tenant's processes
	// (its vGPU VMs' framebuffer; the MIG instance's used memory where
	// the tenant has the instance alone and its processes' is not all
	// reported). MemoryUnknown is true where it is not known: the driver
	// did not report a process's (NVML's "not available", without
	// permission or from a container in its own PID namespace), and no
	// figure of the instance stands for it; MemoryUsedBytes is then the
	// part reported, not the tenant's.
	MemoryUsedBytes uint64
	MemoryUnknown   bool
	// Reservation is the part (0-1) of the whole GPU the tenant's sharing
	// mode reserves for it: on an MPS GPU the sum of its clients'
	// active-thread caps, on a vGPU host its VMs' profile framebuffer over
	// the GPU's memory; nil where the mode reserves nothing per tenant or
	// the figure is unknown (time-slicing, MIG: see reservations).
	Reservation *float64
	// ContextSwitchesTotal is a cumulative count attributed to the tenant;
	// nil when the device does not count context switches. Each sample's
	// increase of the device counter is split among the tenants like
	// SMActive.
	ContextSwitchesTotal *float64
}

// SLOStatus is a tenant's request latency against its SLO, from its
// latency source over the sliding window. The counters run from the
// exporter's start (the inputs of burn-rate alerts), or from the reload
// that restarted them (another Epoch); when GoodKnown is
// false (no SLO target, or a mean-only source such as Triton) the good
// requests and the attainment must not be exported; WindowRequests /
// Window is the rate to compare with the SLO's min_throughput.
type SLOStatus struct {
	Tenant string
	// Metric is what the SLO bounds: "ttft", "itl" or "" for end-to-end
	// request latency (LatencySource.SLOMetric).
	Metric string
	// MinThroughput is the SLO's min_throughput in requests per second
	// (0: none), the floor under which the window holds too few requests
	// to judge the SLO by (BelowFloor).
	MinThroughput float64
	latency.Status
}

// BelowFloor reports whether the window's requests came slower than the
// SLO's min_throughput: some, but too few for its quantile to say whether
// the SLO holds. A window without requests is idle, not below the floor.
func (s *SLOStatus) BelowFloor() bool {
	return s.MinThroughput > 0 && s.Window > 0 && s.WindowRequests > 0 && s.WindowRequests/s.Window.Seconds() < s.MinThroughput
}

// AttributionStatus counts attribution problems.
type AttributionStatus struct {
	// Conflicts is the number of processes and instances that matched two
	// or more tenants in this sample (each attributed to Unassigned).
	Conflicts int
	// ConflictsTotal counts distinct conflicts (a subject with a set of
	// tenants) seen since start.
	ConflictsTotal uint64
	// CgroupErrorsTotal counts processes whose cgroup could not be read.
	CgroupErrorsTotal uint64
	// ShareMinSums has one entry per GPU (and per MIG GPU instance, each
	// its own share domain) where at least one tenant with a share.min
	// above 0 has usage in this sample, in the order of Usage.
	ShareMinSums []ShareMinSum
	// OvercommittedShares are the entries of ShareMinSums whose MinSum is
	// above 1: the guarantees on that GPU (or instance) cannot all be met.
	OvercommittedShares []ShareMinSum
}

// ShareMinSum is the sum of the share.min guarantees of the tenants that
// used one GPU, or one MIG instance of it, during the sample.
type ShareMinSum struct {
	GPU  int    // device index
	UUID string // device UUID
	// GPUInstance is the MIG GPU instance ID as a string; "" for the GPU
	// itself (or usage on a MIG GPU outside any instance).
	GPUInstance string
	// Tenants are the tenants present with a share.min above 0, ascending.
	Tenants []string
	// MinSum is the sum of their share.min, rounded to nine decimal places
	// (a sum of exactly 1 is 1, not 1 plus floating-point error).
	MinSum float64
}

// Store publishes snapshots through an atomic pointer: one writer (the
// sampler's goroutine), any number of readers (scrapes, the tuner).
type Store struct{ p atomic.Pointer[Snapshot] }

// Load returns the latest snapshot, or nil before the first.
func (s *Store) Load() *Snapshot { return s.p.Load() }

// Store publishes snap.
func (s *Store) Store(snap *Snapshot) { s.p.Store(snap) }
