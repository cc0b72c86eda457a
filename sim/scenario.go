package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// Scenario is a parsed and validated scenario file: the GPUs of one host,
// how each is shared, the tenants (processes) on them with their workloads,
// and timed events. Its format is documented in docs/simulator.md.
type Scenario struct {
	Name        string
	Description string
	Seed        int64
	// Duration is the suggested run length.
	Duration time.Duration

	// File is the path the scenario was loaded from ("" when parsed from
	// bytes); trace paths are relative to its directory.
	File string

	GPUs    []GPUSpec
	Tenants []TenantSpec
	Events  []EventSpec
	Control ControlSpec

	// health holds the health events (sim/health.go), in time order: the
	// parser moves them out of Events, which cut the engine's steps.
	health []EventSpec

	validated bool // set by the parser; New refuses anything else
}

// GPUSpec is one GPU of a scenario.
type GPUSpec struct {
	Model     string             `yaml:"model"`
	UUID      string             `yaml:"uuid"`
	Sharing   string             `yaml:"sharing"`
	TimeSlice gpu.TimeSliceLevel `yaml:"timeslice"`
	MIG       []MIGSpec          `yaml:"mig"`
	MPS       MPSSpec            `yaml:"mps"`
	VGPU      VGPUSpec           `yaml:"vgpu"`
	Clocks    ClockSpec          `yaml:"locked_clocks"`
	PowerLimW float64            `yaml:"power_limit"`
	Reserved  ByteSize           `yaml:"reserved_memory"`
	DrainTime Duration           `yaml:"mig_drain_time"`

	model *gpuModel
}

// MIGSpec is one MIG instance of a GPU.
type MIGSpec struct {
	Profile string `yaml:"profile"`
	UUID    string `yaml:"uuid"`
	// Sharing inside the instance: "time-slice" (default) or "mps".
	Sharing string `yaml:"sharing"`
}

// MPSSpec configures MPS on a GPU (or inside its MIG instances).
type MPSSpec struct {
	DefaultActiveThreads float64  `yaml:"default_active_threads"`
	DefaultPinnedLimit   ByteSize `yaml:"default_pinned_memory_limit"`
	// RestartTime is the switch-over from a warmed standby to the new
	// context (see docs/calibration.md, actuation).
	RestartTime Duration `yaml:"restart_time"`
}

// VGPUSpec configures the vGPU scheduler of a GPU.
type VGPUSpec struct {
	Policy       gpu.VGPUPolicy `yaml:"policy"`
	ARR          bool           `yaml:"arr"`
	TimeSlice    Duration       `yaml:"timeslice"`
	MinTimeSlice Duration       `yaml:"min_timeslice"`
	MaxTimeSlice Duration       `yaml:"max_timeslice"`
	AvgFactor    uint32         `yaml:"avg_factor"`
	Frequency    uint32         `yaml:"frequency"`
}

// ClockSpec is a locked SM clock range in MHz.
type ClockSpec struct {
	Min uint32 `yaml:"min"`
	Max uint32 `yaml:"max"`
}

// ControlSpec holds the costs of control actions (docs/calibration.md,
// actuation).
type ControlSpec struct {
	// MigrationTime is the fixed part of a process start: the process,
	// its CUDA context and its server coming up, without the model load.
	MigrationTime Duration `yaml:"migration_time"`
	// LoadBandwidth is the rate (bytes/s) at which a starting process
	// loads its model (weights_bytes; training: its memory) onto the GPU.
	LoadBandwidth ByteSize `yaml:"load_bandwidth"`
	// DrainTimeout is how long a drain (a restart without a standby, a
	// stop, a MIG instance drain) waits for in-flight work before it
	// drops it.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// CheckpointBandwidth is the rate (bytes/s) at which a training job
	// writes its checkpoint (its memory); it makes no progress meanwhile.
	CheckpointBandwidth ByteSize `yaml:"checkpoint_bandwidth"`
	// WarmupLoad is the share of its new SM cap a standby's warm-up keeps
	// busy on the GPU while it warms; nil selects the default.
	WarmupLoad *float64 `yaml:"warmup_load"`
	// Switchover is what an LLM's switch-over to its standby does with
	// the requests in flight: "drop" (the default) or "drain"; a
	// workload's switchover overrides it.
	Switchover string `yaml:"llm_switchover"`
	// StandbyFallback is what a restart does without memory for a
	// standby: "cold" (drain, then start; the default) or "refuse".
	StandbyFallback string `yaml:"standby_fallback"`
	// Actuators is what each actuator's calls cost (restarts.go).
	Actuators ActuatorCosts `yaml:"actuators"`
}

// TenantSpec is one tenant: a process placed on a GPU (or MIG instance)
// running a workload.
type TenantSpec struct {
	Name        string       `yaml:"name"`
	GPU         int          `yaml:"gpu"`
	MIGInstance int          `yaml:"mig_instance"`
	Stopped     bool         `yaml:"stopped"`
	Process     ProcessSpec  `yaml:"process"`
	Memory      ByteSize     `yaml:"memory"`
	MPSThreads  float64      `yaml:"mps_active_threads"`
	PinnedLimit ByteSize     `yaml:"pinned_memory_limit"`
	VM          VMSpec       `yaml:"vm"`
	SLO         *SLOSpec     `yaml:"slo"`
	Workload    WorkloadSpec `yaml:"workload"`

	trace *trace
}

// ProcessSpec is how the tenant's process looks to the host.
type ProcessSpec struct {
	PID         uint32 `yaml:"pid"`
	UID         *int   `yaml:"uid"`
	Executable  string `yaml:"executable"`
	PodUID      string `yaml:"pod_uid"`
	ContainerID string `yaml:"container_id"`
	QoS         string `yaml:"qos"`
	Cgroup      string `yaml:"cgroup"`
}

// VMSpec describes the VM of a tenant on a vGPU host.
type VMSpec struct {
	Name string `yaml:"name"`
	// Type is the vGPU type; a name ending in -<N><letter> (H100-20C) gives
	// the VM N GB of framebuffer.
	Type   string `yaml:"type"`
	Weight uint32 `yaml:"weight"`
	// HostPID is the process on the host that runs the VM (its QEMU),
	// by which the VM is paused: the tenant's process PID is the guest's.
	// Default: the first PID from 300000 + the tenant's index that no
	// process of the scenario has.
	HostPID uint32 `yaml:"host_pid"`

	fb uint64 // framebuffer bytes; 0 = unknown
}

var vgpuTypeRE = regexp.MustCompile(`-([0-9]+)[A-Z]$`)

// SLOSpec is a latency objective used for ground truth.
type SLOSpec struct {
	Quantile float64  `yaml:"quantile"`
	Target   Duration `yaml:"target"`
	// Metric is what the SLO bounds: "e2e" (the default), a request's
	// end-to-end latency; "ttft", an LLM request's time to its first
	// token; or "itl", an LLM's inter-token latency, judged per token
	// (SLOMetricITL). The report judges it and a tenants file gives the
	// tuner the same (a latency_source preset *-ttft or *-itl).
	Metric string `yaml:"metric"`
	// Line is where the SLO is stated in the scenario file (0: unknown).
	Line int `yaml:"-"`
}

// WorkloadSpec is what a tenant runs.
type WorkloadSpec struct {
	// Type is "dnn" (classic inference), "llm" or "training".
	Type    string      `yaml:"type"`
	Arrival ArrivalSpec `yaml:"arrival"`
	// DNN and training: work per request (dnn) or per step (training).
	FLOPs        float64  `yaml:"flops"`
	Bytes        float64  `yaml:"bytes"`
	WeightsBytes ByteSize `yaml:"weights_bytes"`
	MaxBatch     int      `yaml:"max_batch"`
	// MaxQueue is how many requests may wait; more are rejected.
	MaxQueue int `yaml:"max_queue"`
	// SMFraction is the largest fraction of the SMs the kernels can fill.
	SMFraction float64 `yaml:"sm_fraction"`
	// MinJobTime is the shortest a batch, iteration or step takes however
	// fast the GPU: kernel launches and serial dependencies.
	MinJobTime Duration `yaml:"min_job_time"`
	// Occupancy is resident warps / max warps on an active SM.
	Occupancy float64 `yaml:"occupancy"`
	// ServiceNoise is the spread (sigma of the logarithm) of the lognormal
	// noise on every job's GPU time when the job runs alone; nil selects
	// the default (docs/calibration.md, noise), 0 turns it off.
	ServiceNoise *float64 `yaml:"service_noise"`
	// Timeout is the client's request timeout: a request older than it
	// fails (TenantWindow.TimedOut). 0 selects the default; training has
	// none.
	Timeout Duration `yaml:"timeout"`
	// CheckpointInterval (training) is how often the job checkpoints; a
	// restart or move resumes from the last checkpoint.
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	// Switchover (LLM) overrides the scenario's control.llm_switchover.
	Switchover string `yaml:"switchover"`
	// LLM.
	// IterationOverhead is the serving engine's host time per iteration
	// (scheduling, sampling, launches) during which the GPU does not work
	// for the tenant, plus SeqOverhead for each running sequence.
	IterationOverhead Duration `yaml:"iteration_overhead"`
	SeqOverhead       Duration `yaml:"sequence_overhead"`
	Params            float64  `yaml:"params"`
	KVBytesPerToken   ByteSize `yaml:"kv_bytes_per_token"`
	ContextTokens     int      `yaml:"context_tokens"`
	GeneratedTokens   int      `yaml:"generated_tokens"`
	FixedTokens       bool     `yaml:"fixed_tokens"`
	Model             string   `yaml:"model_name"`
}

// ArrivalSpec is a workload's request process.
type ArrivalSpec struct {
	// Process is "poisson", "bursty" (two-state MMPP), "trace" or "closed"
	// (training: the next step starts when one ends).
	Process string  `yaml:"process"`
	Rate    float64 `yaml:"rate"`
	// Bursty.
	BurstRate float64  `yaml:"burst_rate"`
	BurstMean Duration `yaml:"burst_mean"`
	CalmMean  Duration `yaml:"calm_mean"`
	// Trace.
	File    string  `yaml:"file"`
	Speedup float64 `yaml:"speedup"`
	NoLoop  bool    `yaml:"no_loop"`
}

// EventSpec is a timed change.
type EventSpec struct {
	At     Duration `yaml:"at"`
	Tenant string   `yaml:"tenant"`
	// Action is "rate" (set the arrival rate), "start" or "stop" (a
	// tenant's process), "xid" (an XID error on a GPU), "gpu-lost" (the GPU
	// falls off the bus: its processes die and it reads as down),
	// "gpu-restored", or a health event that changes only the GPU's health
	// readings (sim/health.go): "nvlink-crc-errors", "nvlink-replays" and
	// "pcie-replays" (a counter rising at Rate per second), "row-remap-pending",
	// "row-remap-failure", "page-retired".
	Action string `yaml:"action"`
	// Rate is the arrival rate of a rate event, per second, or how fast a
	// health event's counter rises, per second.
	Rate float64 `yaml:"rate"`
	// GPU is the GPU index of xid, gpu-lost, gpu-restored and health events.
	GPU *int `yaml:"gpu"`
	// Code is the XID number of an xid event.
	Code uint64 `yaml:"code"`

	tenant int // -1: none
}

// ByteSize is a size in bytes; in YAML a number of bytes or a string with
// a unit: "40GiB", "71GB", "512MiB" (the syntax of every file, see
// yamlconf.Size).
type ByteSize = yamlconf.Size

// Duration is a length of time; in YAML a Go or Prometheus duration:
// "250ms", "1m30s", "1d" (the syntax of every file, see
// yamlconf.ParseDuration).
type Duration = yamlconf.Duration

// fileScenario is the YAML document.
type fileScenario struct {
	Name        string       `yaml:"name"`
	Description string       `yaml:"description"`
	Seed        int64        `yaml:"seed"`
	Duration    Duration     `yaml:"duration"`
	GPUs        []GPUSpec    `yaml:"gpus"`
	Tenants     []TenantSpec `yaml:"tenants"`
	Events      []EventSpec  `yaml:"events"`
	Control     ControlSpec  `yaml:"control"`
}

// LoadScenario reads and validates a scenario file. Errors name file:line.
// A file that is not a regular file, or is over MaxScenarioBytes, is
// refused before it is read.
func LoadScenario(path string) (*Scenario, error) {
	return LoadScenarioFS(nil, path)
}

// LoadScenarioFS is LoadScenario for the scenario file name of fsys (an
// embedded library of scenarios): the traces it names are read from fsys
// too, relative to name's directory, and nothing else is read. Errors and
// the scenario's File name the files as they are in fsys. A nil fsys is
// the operating system's files (LoadScenario).
func LoadScenarioFS(fsys fs.FS, name string) (*Scenario, error) {
	data, err := fileread.RegularFS(fsys, name, MaxScenarioBytes)
	if err != nil {
		return nil, err
	}
	return parseScenario(name, data, name, fsys)
}

// MaxScenarioBytes bounds the size of a scenario file (traces are read
// separately, as streams).
const MaxScenarioBytes = 4 << 20

// Limits on YAML aliases (*name), which let a small file repeat a subtree
// any number of times (docs/simulator.md, Limits): the references a
// decoder follows, and the nodes it repeats through them.
const (
	maxAliases      = 1000
	maxAliasedNodes = 100_000
)

// maxEvents bounds a scenario's events (docs/simulator.md, Limits).
const maxEvents = 10_000

// listBounds are the scenario's lists and their bounds, checked on the
// YAML tree before it is decoded: decoding builds the tree again, and each
// element (what a 4 MiB file costs either way: docs/simulator.md, Limits).
var listBounds = []struct {
	key, what string
	max       int
}{{"gpus", "GPUs (one host)", maxGPUs}, {"tenants", "tenants", maxTenants}, {"events", "events", maxEvents}}

// maxNodes bounds the nodes of a scenario's YAML tree (keys, values, list
// items; an alias one), whatever their place: far above the largest
// scenario the list bounds let through (about 250,000, an estimate from
// the richest built-in tenant's and event's nodes), far below a 4 MiB file
// of short items (over a million), whose decoding cost the most memory.
const maxNodes = 500_000

// checkListSizes refuses a list over its bound (listBounds), at the line
// of its first element past it, and a tree over maxNodes, at the line of
// the first node past it.
func (p *parser) checkListSizes() error {
	doc := p.root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		doc = &yaml.Node{} // (the decoder names it)
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		for _, l := range listBounds {
			if n := len(doc.Content[i+1].Content); doc.Content[i].Value == l.key && doc.Content[i+1].Kind == yaml.SequenceNode && n > l.max {
				return p.errAt([]any{l.key, l.max}, "a scenario has at most %d %s, this one %d", l.max, l.what, n)
			}
		}
	}
	if past := nodePast(p.root, new(int)); past != nil {
		return fmt.Errorf("%s:%d: a scenario has at most %d YAML nodes (keys, values, list items), this one more", p.file, max(past.Line, 1), maxNodes)
	}
	return nil
}

// nodePast is the first node of n's tree, in document order, past
// maxNodes (seen: those counted before n), nil when none.
func nodePast(n *yaml.Node, seen *int) *yaml.Node {
	if *seen++; *seen > maxNodes {
		return n
	}
	for _, c := range n.Content {
		if past := nodePast(c, seen); past != nil {
			return past
		}
	}
	return nil
}

// MaxDuration is the longest a scenario's duration may be (docs/simulator.md,
// Limits), and a run's that replaces it: the run's time grows with it.
const MaxDuration = maxDuration

// ParseScenario parses a scenario from data; name is used in error messages
// (and as the scenario name when the file has none). Relative trace paths
// are resolved against the current directory.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	return parseScenario(name, data, "", nil)
}

// yamlError names the file in yaml.v3's errors: one "file:line: problem"
// line for each.
func yamlError(file string, err error) error {
	errs := &yamlconf.Errors{File: file}
	errs.Add(err)
	return errs.Err()
}

// parser carries the YAML tree for locating errors, and the file system
// the scenario's traces are read from (nil: the operating system's).
type parser struct {
	file string
	root *yaml.Node
	fsys fs.FS
}

// errAt returns "file:line: msg" for the node at path (keys and indexes);
// it falls back to the deepest node found.
func (p *parser) errAt(path []any, format string, args ...any) error {
	line := yamlconf.Line(p.root, path...)
	return fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

func parseScenario(file string, data []byte, path string, fsys fs.FS) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if root.Kind == 0 {
		return nil, fmt.Errorf("%s:1: empty scenario", file)
	}
	// refused before decoding, which would repeat each alias's subtree
	aliases := &yamlconf.Errors{File: file}
	yamlconf.LimitAliases(aliases, &root, maxAliases, maxAliasedNodes)
	if err := aliases.Err(); err != nil {
		return nil, err
	}
	p := &parser{file: file, root: &root, fsys: fsys}
	if err := p.checkListSizes(); err != nil {
		return nil, err
	}
	var doc fileScenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlError(file, err)
	}
	// a second document would be ignored, whatever it holds (two
	// scenarios in one file, a stray ---), as the tenants file's is not
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: only one YAML document is allowed (a second starts here)", file, max(extra.Line, 1))
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err)
	}
	// yaml.v3 truncates a number with a fraction given to an integer key
	// (code: 1.5 reads as 1)
	fracs := &yamlconf.Errors{File: file}
	fracs.Fractional(&root, reflect.TypeFor[fileScenario]())
	if err := fracs.Err(); err != nil {
		return nil, err
	}
	sc := &Scenario{
		Name: doc.Name, Description: doc.Description, Seed: doc.Seed, Duration: time.Duration(doc.Duration),
		File: path, GPUs: doc.GPUs, Tenants: doc.Tenants, Events: doc.Events, Control: doc.Control,
	}
	if err := p.checkGivenZeros(sc); err != nil {
		return nil, err
	}
	if sc.Name == "" {
		base := filepath.Base(file)
		sc.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if sc.Duration < 0 || sc.Duration > maxDuration {
		return nil, p.errAt([]any{"duration"}, "duration must be in [0, %v], got %v", maxDuration, sc.Duration)
	}
	if sc.Duration == 0 {
		sc.Duration = 10 * time.Minute
	}
	if sc.Control.MigrationTime == 0 {
		sc.Control.MigrationTime = Duration(defaultStartTime)
	}
	if sc.Control.LoadBandwidth == 0 {
		sc.Control.LoadBandwidth = defaultLoadBandwidth
	}
	if sc.Control.DrainTimeout == 0 {
		sc.Control.DrainTimeout = Duration(defaultDrainTimeout)
	}
	if sc.Control.MigrationTime < 0 || sc.Control.DrainTimeout < 0 {
		return nil, p.errAt([]any{"control"}, "control: migration_time and drain_timeout must not be negative")
	}
	if err := p.checkDurations([]durationAt{
		{[]any{"control", "migration_time"}, sc.Control.MigrationTime},
		{[]any{"control", "drain_timeout"}, sc.Control.DrainTimeout},
	}); err != nil {
		return nil, err
	}
	if err := p.validateControl(&sc.Control); err != nil {
		return nil, err
	}
	if err := p.validate(sc); err != nil {
		return nil, err
	}
	sc.validated = true
	return sc, nil
}

// defaultMemory is the memory of a tenant whose workload is w when the
// scenario gives none; defaultMemoryFloat is the same in float64, so that
// a sum out of ByteSize's range shows as such (validate checks it first).
func defaultMemory(w *WorkloadSpec) ByteSize {
	return w.WeightsBytes + ByteSize(memoryBeyondWeights(w)) + 1<<30
}

func defaultMemoryFloat(w *WorkloadSpec) float64 {
	return float64(w.WeightsBytes) + memoryBeyondWeights(w) + 1<<30
}

// memoryBeyondWeights is what a tenant of workload w holds by default
// besides its weights and a gigabyte of context: an LLM's KV cache pool
// for max_batch sequences of average length, another's working set.
func memoryBeyondWeights(w *WorkloadSpec) float64 {
	if w.Type == "llm" {
		return float64(w.KVBytesPerToken) * float64(w.MaxBatch) * float64(w.ContextTokens+w.GeneratedTokens)
	}
	return math.Max(w.Bytes, 0)
}

// deriveUUID returns a UUID-formatted string from the SHA-256 of key.
func deriveUUID(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:16])
	return prefix + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// migUUID is the UUID of MIG instance inst on scenario GPU index g after
// gen reconfigurations: "MIG-" + UUID from SHA-256("vgpusim/mig/g/inst")
// (with "/gen" appended when gen > 0).
func migUUID(g, inst, gen int) string {
	key := fmt.Sprintf("vgpusim/mig/%d/%d", g, inst)
	if gen > 0 {
		key += fmt.Sprintf("/%d", gen)
	}
	return deriveUUID("MIG-", key)
}

// podUID derives a pod UID from the tenant name.
func podUID(name string) string {
	return deriveUUID("", "vgpusim/pod/"+name)
}

// cgroupPath builds a systemd-driver kubepods cgroup path.
func cgroupPath(qos, pod, container string) string {
	u := strings.ReplaceAll(pod, "-", "_")
	if qos == "guaranteed" {
		return fmt.Sprintf("/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope", u, container)
	}
	return fmt.Sprintf("/kubepods.slice/kubepods-%s.slice/kubepods-%s-pod%s.slice/cri-containerd-%s.scope", qos, qos, u, container)
}
