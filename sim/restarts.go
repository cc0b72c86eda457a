package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// What restarts, checkpoints and actuator calls cost beyond a process
// start (docs/calibration.md, actuation):
//
//   - A standby warms up on the GPU: while it does, it keeps warmup_load
//     of its new SM cap busy, which the MPS domain's running clients lose
//     and the GPU's activity, power and clock show.
//   - An LLM's switch-over loses the old engine's KV cache: its in-flight
//     sequences are dropped ("drop", vLLM's default on SIGTERM) or finish
//     on the old engine while nothing new is admitted ("drain"), after
//     which the standby takes over.
//   - A restart that finds no memory for a standby starts cold (drains,
//     then starts) or, with standby_fallback: refuse, fails.
//   - A training job writes its checkpoint every checkpoint_interval at
//     checkpoint_bandwidth, making no progress while it writes; a pause
//     stretches the write (pause.go).
//   - Every actuator call takes its actuator's latency, during which the
//     GPUs run on, and fails with its failure probability (a seeded
//     stream of its own).

// Switch-over modes of an LLM with in-flight requests.
const (
	SwitchoverDrop  = "drop"
	SwitchoverDrain = "drain"
)

// Standby fallbacks: what a restart does when a standby does not fit.
const (
	FallbackCold   = "cold"
	FallbackRefuse = "refuse"
)

// Defaults (docs/calibration.md, actuation).
const (
	defaultCheckpointBandwidth = 2e9 // bytes/s, lead: NVMe 3-7 GB/s, network storage 1-3 GB/s
	defaultWarmupLoad          = 0.5 // guess: share of its SM cap a warming standby keeps busy
)

// ActuatorCost is what one call of an actuator costs.
type ActuatorCost struct {
	// Latency is how long a call takes; the GPUs run on meanwhile and the
	// change applies at its end. nil selects the actuator's default.
	Latency *Duration `yaml:"latency"`
	// FailureRate is the probability that a call fails (an error, no
	// change); nil selects the actuator's default.
	FailureRate *float64 `yaml:"failure_rate"`
}

// ActuatorCosts holds the cost of a call for each kind of actuator.
type ActuatorCosts struct {
	// NVML: clocks, power limit, MIG layout, vGPU scheduler.
	NVML ActuatorCost `yaml:"nvml"`
	// NvidiaSMI: the compute time slice (nvidia-smi compute-policy).
	NvidiaSMI ActuatorCost `yaml:"nvidia_smi"`
	// MPS: the MPS control daemon (active threads, pinned memory limits).
	MPS ActuatorCost `yaml:"mps"`
	// Hook: the host's hooks (client restart, move, stop, start, MIG
	// instance drain).
	Hook ActuatorCost `yaml:"hook"`
	// Pause: the host's pause actuator (a write of the tenant's cgroup's
	// freezer, or a signal to its processes).
	Pause ActuatorCost `yaml:"pause"`
}

// actuator names a kind of actuator.
type actuator int

const (
	viaNVML actuator = iota
	viaNvidiaSMI
	viaMPS
	viaHook
	viaPause
)

// actuatorDefaults are each actuator's key under control.actuators, its
// name in errors and its default cost: latency and failure probability
// (docs/calibration.md, actuation).
var actuatorDefaults = [...]struct {
	key, name string
	latency   time.Duration
	fail      float64
}{
	viaNVML:      {"nvml", "nvml", 10 * time.Millisecond, 0.001},                   // guess
	viaNvidiaSMI: {"nvidia_smi", "nvidia-smi", 100 * time.Millisecond, 0.001},      // 89 ms measured with persistence; failure: guess
	viaMPS:       {"mps", "nvidia-cuda-mps-control", 10 * time.Millisecond, 0.001}, // guess
	viaHook:      {"hook", "hook", time.Second, 0.01},                              // guess
	viaPause:     {"pause", "pause", 10 * time.Millisecond, 0.001},                 // guess
}

func (c *ActuatorCosts) of(a actuator) *ActuatorCost {
	switch a {
	case viaNVML:
		return &c.NVML
	case viaNvidiaSMI:
		return &c.NvidiaSMI
	case viaMPS:
		return &c.MPS
	case viaHook:
		return &c.Hook
	}
	return &c.Pause
}

// validateControl fills in the control costs' defaults and checks them.
func (p *parser) validateControl(c *ControlSpec) error {
	at := func(k ...any) []any { return append([]any{"control"}, k...) }
	if c.CheckpointBandwidth == 0 {
		c.CheckpointBandwidth = defaultCheckpointBandwidth
	}
	// (at least 1 MB a second: a load or checkpoint of the largest memory,
	// maxMemoryBytes, then takes under 32 years, in int64's nanoseconds)
	for _, b := range []struct {
		key string
		v   ByteSize
	}{{"load_bandwidth", c.LoadBandwidth}, {"checkpoint_bandwidth", c.CheckpointBandwidth}} {
		if b.v < minBandwidth {
			return p.errAt(at(b.key), "%s must be at least %g bytes a second (1MB), got %d", b.key, float64(minBandwidth), b.v)
		}
	}
	if c.WarmupLoad == nil {
		v := defaultWarmupLoad
		c.WarmupLoad = &v
	}
	if !(*c.WarmupLoad >= 0 && *c.WarmupLoad <= 1) {
		return p.errAt(at("warmup_load"), "warmup_load must be in [0, 1]")
	}
	switch c.Switchover {
	case "":
		c.Switchover = SwitchoverDrop
	case SwitchoverDrop, SwitchoverDrain:
	default:
		return p.errAt(at("llm_switchover"), "unknown llm_switchover %q (drop, drain)", c.Switchover)
	}
	switch c.StandbyFallback {
	case "":
		c.StandbyFallback = FallbackCold
	case FallbackCold, FallbackRefuse:
	default:
		return p.errAt(at("standby_fallback"), "unknown standby_fallback %q (cold, refuse)", c.StandbyFallback)
	}
	for a := range actuatorDefaults {
		ac, d := c.Actuators.of(actuator(a)), actuatorDefaults[a]
		if ac.Latency == nil {
			v := Duration(d.latency)
			ac.Latency = &v
		}
		if ac.FailureRate == nil {
			v := d.fail
			ac.FailureRate = &v
		}
		if *ac.Latency < 0 || *ac.Latency > Duration(10*time.Minute) {
			return p.errAt(at("actuators", d.key, "latency"), "an actuator's latency must be in [0, 10m]")
		}
		if !(*ac.FailureRate >= 0 && *ac.FailureRate <= 1) {
			return p.errAt(at("actuators", d.key, "failure_rate"), "failure_rate must be in [0, 1]")
		}
	}
	return nil
}

// switchover is the tenant's switch-over mode: its workload's, else the
// scenario's.
func (s *Simulator) switchover(t *tenant) string {
	if t.w.Switchover != "" {
		return t.w.Switchover
	}
	return s.sc.Control.Switchover
}

// ErrCallFailed is in the error of an actuator call that failed as a
// host's call sometimes does (control.actuators' failure_rate).
var ErrCallFailed = errors.New("actuator call failed")

// call makes one call of actuator a, with the lock held: it takes the
// actuator's latency and then fails with its failure probability, as a
// host's call does. The model runs on during the call (in real-time mode,
// with a Clock, it never runs ahead of the clock, so a call returns at
// once); a hook's latency is part of the start it makes (startCost), so a
// hook call takes it here only when it fails, making no start.
func (s *Simulator) call(a actuator) error {
	c := s.sc.Control.Actuators.of(a)
	wait := func() {
		if lat := int64(*c.Latency); lat > 0 && s.clock == nil {
			s.advance(s.now + lat)
		}
	}
	if a != viaHook {
		wait()
	}
	if p := *c.FailureRate; p > 0 {
		if s.ctl == nil {
			s.ctl = rand.New(rand.NewPCG(uint64(s.seed), streamOf("control")))
		}
		if s.ctl.Float64() < p {
			if a == viaHook {
				wait()
			}
			return fmt.Errorf("sim: %s: %w after %v (failure rate %g)", actuatorDefaults[a].name, ErrCallFailed, time.Duration(*c.Latency), p)
		}
	}
	return nil
}

// rewarm sets d.warm, the share of the domain's SMs its warming standbys
// keep busy: each its new context's SM cap times warmup_load; and
// d.warmOcc, the warp occupancy of those SMs (the standbys' workloads').
func (d *domain) rewarm(s *Simulator) {
	d.warm, d.warmOcc = 0, 0
	for _, m := range d.members {
		if m.standby {
			w := min(m.w.SMFraction, m.contextFraction()) * *s.sc.Control.WarmupLoad
			d.warm += w
			d.warmOcc += w * m.w.Occupancy
		}
	}
	if d.warm > 0 {
		d.warmOcc /= d.warm
	}
	d.warm = min(d.warm, 1)
}

// yieldToWarmup scales the running clients' SM shares down to what the
// warming standbys leave (allocMPS, when d.warm > 0), and sets d.warmOn,
// the share the standbys keep busy beside the clients (the clients keep
// at least 0.01 of the SMs between them).
func (d *domain) yieldToWarmup() {
	used := 0.0
	for _, k := range d.act {
		m := d.members[k]
		used += m.share
	}
	d.warmOn = d.warm
	if free := 1 - d.warm; used > free && used > 0 {
		free = max(free, 0.01)
		f := free / used
		for _, k := range d.act {
			m := d.members[k]
			m.share *= f
		}
		d.warmOn = 1 - free
	}
}

// warming says whether standbys warm on d's SMs: work for the GPU even
// with no client running (the warm-up takes SMs only where MPS shares
// them; runMPS).
func (d *domain) warming() bool { return d.warm > 0 && d.kind == schedMPS }

// warmOver counts the warming standbys' work over dt ns of the step on
// share of the domain's SMs: the GPU does it (its SM activity and
// occupancy, hence its power, energy and clock), no tenant does.
func (d *domain) warmOver(dt int64, share float64) {
	fdt := float64(dt)
	d.step.sm += fdt * share
	d.step.occ += fdt * share * d.warmOcc
}

// checkpointWrite is how long t takes to write a checkpoint (its memory:
// weights and optimizer state) at the checkpoint bandwidth.
func (s *Simulator) checkpointWrite(t *tenant) int64 {
	return int64(float64(t.spec.Memory) / float64(s.sc.Control.CheckpointBandwidth) * 1e9)
}

// noStandby is the error of a restart refused for want of memory for a
// standby (standby_fallback: refuse).
func noStandby(pid uint32, need, free int64) error {
	return fmt.Errorf("sim: client %d: no memory for a standby (%d bytes needed, %d free): %w", pid, need, free, gpu.ErrBusy)
}
