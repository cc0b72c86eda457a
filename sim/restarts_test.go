package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// free makes the scenario's actuator calls instant and infallible, for
// tests of other costs.
const free = `actuators: {nvml: {latency: 0s, failure_rate: 0}, nvidia_smi: {latency: 0s, failure_rate: 0}, mps: {latency: 0s, failure_rate: 0}, hook: {latency: 0s, failure_rate: 0}, pause: {latency: 0s, failure_rate: 0}}`

// TestStandbyHoldsMemory: a warming standby holds a second copy of its
// client's memory, so a second restart that would have had room for its
// own standby has none: it starts cold, or, with standby_fallback: refuse,
// fails (the tuner sees an error).
func TestStandbyHoldsMemory(t *testing.T) {
	for _, c := range []struct {
		fallback string
		wantErr  bool
		wantKind string
	}{
		{"", false, "restart-drain"},
		{"refuse", true, ""},
	} {
		t.Run("fallback="+c.fallback, func(t *testing.T) {
			fb := ""
			if c.fallback != "" {
				fb = ", standby_fallback: " + c.fallback
			}
			sc := mustParse(t, fmt.Sprintf(`name: standby
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
control: {%s%s}
tenants:
  - {name: a, process: {pid: 1}, memory: 30GB, workload: {type: dnn, flops: 1e10, weights_bytes: 20GB, arrival: {process: poisson, rate: 10}}}
  - {name: b, process: {pid: 2}, memory: 10GB, workload: {type: dnn, flops: 1e10, weights_bytes: 5GB, arrival: {process: poisson, rate: 10}}}
`, free, fb))
			s := mustNew(t, sc, Options{})
			ctx := context.Background()
			uuid := sc.GPUs[0].UUID
			s.AdvanceTo(s.Now().Add(time.Second))
			if err := s.RestartClient(ctx, uuid, 1, "a"); err != nil {
				t.Fatal(err)
			}
			r, _ := s.Sample(ctx)
			if used := r.Devices[0].MemoryUsedBytes; used < 70e9 {
				t.Errorf("memory used while a's standby warms: %d bytes, want both copies of a (60 GB) and b", used)
			}
			// 79.5 GB - 40 GB in use - 30 GB of standby < b's 10 GB
			err := s.RestartClient(ctx, uuid, 2, "b")
			if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, gpu.ErrBusy)) {
				t.Fatalf("restart of b while a's standby warms: %v, want an error %t", err, c.wantErr)
			}
			acts := s.Actions()
			if acts[0].Kind != "restart-standby" {
				t.Fatalf("a's restart: %+v, want through a standby", acts[0])
			}
			if c.wantKind != "" && (len(acts) != 2 || acts[1].Kind != c.wantKind) {
				t.Fatalf("b's restart: %+v, want %s", acts, c.wantKind)
			}
			if c.wantKind == "" && len(acts) != 1 {
				t.Fatalf("refused restart recorded an action: %+v", acts)
			}
		})
	}
}

// TestWarmupCompetesForSMs: a standby's warm-up is GPU work: a saturating
// neighbour on the same MPS GPU does less while it warms (warmup_load 0
// leaves it alone).
func TestWarmupCompetesForSMs(t *testing.T) {
	work := func(load string) float64 {
		sc := mustParse(t, fmt.Sprintf(`name: warm
gpus: [{model: H100-SXM5-80GB, sharing: mps, locked_clocks: {min: 1980, max: 1980}}]
control: {migration_time: 10s, warmup_load: %s, %s}
tenants:
  - {name: train, process: {pid: 1}, memory: 10GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 1h}}
  - {name: svc, process: {pid: 2}, memory: 10GB, workload: {type: dnn, flops: 1e9, weights_bytes: 1GB, arrival: {process: poisson, rate: 1}}}
`, load, free))
		s := mustNew(t, sc, Options{})
		s.AdvanceTo(s.Now().Add(time.Second))
		s.Window()
		if err := s.RestartClient(context.Background(), sc.GPUs[0].UUID, 2, "svc"); err != nil {
			t.Fatal(err)
		}
		s.AdvanceTo(s.Now().Add(8 * time.Second)) // within the 10.5 s warm-up
		return s.Window().Tenants[0].Work
	}
	alone, warmed := work("0"), work("0.5")
	t.Logf("training steps in 8 s of the neighbour's warm-up: %.0f with warmup_load 0, %.0f with 0.5", alone, warmed)
	if !(alone > 0) {
		t.Fatalf("training did %v steps with warmup_load 0: no baseline to compare with", alone)
	}
	if got := warmed / alone; !(math.Abs(got-0.5) <= 0.03) {
		t.Errorf("training beside a warming standby (cap 1, warmup_load 0.5) did %.2f of its work, want ~0.5", got)
	}
}

// TestWarmupIsGPUWork: the SMs a warming standby keeps busy are the GPU's
// work: its SM activity shows them, its power and energy pay for them
// and its clock rises for them as for a client's, with a client beside
// the standby (squeezed to what the warm-up leaves) or none busy.
func TestWarmupIsGPUWork(t *testing.T) {
	const train = `
  - {name: train, process: {pid: 1}, memory: 10GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 1h}}`
	for _, c := range []struct {
		name, clocks, load, beside string
		wantSM                     float64 // the GPU's SM activity over the warm-up
	}{
		// the training keeps the 0.01 of the SMs a squeezed client keeps
		{"beside saturating training, warmup_load 1", ", locked_clocks: {min: 1980, max: 1980}", "1", train, 1},
		{"beside saturating training, warmup_load 0.5", ", locked_clocks: {min: 1980, max: 1980}", "0.5", train, 1},
		{"no client busy, warmup_load 0.5, DVFS", "", "0.5", "", 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := mustParse(t, fmt.Sprintf(`name: warm
gpus: [{model: H100-SXM5-80GB, sharing: mps%s}]
control: {migration_time: 10s, warmup_load: %s, %s}
tenants:%s
  - {name: svc, process: {pid: 2}, memory: 10GB, workload: {type: dnn, flops: 1e9, weights_bytes: 1GB, arrival: {process: poisson, rate: 1}}}
`, c.clocks, c.load, free, c.beside))
			s := mustNew(t, sc, Options{})
			s.AdvanceTo(s.Now().Add(time.Second))
			s.Window()
			if err := s.RestartClient(context.Background(), sc.GPUs[0].UUID, 2, "svc"); err != nil {
				t.Fatal(err)
			}
			s.AdvanceTo(s.Now().Add(8 * time.Second)) // within the 10.5 s warm-up
			w := s.Window().GPUs[0]
			g := s.gpus[0]
			// what the GPU draws at its mean clock with that SM activity
			// and no tensor or HBM work: the least the warm-up costs
			floor := g.powerAt(w.SMClockMHz, powSM*c.wantSM, 0)
			t.Logf("SM activity %.3f, %.1f W (at least %.1f W), SM clock %.0f MHz", w.SMActive, w.PowerW, floor, w.SMClockMHz)
			if math.Abs(w.SMActive-c.wantSM) > 0.02 {
				t.Errorf("SM activity over the warm-up %.3f, want %.2f", w.SMActive, c.wantSM)
			}
			if w.PowerW < floor-1 {
				t.Errorf("power over the warm-up %.1f W, below the %.1f W of its SM activity: the warm-up costs no energy", w.PowerW, floor)
			}
			if w.SMClockMHz < 0.95*g.m.MaxClockMHz {
				t.Errorf("SM clock over the warm-up %.0f MHz, want near the maximum %.0f MHz: DVFS sees no demand", w.SMClockMHz, g.m.MaxClockMHz)
			}
		})
	}
}

// TestLLMSwitchoverLosesInFlight: at an LLM's switch-over its KV cache
// stays behind: in-flight requests are dropped (the default) or, with
// switchover drain, finish first while new requests wait.
func TestLLMSwitchoverLosesInFlight(t *testing.T) {
	type out struct {
		lost, dropped, completed int
		paused                   time.Duration
	}
	run := func(mode string) out {
		sw := ""
		if mode != "" {
			sw = ", switchover: " + mode
		}
		sc := mustParse(t, fmt.Sprintf(`name: llm
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
control: {migration_time: 1s, load_bandwidth: 16GB, %s}
tenants:
  - {name: chat, process: {pid: 1}, memory: 30GB, workload: {type: llm, params: 8e9, weights_bytes: 16GB, context_tokens: 512, generated_tokens: 512, fixed_tokens: true, max_batch: 64, arrival: {process: poisson, rate: 8}%s}}
`, free, sw))
		s := mustNew(t, sc, Options{})
		s.AdvanceTo(s.Now().Add(20 * time.Second))
		s.Window()
		if err := s.RestartClient(context.Background(), sc.GPUs[0].UUID, 1, "chat"); err != nil {
			t.Fatal(err)
		}
		s.AdvanceTo(s.Now().Add(30 * time.Second))
		w := s.Window().Tenants[0]
		a := s.Actions()[0]
		if a.Kind != "restart-standby" || !a.Done {
			t.Fatalf("%s: restart %+v, want a finished switch-over to a standby", mode, a)
		}
		return out{a.Lost, w.Dropped, w.Completed, a.Paused}
	}
	drop, drain := run(""), run("drain")
	t.Logf("drop: %+v; drain: %+v", drop, drain)
	if drop.lost == 0 || drop.dropped < drop.lost || drop.paused != 100*time.Microsecond {
		t.Errorf("switch-over dropping in-flight requests: %+v; want requests lost and dropped, a 100 us pause", drop)
	}
	if drain.lost != 0 || drain.dropped != 0 || drain.paused <= time.Second {
		t.Errorf("switch-over draining in-flight requests: %+v; want none lost, a pause of the drain (512 tokens)", drain)
	}
}

// TestCheckpointWritesCost: a training job makes no progress while it
// writes its checkpoint (memory / checkpoint_bandwidth every
// checkpoint_interval).
func TestCheckpointWritesCost(t *testing.T) {
	steps := func(bw string) float64 {
		sc := mustParse(t, fmt.Sprintf(`name: ckpt
gpus: [{model: H100-SXM5-80GB, locked_clocks: {min: 1980, max: 1980}}]
control: {checkpoint_bandwidth: %s}
tenants:
  - {name: train, memory: 20GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 10s}}
`, bw))
		s := mustNew(t, sc, Options{})
		s.AdvanceTo(s.Now().Add(100 * time.Second))
		return s.Window().Tenants[0].Work
	}
	fast, slow := steps("1e15"), steps("2GB") // 10 s to write 20 GB
	t.Logf("steps in 100 s: %.0f writing for 0 s, %.0f writing for 10 s every 10 s", fast, slow)
	if !(fast > 0) {
		t.Fatalf("training did %v steps writing no checkpoint: no baseline to compare with", fast)
	}
	if got := slow / fast; !(math.Abs(got-0.5) <= 0.05) {
		t.Errorf("training writing a 10 s checkpoint every 10 s of work did %.2f of the work, want ~0.5", got)
	}
}

// TestKillDuringCheckpointWrite: a checkpoint counts once its write
// ends: a training job restarted, moved or stopped while it writes loses
// every step since the start (the last checkpoint written), and the write
// ends with the process (a restart's job runs again once started); killed
// after the write, it loses only the steps since the write ended.
func TestKillDuringCheckpointWrite(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		at   time.Duration // the first write runs from about 30 s to 50 s
		kill func(s *Simulator) error
		// the steps lost against those done before the write: all of them,
		// or only the few since it ended
		wantAll bool
	}{
		{"restart 1 s into the write, started in 2 s", 31 * time.Second, func(s *Simulator) error {
			return s.RestartClient(ctx, s.sc.GPUs[0].UUID, 1, "train")
		}, true},
		{"restart 5 s into the write", 35 * time.Second, func(s *Simulator) error {
			return s.RestartClient(ctx, s.sc.GPUs[0].UUID, 1, "train")
		}, true},
		{"move 5 s into the write", 35 * time.Second, func(s *Simulator) error {
			return s.MoveProcess(ctx, 1, s.sc.GPUs[1].UUID)
		}, true},
		{"stop 19 s into the write", 49 * time.Second, func(s *Simulator) error {
			return s.StopProcess(ctx, 1)
		}, true},
		{"restart 5 s after the write", 55 * time.Second, func(s *Simulator) error {
			return s.RestartClient(ctx, s.sc.GPUs[0].UUID, 1, "train")
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := mustParse(t, fmt.Sprintf(`name: ckpt
gpus:
  - {model: H100-SXM5-80GB, sharing: mps, locked_clocks: {min: 1980, max: 1980}}
  - {model: H100-SXM5-80GB, sharing: mps, locked_clocks: {min: 1980, max: 1980}}
control: {checkpoint_bandwidth: 1GB, migration_time: 1s, load_bandwidth: 20GB, %s}
tenants:
  - {name: train, process: {pid: 1}, memory: 20GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 30s}}
`, free))
			s := mustNew(t, sc, Options{})
			s.AdvanceTo(s.Now().Add(29 * time.Second))
			before := s.Window().Tenants[0].Work // (steps until the write)
			s.AdvanceTo(s.Now().Add(c.at - 29*time.Second))
			if err := c.kill(s); err != nil {
				t.Fatal(err)
			}
			acts := s.Actions()
			if len(acts) != 1 {
				t.Fatalf("actions %+v, want one", acts)
			}
			lost := float64(acts[0].Lost)
			t.Logf("%.0f steps by 29 s; %s at %v lost %.0f", before, acts[0].Kind, c.at, lost)
			if c.wantAll && lost < before {
				t.Errorf("killed during the checkpoint write, the job lost %.0f steps; the write saved nothing, want the %.0f or more since the start lost", lost, before)
			}
			if !c.wantAll && !(lost > 0 && lost < before/2) {
				t.Errorf("killed 5 s after the write, the job lost %.0f steps, want the few since the write (the %.0f before it saved)", lost, before)
			}
			if acts[0].Kind == "restart" {
				s.Window()
				s.AdvanceTo(s.Now().Add(10 * time.Second))
				// (a step redone is no work: it takes one from Redo)
				if w := s.Window().Tenants[0]; w.Work == 0 && w.Redo >= acts[0].Lost {
					t.Errorf("restarted at %v (a 2 s start), the job did no step in the 10 s after: it waits for a write that ended with its process", c.at)
				}
			}
		})
	}
}

// TestActuatorCallsCost: a call takes its actuator's latency (the model
// runs on) and fails with its failure rate, from a stream of the seed's:
// the same seed fails the same calls.
func TestActuatorCallsCost(t *testing.T) {
	src := `name: calls
gpus: [{model: H100-SXM5-80GB}]
control: {actuators: {nvml: {latency: 250ms, failure_rate: 0.3}}}
tenants:
  - {name: train, workload: {type: training, flops: 1e12}}
`
	failures := func(seed int64) []int {
		s := mustNew(t, mustParse(t, src), Options{Seed: seed})
		uuid := s.sc.GPUs[0].UUID
		start := s.Now()
		var failed []int
		for i := range 400 {
			err := s.SetPowerLimit(context.Background(), uuid, 600)
			if err != nil {
				if !errors.Is(err, ErrCallFailed) {
					t.Fatal(err)
				}
				failed = append(failed, i)
			}
		}
		if got := s.Now().Sub(start); got != 400*250*time.Millisecond {
			t.Errorf("400 calls of 250 ms took %v of model time", got)
		}
		if n := len(s.Actions()); n != 400-len(failed) {
			t.Errorf("%d actions recorded for %d calls that did not fail", n, 400-len(failed))
		}
		return failed
	}
	a, b, c := failures(1), failures(1), failures(2)
	t.Logf("failed calls: %d of 400 (seed 1), %d (seed 2)", len(a), len(c))
	if math.Abs(float64(len(a))/400-0.3) > 0.07 {
		t.Errorf("%d of 400 calls failed at failure_rate 0.3", len(a))
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the same seed failed different calls")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("seeds 1 and 2 failed the same calls")
	}

	// a failed call changes nothing
	sc := mustParse(t, strings.Replace(src, "failure_rate: 0.3", "failure_rate: 1", 1))
	s := mustNew(t, sc, Options{})
	if err := s.SetPowerLimit(context.Background(), sc.GPUs[0].UUID, 400); !errors.Is(err, ErrCallFailed) {
		t.Fatalf("call at failure_rate 1: %v", err)
	}
	if s.gpus[0].powerLimit != 0 || len(s.Actions()) != 0 {
		t.Errorf("a failed call set the power limit %v, actions %+v", s.gpus[0].powerLimit, s.Actions())
	}
}

// TestEveryCallCosts: each control call takes its actuator's latency (the
// model runs on) and, at failure_rate 1, fails with ErrCallFailed and
// records no action; at failure_rate 0 it succeeds at the latency's end.
func TestEveryCallCosts(t *testing.T) {
	const src = `name: costs
gpus: [{model: H100-SXM5-80GB, sharing: mps}, {model: H100-SXM5-80GB, sharing: mps}]
control: {actuators: {nvml: {latency: 1s, failure_rate: RATE}, nvidia_smi: {latency: 1s, failure_rate: RATE}, mps: {latency: 1s, failure_rate: RATE}, hook: {latency: 1s, failure_rate: RATE}, pause: {latency: 1s, failure_rate: RATE}}}
tenants:
  - {name: train, process: {pid: 1}, memory: 10GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 1h}}
`
	ctx := context.Background()
	for _, c := range []struct {
		name string
		rate string
		call func(s *Simulator, gpus []string) error
	}{
		{"mps fails", "1", func(s *Simulator, g []string) error { return s.SetMPSActiveThreads(ctx, g[0], 1, 0.5) }},
		{"pause fails", "1", func(s *Simulator, g []string) error { return s.SetPauseDuty(ctx, g[0], "train", []uint32{1}, 0.5) }},
		{"pause", "0", func(s *Simulator, g []string) error { return s.SetPauseDuty(ctx, g[0], "train", []uint32{1}, 0.5) }},
		// a hook's latency is part of the start it makes; a failed call
		// makes none and takes it all the same
		{"restart fails", "1", func(s *Simulator, g []string) error { return s.RestartClient(ctx, g[0], 1, "train") }},
		{"move fails", "1", func(s *Simulator, g []string) error { return s.MoveProcess(ctx, 1, g[1]) }},
		{"stop fails", "1", func(s *Simulator, g []string) error { return s.StopProcess(ctx, 1) }},
		{"MIG drain fails", "1", func(s *Simulator, g []string) error { return s.DrainMIGInstance(ctx, g[0], "MIG-none") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := mustParse(t, strings.ReplaceAll(src, "RATE", c.rate))
			s := mustNew(t, sc, Options{})
			s.AdvanceTo(s.Now().Add(time.Second))
			before := s.Now()
			err := c.call(s, []string{sc.GPUs[0].UUID, sc.GPUs[1].UUID})
			took := s.Now().Sub(before)
			t.Logf("%v, took %v", err, took)
			if took != time.Second {
				t.Errorf("the call took %v of model time, want its actuator's latency, 1s", took)
			}
			if c.rate == "1" {
				if !errors.Is(err, ErrCallFailed) {
					t.Errorf("at failure_rate 1: %v, want ErrCallFailed", err)
				}
				if len(s.Actions()) != 0 {
					t.Errorf("a failed call recorded actions %+v", s.Actions())
				}
				return
			}
			if err != nil {
				t.Errorf("at failure_rate 0: %v", err)
			}
		})
	}
}

// TestControlCostsValidated: the control costs' keys are checked.
func TestControlCostsValidated(t *testing.T) {
	for _, c := range []struct{ control, tenant, want string }{
		{"llm_switchover: keep", "", "unknown llm_switchover"},
		{"standby_fallback: wait", "", "unknown standby_fallback"},
		{"warmup_load: 2", "", "warmup_load"},
		{"actuators: {mps: {failure_rate: 1.5}}", "", "failure_rate"},
		{"actuators: {hook: {latency: -1s}}", "", "latency"},
		{"actuators: {pause: {failure_rate: 2}}", "", "failure_rate must be in [0, 1]"},
		{"", ", switchover: drain", "switchover is drop or drain, for an llm"},
	} {
		src := fmt.Sprintf(`name: bad
gpus: [{model: H100-SXM5-80GB}]
control: {%s}
tenants:
  - {name: train, workload: {type: training, flops: 1e12%s}}
`, c.control, c.tenant)
		_, err := ParseScenario("bad.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("control {%s}%s: %v, want %q", c.control, c.tenant, err, c.want)
		}
	}
}

// TestDeathDuringCheckpointWrite: a training process that dies other than
// by a control call's kill (its GPU falls off the bus, the scenario stops
// it, a restart's new context OOMs) 5 s into its first checkpoint write
// (30-50 s) loses, as a kill does, every step since the start: the write
// saved nothing and ends with the process. Running again from 40 s it
// redoes them; a restart at 55 s finds no checkpoint either (the
// abandoned write's end at 50 s saved nothing), so every step done is
// again to redo.
func TestDeathDuringCheckpointWrite(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		events string
		die    func(s *Simulator) error // at 35 s
		again  func(s *Simulator) error // at 40 s
	}{
		{name: "gpu lost", events: `
  - {at: 35s, action: gpu-lost, gpu: 0}
  - {at: 40s, action: gpu-restored, gpu: 0}`},
		{name: "scenario stop", events: `
  - {at: 35s, tenant: train, action: stop}
  - {at: 40s, tenant: train, action: start}`},
		{name: "restart OOM", die: func(s *Simulator) error {
			uuid := s.sc.GPUs[0].UUID
			if err := s.SetMPSPinnedMemoryLimit(ctx, uuid, 1, 10e9); err != nil {
				return err
			}
			if err := s.RestartClient(ctx, uuid, 1, "train"); err == nil {
				return fmt.Errorf("a restart over the pinned memory limit succeeded")
			}
			return nil
		}, again: func(s *Simulator) error {
			uuid := s.sc.GPUs[0].UUID
			if err := s.SetMPSPinnedMemoryLimit(ctx, uuid, 1, 0); err != nil {
				return err
			}
			return s.StartProcess(ctx, 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			events := ""
			if c.events != "" {
				events = "events:" + c.events
			}
			sc := mustParse(t, fmt.Sprintf(`name: ckpt
gpus:
  - {model: H100-SXM5-80GB, sharing: mps, locked_clocks: {min: 1980, max: 1980}}
control: {checkpoint_bandwidth: 1GB, migration_time: 1s, load_bandwidth: 20GB, %s}
tenants:
  - {name: train, process: {pid: 1}, memory: 20GB, workload: {type: training, flops: 1e12, service_noise: 0, checkpoint_interval: 30s}}
%s
`, free, events))
			s := mustNew(t, sc, Options{})
			// work is the steps done for the first time (a step redone
			// takes one from Redo instead), summed over the windows
			s.AdvanceTo(s.Now().Add(29 * time.Second))
			work := s.Window().Tenants[0].Work // (steps until the write)
			before := work
			s.AdvanceTo(s.Now().Add(6 * time.Second))
			if c.die != nil {
				if err := c.die(s); err != nil {
					t.Fatal(err)
				}
			}
			s.AdvanceTo(s.Now().Add(time.Second))
			w := s.Window().Tenants[0]
			work += w.Work
			t.Logf("%.0f steps by 29 s; dead at 36 s: %.0f steps done, redo %d", before, work, w.Redo)
			if float64(w.Redo) != work {
				t.Errorf("the process died 5 s into the checkpoint write, yet the job redoes %d of its %.0f steps; want all (none written)", w.Redo, work)
			}
			s.AdvanceTo(s.Now().Add(4 * time.Second))
			if c.again != nil {
				if err := c.again(s); err != nil {
					t.Fatal(err)
				}
			}
			s.AdvanceTo(s.Now().Add(15 * time.Second))
			w = s.Window().Tenants[0]
			work += w.Work
			t.Logf("at 55 s: %.0f steps done, redo %d", work, w.Redo)
			if float64(w.Redo) >= work {
				t.Errorf("running again from 40 s, the job redid no step by 55 s (redo %d of %.0f): it waits for a write that ended with its process", w.Redo, work)
			}
			if err := s.RestartClient(ctx, s.sc.GPUs[0].UUID, 1, "train"); err != nil {
				t.Fatal(err)
			}
			w = s.Window().Tenants[0]
			work += w.Work
			t.Logf("restarted at 55 s: %.0f steps done, redo %d", work, w.Redo)
			if float64(w.Redo) != work {
				t.Errorf("restarted with no checkpoint ever written, the job redoes %d of its %.0f steps; want all (the abandoned write saved nothing)", w.Redo, work)
			}
		})
	}
}
