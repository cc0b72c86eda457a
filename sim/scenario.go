package sim

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

	fb uint64 // framebuffer bytes; 0 = unknown
}

var vgpuTypeRE = regexp.MustCompile(`-([0-9]+)[A-Z]$`)

// SLOSpec is a latency objective used for ground truth.
type SLOSpec struct {
	Quantile float64  `yaml:"quantile"`
	Target   Duration `yaml:"target"`
	// Metric is what the SLO bounds: "e2e" (the default), a request's
	// end-to-end latency, or "ttft", an LLM request's time to its first
	// token. The report judges it and a tenants file gives the tuner the
	// same (a latency_source preset *-ttft).
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
	// falls off the bus: its processes die and it reads as down) or
	// "gpu-restored".
	Action string  `yaml:"action"`
	Rate   float64 `yaml:"rate"`
	// GPU is the GPU index of xid, gpu-lost and gpu-restored events.
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
	data, err := fileread.Regular(path, MaxScenarioBytes)
	if err != nil {
		return nil, err
	}
	sc, err := parseScenario(path, data, path)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// MaxScenarioBytes bounds the size of a scenario file (traces are read
// separately, as streams).
const MaxScenarioBytes = 4 << 20

// ParseScenario parses a scenario from data; name is used in error messages
// (and as the scenario name when the file has none). Relative trace paths
// are resolved against the current directory.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	return parseScenario(name, data, "")
}

// yamlError names the file in yaml.v3's errors: one "file:line: problem"
// line for each.
func yamlError(file string, err error) error {
	errs := &yamlconf.Errors{File: file}
	errs.Add(err)
	return errs.Err()
}

// parser carries the YAML tree for locating errors.
type parser struct {
	file string
	root *yaml.Node
}

// errAt returns "file:line: msg" for the node at path (keys and indexes);
// it falls back to the deepest node found.
func (p *parser) errAt(path []any, format string, args ...any) error {
	line := yamlconf.Line(p.root, path...)
	return fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

func parseScenario(file string, data []byte, path string) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if root.Kind == 0 {
		return nil, fmt.Errorf("%s:1: empty scenario", file)
	}
	var fs fileScenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fs); err != nil {
		return nil, yamlError(file, err)
	}
	p := &parser{file: file, root: &root}
	sc := &Scenario{
		Name: fs.Name, Description: fs.Description, Seed: fs.Seed, Duration: time.Duration(fs.Duration),
		File: path, GPUs: fs.GPUs, Tenants: fs.Tenants, Events: fs.Events, Control: fs.Control,
	}
	if sc.Name == "" {
		base := filepath.Base(file)
		sc.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if sc.Duration < 0 {
		return nil, p.errAt([]any{"duration"}, "duration must not be negative")
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
	if err := p.validate(sc); err != nil {
		return nil, err
	}
	sc.validated = true
	return sc, nil
}

var timeSliceLevels = map[gpu.TimeSliceLevel]time.Duration{
	// See docs/calibration.md, time-slicing: default slice 1024 us; the
	// short, medium and long levels have no published durations (lead
	// 2/10/30 ms).
	gpu.TimeSliceDefault: 1024 * time.Microsecond,
	gpu.TimeSliceShort:   2 * time.Millisecond,
	gpu.TimeSliceMedium:  10 * time.Millisecond,
	gpu.TimeSliceLong:    30 * time.Millisecond,
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (p *parser) validate(sc *Scenario) error {
	if len(sc.GPUs) == 0 {
		return p.errAt(nil, "a scenario needs at least one GPU under gpus")
	}
	uuids := map[string]bool{}
	for i := range sc.GPUs {
		g := &sc.GPUs[i]
		at := func(k ...any) []any { return append([]any{"gpus", i}, k...) }
		g.model = modelByName(g.Model)
		if g.model == nil {
			return p.errAt(at("model"), "unknown GPU model %q (have %s)", g.Model, strings.Join(modelNames(), ", "))
		}
		if g.UUID == "" {
			// The scenario's name is part of the key, so that two simulated
			// hosts (two scenarios) never share a GPU UUID.
			g.UUID = deriveUUID("GPU-", fmt.Sprintf("vgpusim/%s/gpu/%d", sc.Name, i))
		}
		if uuids[g.UUID] {
			return p.errAt(at("uuid"), "duplicate UUID %s", g.UUID)
		}
		uuids[g.UUID] = true
		switch gpu.SharingMode(g.Sharing) {
		case "":
			g.Sharing = string(gpu.SharingTimeSlice)
		case gpu.SharingExclusive, gpu.SharingTimeSlice, gpu.SharingMPS, gpu.SharingMIG, gpu.SharingVGPU:
		default:
			return p.errAt(at("sharing"), "unknown sharing mode %q (exclusive, time-slice, mps, mig, vgpu)", g.Sharing)
		}
		if g.TimeSlice == "" {
			g.TimeSlice = gpu.TimeSliceDefault
		}
		if _, ok := timeSliceLevels[g.TimeSlice]; !ok {
			return p.errAt(at("timeslice"), "unknown time-slice level %q (default, short, medium, long)", g.TimeSlice)
		}
		if g.Sharing == string(gpu.SharingMIG) {
			if len(g.MIG) == 0 {
				return p.errAt(at("sharing"), "sharing: mig needs a mig: list of instance profiles")
			}
			names := make([]string, len(g.MIG))
			for j, m := range g.MIG {
				if g.model.profile(m.Profile) == nil {
					return p.errAt(at("mig", j, "profile"), "unknown MIG profile %q for %s (have %s)", m.Profile, g.Model, strings.Join(g.model.profileNames(), ", "))
				}
				names[j] = m.Profile
				switch m.Sharing {
				case "":
					g.MIG[j].Sharing = string(gpu.SharingTimeSlice)
				case string(gpu.SharingTimeSlice), string(gpu.SharingMPS):
				default:
					return p.errAt(at("mig", j, "sharing"), "unknown sharing %q inside a MIG instance (time-slice, mps)", m.Sharing)
				}
				if m.UUID == "" {
					g.MIG[j].UUID = migUUID(i, j, 0)
				}
				if uuids[g.MIG[j].UUID] {
					return p.errAt(at("mig", j, "uuid"), "duplicate UUID %s", g.MIG[j].UUID)
				}
				uuids[g.MIG[j].UUID] = true
			}
			if err := g.model.checkMIGLayout(names); err != nil {
				return p.errAt(at("mig"), "%v", err)
			}
		} else if len(g.MIG) > 0 {
			return p.errAt(at("mig"), "mig: instances need sharing: mig")
		}
		if g.MPS.DefaultActiveThreads == 0 {
			g.MPS.DefaultActiveThreads = 1
		}
		if !(g.MPS.DefaultActiveThreads > 0 && g.MPS.DefaultActiveThreads <= 1) {
			return p.errAt(at("mps", "default_active_threads"), "default_active_threads must be in (0,1]")
		}
		if g.MPS.RestartTime == 0 {
			// See docs/calibration.md, actuation: GSLICE switches to a
			// warmed standby in < 100 us.
			g.MPS.RestartTime = Duration(100 * time.Microsecond)
		}
		if g.DrainTime == 0 {
			g.DrainTime = Duration(2 * time.Second)
		}
		if g.VGPU.Policy == "" {
			g.VGPU.Policy = gpu.VGPUPolicyBestEffort
		} else if !slices.Contains(vgpuPolicies, g.VGPU.Policy) {
			return p.errAt(at("vgpu", "policy"), "unknown vGPU scheduler policy %q (%s)", g.VGPU.Policy, vgpuPolicyList())
		}
		if g.VGPU.MinTimeSlice == 0 {
			g.VGPU.MinTimeSlice = Duration(time.Millisecond)
		}
		if g.VGPU.MaxTimeSlice == 0 {
			g.VGPU.MaxTimeSlice = Duration(30 * time.Millisecond)
		}
		if g.VGPU.TimeSlice == 0 {
			g.VGPU.TimeSlice = Duration(2 * time.Millisecond)
		}
		if g.VGPU.MinTimeSlice < Duration(100*time.Microsecond) || g.VGPU.MaxTimeSlice < g.VGPU.MinTimeSlice {
			return p.errAt(at("vgpu"), "vGPU time slice bounds [%v, %v]: min must be at least 100us and max at least min", g.VGPU.MinTimeSlice, g.VGPU.MaxTimeSlice)
		}
		if g.VGPU.TimeSlice < g.VGPU.MinTimeSlice || g.VGPU.TimeSlice > g.VGPU.MaxTimeSlice {
			return p.errAt(at("vgpu", "timeslice"), "vGPU time slice %v outside [%v, %v]", g.VGPU.TimeSlice, g.VGPU.MinTimeSlice, g.VGPU.MaxTimeSlice)
		}
		if msg := checkARR(&g.VGPU); msg != "" {
			return p.errAt(at("vgpu"), "%s", msg)
		}
		if g.Clocks.Max != 0 || g.Clocks.Min != 0 {
			if g.Clocks.Min > g.Clocks.Max || float64(g.Clocks.Max) > g.model.MaxClockMHz || float64(g.Clocks.Min) < g.model.IdleClockMHz {
				return p.errAt(at("locked_clocks"), "locked clocks [%d, %d] MHz outside [%g, %g]", g.Clocks.Min, g.Clocks.Max, g.model.IdleClockMHz, g.model.MaxClockMHz)
			}
		}
		if g.PowerLimW != 0 && !(g.PowerLimW >= 0.3*g.model.TDPW && g.PowerLimW <= g.model.TDPW) {
			return p.errAt(at("power_limit"), "power limit %g W outside [%g, %g]", g.PowerLimW, 0.3*g.model.TDPW, g.model.TDPW)
		}
		if g.Reserved == 0 {
			g.Reserved = 512 << 20 // driver/context reserve
		}
	}
	names := map[string]int{}
	pids := map[uint32]bool{}
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		at := func(k ...any) []any { return append([]any{"tenants", i}, k...) }
		if t.Name == "" {
			return p.errAt(at(), "tenant needs a name")
		}
		if _, dup := names[t.Name]; dup {
			return p.errAt(at("name"), "duplicate tenant name %q", t.Name)
		}
		names[t.Name] = i
		if t.GPU < 0 || t.GPU >= len(sc.GPUs) {
			return p.errAt(at("gpu"), "tenant %s on GPU %d, but the scenario has %d GPU(s)", t.Name, t.GPU, len(sc.GPUs))
		}
		g := &sc.GPUs[t.GPU]
		if g.Sharing == string(gpu.SharingMIG) {
			if t.MIGInstance < 0 || t.MIGInstance >= len(g.MIG) {
				return p.errAt(at("mig_instance"), "tenant %s on MIG instance %d, but GPU %d has %d instance(s)", t.Name, t.MIGInstance, t.GPU, len(g.MIG))
			}
		} else if t.MIGInstance != 0 {
			return p.errAt(at("mig_instance"), "mig_instance needs a GPU with sharing: mig")
		}
		if g.Sharing == string(gpu.SharingExclusive) {
			for k := 0; k < i; k++ {
				if sc.Tenants[k].GPU == t.GPU {
					return p.errAt(at("gpu"), "GPU %d is exclusive and already holds tenant %s", t.GPU, sc.Tenants[k].Name)
				}
			}
		}
		if t.Process.PID == 0 {
			t.Process.PID = uint32(4000 + 17*i)
		}
		if pids[t.Process.PID] {
			return p.errAt(at("process", "pid"), "duplicate PID %d", t.Process.PID)
		}
		pids[t.Process.PID] = true
		if t.Process.UID == nil {
			uid := 1000
			t.Process.UID = &uid
		}
		if t.Process.Executable == "" {
			t.Process.Executable = map[string]string{"llm": "vllm", "training": "python3"}[t.Workload.Type]
			if t.Process.Executable == "" {
				t.Process.Executable = "tritonserver"
			}
		}
		if t.Process.Cgroup == "" {
			if t.Process.PodUID == "" {
				t.Process.PodUID = podUID(t.Name)
			}
			if t.Process.ContainerID == "" {
				sum := sha256.Sum256([]byte("vgpusim/container/" + t.Process.PodUID + "/" + t.Name))
				t.Process.ContainerID = hex.EncodeToString(sum[:])
			}
			if !hexRE.MatchString(t.Process.ContainerID) {
				return p.errAt(at("process", "container_id"), "container_id must be 64 lowercase hex digits")
			}
			switch t.Process.QoS {
			case "":
				t.Process.QoS = "burstable"
			case "burstable", "besteffort", "guaranteed":
			default:
				return p.errAt(at("process", "qos"), "unknown QoS class %q (guaranteed, burstable, besteffort)", t.Process.QoS)
			}
			t.Process.Cgroup = cgroupPath(t.Process.QoS, t.Process.PodUID, t.Process.ContainerID)
		}
		if !(t.MPSThreads >= 0 && t.MPSThreads <= 1) {
			return p.errAt(at("mps_active_threads"), "mps_active_threads must be in (0,1]")
		}
		if t.VM.Weight == 0 {
			t.VM.Weight = 1
		}
		if t.VM.Name == "" {
			t.VM.Name = "vm-" + t.Name
		}
		if t.SLO != nil {
			t.SLO.Line = yamlconf.Line(p.root, at("slo")...)
			if !(t.SLO.Quantile > 0 && t.SLO.Quantile < 1) {
				return p.errAt(at("slo", "quantile"), "slo quantile must be in (0,1)")
			}
			if t.SLO.Target <= 0 {
				return p.errAt(at("slo", "target"), "slo target must be positive")
			}
			switch t.SLO.Metric {
			case "", SLOMetricE2E:
				t.SLO.Metric = ""
			case SLOMetricTTFT:
				if t.Workload.Type != "llm" {
					return p.errAt(at("slo", "metric"), "slo metric %s needs an llm workload", SLOMetricTTFT)
				}
			default:
				return p.errAt(at("slo", "metric"), "unknown slo metric %q (%s, %s)", t.SLO.Metric, SLOMetricE2E, SLOMetricTTFT)
			}
		}
		if err := p.validateWorkload(sc, i); err != nil {
			return err
		}
		if t.Memory == 0 {
			t.Memory = defaultMemory(&t.Workload)
		}
		if t.VM.Type == "" {
			// the smallest C-series type (1/8, 1/4, 1/2 or all of the
			// framebuffer) that holds the tenant's memory
			n := g.model.MemBytes / gb
			for _, div := range []uint64{8, 4, 2, 1} {
				if g.model.MemBytes/gb/div*gb >= uint64(t.Memory) {
					n = g.model.MemBytes / gb / div
					break
				}
			}
			t.VM.Type = fmt.Sprintf("%s-%dC", g.model.VGPUTypes, n)
		}
		if m := vgpuTypeRE.FindStringSubmatch(t.VM.Type); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 32)
			t.VM.fb = n * gb
		}
	}
	for i := range sc.Events {
		e := &sc.Events[i]
		at := func(k ...any) []any { return append([]any{"events", i}, k...) }
		if e.At < 0 {
			return p.errAt(at("at"), "event time must not be negative")
		}
		if e.Action == "" {
			e.Action = "rate"
		}
		e.tenant = -1
		switch e.Action {
		case "rate", "start", "stop":
			idx, ok := names[e.Tenant]
			if !ok {
				return p.errAt(at("tenant"), "event for unknown tenant %q", e.Tenant)
			}
			e.tenant = idx
			if e.GPU != nil {
				return p.errAt(at("gpu"), "a %s event names a tenant, not a GPU", e.Action)
			}
		case "xid", "gpu-lost", "gpu-restored":
			if e.GPU == nil || *e.GPU < 0 || *e.GPU >= len(sc.GPUs) {
				return p.errAt(at(), "a %s event needs gpu: an index below %d", e.Action, len(sc.GPUs))
			}
			if e.Tenant != "" {
				idx, ok := names[e.Tenant]
				if !ok || e.Action != "xid" {
					return p.errAt(at("tenant"), "event for unknown tenant %q", e.Tenant)
				}
				e.tenant = idx
			}
			if e.Action == "xid" && e.Code == 0 {
				return p.errAt(at(), "an xid event needs code: the XID number")
			}
		default:
			return p.errAt(at("action"), "unknown event action %q (rate, start, stop, xid, gpu-lost, gpu-restored)", e.Action)
		}
		if e.Action == "rate" {
			if !(e.Rate >= 0 && e.Rate <= 1e6) {
				return p.errAt(at("rate"), "rate must be in [0, 1e6]")
			}
			w := sc.Tenants[e.tenant].Workload.Arrival.Process
			if w == "trace" || w == "closed" {
				return p.errAt(at("rate"), "a rate event needs a poisson or bursty arrival process, tenant %s has %s", e.Tenant, w)
			}
		}
	}
	// Events apply in time order; equal times keep file order.
	slices.SortStableFunc(sc.Events, func(a, b EventSpec) int { return cmp.Compare(a.At, b.At) })
	return nil
}

func (p *parser) validateWorkload(sc *Scenario, i int) error {
	t := &sc.Tenants[i]
	w := &t.Workload
	at := func(k ...any) []any { return append([]any{"tenants", i, "workload"}, k...) }
	switch w.Type {
	case "dnn", "llm", "training":
	case "":
		return p.errAt(at(), "workload needs a type (dnn, llm, training)")
	default:
		return p.errAt(at("type"), "unknown workload type %q (dnn, llm, training)", w.Type)
	}
	a := &w.Arrival
	for _, r := range []struct {
		path   []any
		v, max float64
	}{
		{at("flops"), w.FLOPs, 1e18},
		{at("bytes"), w.Bytes, 1e15},
		{at("params"), w.Params, 1e13},
		{at("context_tokens"), float64(w.ContextTokens), 1e7},
		{at("generated_tokens"), float64(w.GeneratedTokens), 1e7},
		{at("max_batch"), float64(w.MaxBatch), 1e5},
		{at("max_queue"), float64(w.MaxQueue), 1e7},
		{at("arrival", "rate"), a.Rate, 1e6},
		{at("arrival", "burst_rate"), a.BurstRate, 1e6},
		{at("arrival", "speedup"), a.Speedup, 1e4},
	} {
		if !(r.v >= 0 && r.v <= r.max) {
			return p.errAt(r.path, "%s must be in [0, %g], got %g", r.path[len(r.path)-1], r.max, r.v)
		}
	}
	if w.SMFraction == 0 {
		w.SMFraction = 1
	}
	if !(w.SMFraction > 0 && w.SMFraction <= 1) {
		return p.errAt(at("sm_fraction"), "sm_fraction must be in (0,1]")
	}
	if w.Occupancy == 0 {
		w.Occupancy = 0.5
	}
	if !(w.Occupancy > 0 && w.Occupancy <= 1) {
		return p.errAt(at("occupancy"), "occupancy must be in (0,1]")
	}
	if w.MinJobTime < 0 {
		return p.errAt(at("min_job_time"), "min_job_time must not be negative")
	}
	if w.MaxQueue == 0 {
		w.MaxQueue = 10000
	}
	if w.MaxQueue < 0 {
		return p.errAt(at("max_queue"), "max_queue must be positive")
	}
	if w.MaxBatch < 0 {
		return p.errAt(at("max_batch"), "max_batch must be positive")
	}
	if w.Model == "" {
		w.Model = t.Name
	}
	if w.ServiceNoise == nil {
		v := defaultServiceNoise
		w.ServiceNoise = &v
	}
	if !(*w.ServiceNoise >= 0 && *w.ServiceNoise <= 2) {
		return p.errAt(at("service_noise"), "service_noise must be in [0, 2]")
	}
	if w.Timeout < 0 || w.CheckpointInterval < 0 || w.IterationOverhead < 0 || w.SeqOverhead < 0 {
		return p.errAt(at(), "timeout, checkpoint_interval, iteration_overhead and sequence_overhead must not be negative")
	}
	if w.Type != "training" && w.Timeout == 0 {
		w.Timeout = Duration(defaultTimeout)
	}
	if w.Type == "llm" {
		if w.IterationOverhead == 0 {
			w.IterationOverhead = Duration(defaultIterationOverhead)
		}
		if w.SeqOverhead == 0 {
			w.SeqOverhead = Duration(defaultSeqOverhead)
		}
	}
	if w.Type == "training" {
		if w.CheckpointInterval == 0 {
			w.CheckpointInterval = Duration(defaultCheckpointInterval)
		}
		if a.Process == "" {
			a.Process = "closed"
		}
		if a.Process != "closed" {
			return p.errAt(at("arrival", "process"), "training runs closed-loop (arrival process closed)")
		}
		if w.FLOPs <= 0 && w.Bytes <= 0 {
			return p.errAt(at(), "training needs flops and/or bytes per step")
		}
		return nil
	}
	switch a.Process {
	case "poisson":
		if a.Rate < 0 {
			return p.errAt(at("arrival", "rate"), "rate must not be negative")
		}
	case "bursty":
		if a.BurstRate <= 0 || a.BurstMean < Duration(time.Millisecond) || a.CalmMean < Duration(time.Millisecond) {
			return p.errAt(at("arrival"), "bursty arrivals need burst_rate > 0, burst_mean and calm_mean of at least 1ms")
		}
	case "trace":
		if a.File == "" {
			return p.errAt(at("arrival"), "trace arrivals need a file")
		}
		if a.Speedup == 0 {
			a.Speedup = 1
		}
		if a.Speedup < 0 {
			return p.errAt(at("arrival", "speedup"), "speedup must be positive")
		}
		path := a.File
		if !filepath.IsAbs(path) && sc.File != "" {
			path = filepath.Join(filepath.Dir(sc.File), path)
		}
		tr, err := loadTrace(path)
		if err != nil {
			return p.errAt(at("arrival", "file"), "%v", err)
		}
		t.trace = tr
	case "closed":
		return p.errAt(at("arrival", "process"), "closed arrivals are for training workloads")
	case "":
		return p.errAt(at("arrival"), "arrival needs a process (poisson, bursty, trace)")
	default:
		return p.errAt(at("arrival", "process"), "unknown arrival process %q (poisson, bursty, trace)", a.Process)
	}
	switch w.Type {
	case "dnn":
		if w.FLOPs <= 0 && w.Bytes <= 0 {
			return p.errAt(at(), "dnn inference needs flops and/or bytes per request")
		}
		if w.MaxBatch == 0 {
			w.MaxBatch = 1
		}
	case "llm":
		if w.Params < 1e6 {
			return p.errAt(at("params"), "llm needs params (model parameters, e.g. 8e9; at least 1e6)")
		}
		if w.MaxBatch > 4096 {
			return p.errAt(at("max_batch"), "llm max_batch must be at most 4096")
		}
		if w.WeightsBytes == 0 {
			w.WeightsBytes = ByteSize(2 * w.Params) // bf16
		}
		if w.KVBytesPerToken == 0 {
			// 2 (K,V) x layers x kv heads x head dim x 2 bytes, scaled from
			// an 8B model's 128 KiB per token.
			w.KVBytesPerToken = ByteSize(131072 * w.Params / 8e9)
		}
		if w.ContextTokens == 0 {
			w.ContextTokens = 512
		}
		if w.GeneratedTokens == 0 {
			w.GeneratedTokens = 128
		}
		if w.ContextTokens < 0 || w.GeneratedTokens < 0 {
			return p.errAt(at(), "token counts must be positive")
		}
		if w.MaxBatch == 0 {
			w.MaxBatch = 64
		}
	}
	return nil
}

func defaultMemory(w *WorkloadSpec) ByteSize {
	switch w.Type {
	case "llm":
		// weights plus a KV cache pool for max_batch sequences of average length
		return w.WeightsBytes + ByteSize(float64(w.KVBytesPerToken)*float64(w.MaxBatch)*float64(w.ContextTokens+w.GeneratedTokens)) + 1<<30
	default:
		return w.WeightsBytes + ByteSize(math.Max(w.Bytes, 0)) + 1<<30
	}
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
