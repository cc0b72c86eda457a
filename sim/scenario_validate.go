package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

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

// Limits on the size of a scenario (docs/simulator.md, Limits). A scenario
// is one host; the simulator's memory and time grow with each of these, so
// that a file over them would take the machine's memory or run for hours:
// it is refused at load instead, the error naming the field.
const (
	// maxGPUs bounds a scenario's GPUs (the largest HGX host has 16).
	maxGPUs = 64
	// maxTenants bounds its tenants: twice the 512 processes of the
	// scrape-latency scale (test/scrape-latency/scale.yaml, 64 a GPU);
	// a run's series holds a row per tenant and step.
	maxTenants = 1024
	// maxQueuedTotal bounds the waiting requests of all tenants together
	// (their max_queue), 10 Mi: maxTenants at the default max_queue fit;
	// an estimated 1.6 GB at the most (40 bytes a request, the queue's growth
	// and the collector's slack).
	maxQueuedTotal = 10 << 20
	// maxMemoryBytes bounds a tenant's memory, given or default, and its
	// weights_bytes: more than any GPU by a thousand times, and small
	// enough that every time and sum the engine makes of it stays in range.
	maxMemoryBytes = 1e15
	// maxKVBytesPerToken bounds an LLM's KV cache per token (a 405B model
	// has about 0.5 MB).
	maxKVBytesPerToken = 1e9
	// maxDuration bounds the scenario's duration and every duration of
	// its parts (a time, a timeout, a drain): a run's series grows with
	// its duration, and a longer wait than a week is none in a run.
	maxDuration = 7 * 24 * time.Hour
	// minBandwidth is the least load_bandwidth and checkpoint_bandwidth,
	// bytes a second.
	minBandwidth = 1e6
	// minBurstRate is the least burst_rate of a bursty arrival process.
	minBurstRate = 1e-3
	// maxVGPUTimeSlice bounds a vGPU host's time slices (max_timeslice,
	// and so min_timeslice and timeslice): NVML's scheduler state and
	// capabilities hold them as nanoseconds in an unsigned int.
	maxVGPUTimeSlice = Duration(math.MaxUint32)
	// maxVMWeight bounds a VM's fixed-share weight, which stands for its
	// vGPU type's share of the GPU: the largest type against the smallest
	// is at most 141 to 1 here (H200-141C against H200-1C).
	maxVMWeight = 1000
	// maxTokens bounds a request's prompt and output tokens: an LLM
	// workload's context_tokens and generated_tokens, and a trace row's.
	maxTokens = 10_000_000
)

// checkDurations refuses a negative duration, or one over maxDuration, of
// those at paths (each a path and its value).
func (p *parser) checkDurations(ds []durationAt) error {
	for _, d := range ds {
		if d.v < 0 || d.v > Duration(maxDuration) {
			return p.errAt(d.path, "%s must be in [0, %v], got %v", d.path[len(d.path)-1], maxDuration, time.Duration(d.v))
		}
	}
	return nil
}

// durationAt is one duration of the scenario and where it is.
type durationAt struct {
	path []any
	v    Duration
}

func (p *parser) validate(sc *Scenario) error {
	if len(sc.GPUs) == 0 {
		return p.errAt([]any{"gpus"}, "a scenario needs at least one GPU under gpus")
	}
	if len(sc.GPUs) > maxGPUs {
		return p.errAt([]any{"gpus", maxGPUs}, "a scenario has at most %d GPUs (one host), this one %d", maxGPUs, len(sc.GPUs))
	}
	if len(sc.Tenants) > maxTenants {
		return p.errAt([]any{"tenants", maxTenants}, "a scenario has at most %d tenants, this one %d", maxTenants, len(sc.Tenants))
	}
	if err := p.checkTexts(sc); err != nil {
		return err
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
		if err := p.unreadGPUKey(g, at); err != nil {
			return err
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
		if g.MPS.DefaultActiveThreads == 0 && !yamlconf.Has(p.root, at("mps", "default_active_threads")...) {
			g.MPS.DefaultActiveThreads = 1
		}
		if !(g.MPS.DefaultActiveThreads > 0 && g.MPS.DefaultActiveThreads <= 1) {
			return p.errAt(at("mps", "default_active_threads"), "default_active_threads must be in (0,1], got %g (leave it out for the default, 1)", g.MPS.DefaultActiveThreads)
		}
		if g.MPS.RestartTime == 0 {
			// See docs/calibration.md, actuation: GSLICE switches to a
			// warmed standby in < 100 us.
			g.MPS.RestartTime = Duration(100 * time.Microsecond)
		}
		if g.DrainTime == 0 {
			g.DrainTime = Duration(2 * time.Second)
		}
		if err := p.checkDurations([]durationAt{
			{at("mig_drain_time"), g.DrainTime},
			{at("mps", "restart_time"), g.MPS.RestartTime},
		}); err != nil {
			return err
		}
		if g.VGPU.Policy == "" {
			g.VGPU.Policy = gpu.VGPUPolicyBestEffort
		} else if !slices.Contains(vgpuPolicies, g.VGPU.Policy) {
			return p.errAt(at("vgpu", "policy"), "unknown vGPU scheduler policy %q (%s)", g.VGPU.Policy, vgpuPolicyList())
		}
		// See docs/calibration.md, vGPU: the default slice and bounds are
		// leads, the 100us floor a guess, the ceiling NVML's.
		if g.VGPU.MinTimeSlice == 0 {
			g.VGPU.MinTimeSlice = Duration(time.Millisecond)
		}
		if g.VGPU.MaxTimeSlice == 0 {
			g.VGPU.MaxTimeSlice = Duration(30 * time.Millisecond)
		}
		if g.VGPU.TimeSlice == 0 {
			g.VGPU.TimeSlice = Duration(2 * time.Millisecond)
		}
		if g.VGPU.MinTimeSlice < Duration(100*time.Microsecond) || g.VGPU.MaxTimeSlice < g.VGPU.MinTimeSlice || g.VGPU.MaxTimeSlice > maxVGPUTimeSlice {
			return p.errAt(at("vgpu"), "vGPU time slice bounds [%v, %v]: min must be at least 100us, max at least min and at most %v (NVML's, nanoseconds in 32 bits)", g.VGPU.MinTimeSlice, g.VGPU.MaxTimeSlice, time.Duration(maxVGPUTimeSlice))
		}
		if g.VGPU.TimeSlice < g.VGPU.MinTimeSlice || g.VGPU.TimeSlice > g.VGPU.MaxTimeSlice {
			return p.errAt(at("vgpu", "timeslice"), "vGPU time slice %v outside [%v, %v]", g.VGPU.TimeSlice, g.VGPU.MinTimeSlice, g.VGPU.MaxTimeSlice)
		}
		if msg := checkARR(&g.VGPU); msg != "" {
			return p.errAt(at("vgpu"), "%s", msg)
		}
		if msg := g.model.lockProblem(g.Clocks.Min, g.Clocks.Max); msg != "" {
			return p.errAt(at("locked_clocks"), "%s", msg)
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
	queued := 0 // the tenants' max_queue so far
	traces := map[string]*trace{}
	traceRows := 0
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
		if t.VM.HostPID != 0 {
			if g.Sharing != string(gpu.SharingVGPU) {
				return p.errAt(at("vm", "host_pid"), "vm.host_pid needs a GPU with sharing: vgpu")
			}
			if pids[t.VM.HostPID] {
				return p.errAt(at("vm", "host_pid"), "duplicate PID %d", t.VM.HostPID)
			}
			pids[t.VM.HostPID] = true
		}
		if err := p.unreadTenantKey(sc, t, g, at); err != nil {
			return err
		}
		if t.Process.UID == nil {
			uid := 1000
			t.Process.UID = &uid
		} else if u := int64(*t.Process.UID); u < 0 || u >= math.MaxUint32 {
			return p.errAt(at("process", "uid"), "uid must be a user ID in [0, %d], got %d", uint32(math.MaxUint32-1), u)
		}
		if t.Process.Executable == "" {
			t.Process.Executable = map[string]string{"llm": "vllm", "training": "python3"}[t.Workload.Type]
			if t.Process.Executable == "" {
				t.Process.Executable = "tritonserver"
			}
		}
		// a pod UID as a tenants file's kubernetes.pod_uid takes it
		if u := t.Process.PodUID; u != "" && !poduid.Valid(u) {
			return p.errAt(at("process", "pod_uid"), "pod_uid %q is not a pod UID (8-4-4-4-12 hex digits, or 32 of a static pod)", u)
		}
		t.Process.PodUID = strings.ToLower(t.Process.PodUID) // the kubelet's case
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
		} else if t.VM.Weight > maxVMWeight {
			return p.errAt(at("vm", "weight"), "vm.weight must be in [1, %d], got %d", maxVMWeight, t.VM.Weight)
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
			case SLOMetricTTFT, SLOMetricITL:
				if t.Workload.Type != "llm" {
					return p.errAt(at("slo", "metric"), "slo metric %s needs an llm workload", t.SLO.Metric)
				}
			default:
				return p.errAt(at("slo", "metric"), "unknown slo metric %q (%s, %s, %s)", t.SLO.Metric, SLOMetricE2E, SLOMetricTTFT, SLOMetricITL)
			}
		}
		if err := p.validateWorkload(sc, i, traces, &traceRows); err != nil {
			return err
		}
		if queued += t.Workload.MaxQueue; queued > maxQueuedTotal {
			return p.errAt(at("workload", "max_queue"), "the tenants' max_queue add up to %d by tenant %s, over the %d waiting requests a scenario may hold (the default is %d a tenant)", queued, t.Name, maxQueuedTotal, defaultMaxQueue)
		}
		if t.Memory == 0 {
			if m := defaultMemoryFloat(&t.Workload); !(m <= maxMemoryBytes) {
				of := "weights_bytes, bytes and 1 GiB of context"
				if t.Workload.Type == "llm" {
					of = "weights and a KV cache for max_batch sequences of context_tokens + generated_tokens"
				}
				return p.errAt(at("memory"), "tenant %s's default memory (%s) is %.7g bytes, over %g: give memory", t.Name, of, m, float64(maxMemoryBytes))
			}
			t.Memory = defaultMemory(&t.Workload)
		}
		if t.Memory > maxMemoryBytes {
			return p.errAt(at("memory"), "memory must be at most %g bytes, got %d", float64(maxMemoryBytes), t.Memory)
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
			// a type that names its size is one of the GPU's (a type that
			// names none is of unknown size, as NVML reads it)
			if g.Sharing == string(gpu.SharingVGPU) && !(strings.HasPrefix(t.VM.Type, g.model.VGPUTypes+"-") && t.VM.fb > 0 && t.VM.fb <= g.model.MemBytes) {
				return p.errAt(at("vm", "type"), "vm.type %q is no vGPU type of an %s: %s-<N>C, N GB of framebuffer, N from 1 to %d", t.VM.Type, g.Model, g.model.VGPUTypes, g.model.MemBytes/gb)
			}
		}
	}
	// the VMs' host processes where the scenario does not name them
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		if t.VM.HostPID != 0 || sc.GPUs[t.GPU].Sharing != string(gpu.SharingVGPU) {
			continue
		}
		pid := uint32(300000 + i)
		for pids[pid] {
			pid++
		}
		t.VM.HostPID, pids[pid] = pid, true
	}
	return p.validateEvents(sc, names)
}

// defaultMaxQueue is a workload's max_queue when it gives none.
const defaultMaxQueue = 10000

// validateWorkload checks tenant i's workload and sets its defaults; a
// trace file is read once for the scenario (traces, by path), and rows
// counts the requests of those read.
func (p *parser) validateWorkload(sc *Scenario, i int, traces map[string]*trace, rows *int) error {
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
		{at("context_tokens"), float64(w.ContextTokens), maxTokens},
		{at("generated_tokens"), float64(w.GeneratedTokens), maxTokens},
		{at("max_batch"), float64(w.MaxBatch), 1e5},
		{at("max_queue"), float64(w.MaxQueue), 1e7},
		{at("arrival", "rate"), a.Rate, 1e6},
		{at("arrival", "burst_rate"), a.BurstRate, 1e6},
		{at("arrival", "speedup"), a.Speedup, 1e4},
		{at("weights_bytes"), float64(w.WeightsBytes), maxMemoryBytes},
		{at("kv_bytes_per_token"), float64(w.KVBytesPerToken), maxKVBytesPerToken},
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
	if w.MaxQueue == 0 && !yamlconf.Has(p.root, at("max_queue")...) {
		w.MaxQueue = defaultMaxQueue
	}
	if w.MaxQueue <= 0 {
		return p.errAt(at("max_queue"), "max_queue must be positive, got %d (leave it out for the default, %d)", w.MaxQueue, defaultMaxQueue)
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
	if err := p.checkDurations([]durationAt{
		{at("min_job_time"), w.MinJobTime},
		{at("timeout"), w.Timeout},
		{at("checkpoint_interval"), w.CheckpointInterval},
		{at("iteration_overhead"), w.IterationOverhead},
		{at("sequence_overhead"), w.SeqOverhead},
		{at("arrival", "burst_mean"), a.BurstMean},
		{at("arrival", "calm_mean"), a.CalmMean},
	}); err != nil {
		return err
	}
	if w.Type != "training" && w.Timeout == 0 {
		if yamlconf.Has(p.root, at("timeout")...) {
			return p.errAt(at("timeout"), "timeout must be positive, got 0 (leave it out for the default, %v; a client that never gives up is not modelled)", defaultTimeout)
		}
		w.Timeout = Duration(defaultTimeout)
	}
	if w.Switchover != "" && (w.Type != "llm" || (w.Switchover != SwitchoverDrop && w.Switchover != SwitchoverDrain)) {
		return p.errAt(at("switchover"), "switchover is drop or drain, for an llm workload")
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
		return p.unreadArrivalKey(a, at)
	}
	switch a.Process {
	case "poisson":
		if a.Rate < 0 {
			return p.errAt(at("arrival", "rate"), "rate must not be negative")
		}
	case "bursty":
		// (a burst brings at least 1e-6 requests on average: drawing the
		// next arrival passes over about 1/(burst_rate x burst_mean)
		// bursts, at 1e-9 a second hours of them)
		if a.BurstRate < minBurstRate || a.BurstMean < Duration(time.Millisecond) || a.CalmMean < Duration(time.Millisecond) {
			return p.errAt(at("arrival"), "bursty arrivals need burst_rate of at least %g, burst_mean and calm_mean of at least 1ms", minBurstRate)
		}
	case "trace":
		if a.File == "" {
			return p.errAt(at("arrival"), "trace arrivals need a file")
		}
		if a.Speedup == 0 && !yamlconf.Has(p.root, at("arrival", "speedup")...) {
			a.Speedup = 1
		}
		if a.Speedup <= 0 {
			return p.errAt(at("arrival", "speedup"), "speedup must be positive, got %g (leave it out for the default, 1)", a.Speedup)
		}
		path := tracePath(p.fsys, sc.File, a.File)
		tr := traces[path]
		if tr == nil {
			var err error
			if tr, err = loadTrace(p.fsys, path, maxTraceRows-*rows); err != nil {
				return p.errAt(at("arrival", "file"), "%v", err)
			}
			traces[path] = tr
			*rows += len(tr.offsets)
		}
		// A replay faster than the arrival rate's limit, looping, would
		// take forever to simulate (a span of 0 would never move on).
		if r := tr.rate(a.Speedup); !(r <= maxTraceRate) {
			return p.errAt(at("arrival", "speedup"), "trace %s replays %d requests in %v: %.3g a second at speedup %g, over the limit of %g (arrival.rate's)", a.File, len(tr.offsets), tr.span, r, a.Speedup, float64(maxTraceRate))
		}
		// A replay so slow that a loop outlasts a drawn time's bound
		// would put its arrivals out of int64's range.
		if d := float64(tr.span) / a.Speedup; !(d <= maxDrawNs) {
			return p.errAt(at("arrival", "speedup"), "trace %s spans %v: at arrival.speedup %g a loop takes %.3g s, over the limit of %.3g s (2^62 ns, about 146 years)", a.File, tr.span, a.Speedup, d/1e9, float64(maxDrawNs)/1e9)
		}
		t.trace = tr
	case "closed":
		return p.errAt(at("arrival", "process"), "closed arrivals are for training workloads")
	case "":
		return p.errAt(at("arrival"), "arrival needs a process (poisson, bursty, trace)")
	default:
		return p.errAt(at("arrival", "process"), "unknown arrival process %q (poisson, bursty, trace)", a.Process)
	}
	if err := p.unreadArrivalKey(a, at); err != nil {
		return err
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
