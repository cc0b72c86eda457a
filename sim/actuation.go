package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// What control actions cost (docs/calibration.md, actuation):
//
//   - An MPS restart (RestartClient) of an inference client switches to a
//     standby when the domain has the memory for a second copy of the
//     client (weights and KV cache: its whole memory): the standby holds
//     that memory while it warms up (start time plus model load), the
//     client keeps serving, and the switch-over pauses it for the GPU's
//     restart_time. Without the memory it drains: no new admissions,
//     in-flight work finishes or is dropped after the drain timeout, then
//     the process starts again (start time plus model load) while new
//     requests wait.
//   - A training job restarts at once and resumes from its last written
//     checkpoint (one being written is not there yet): the steps since
//     then are lost and redone.
//   - MoveProcess stops the process (everything queued and in flight is
//     lost), loads the model on the target and starts it there.
//   - StopProcess drains, then stops; while stopped, requests fail.
//     StartProcess starts it again (start time plus model load).
//   - DrainMIGInstance stops every process of a MIG instance that way, so
//     that ConfigureMIG is possible once they are gone.

var (
	_ gpu.TenantLifecycleActuator = (*Simulator)(nil)
	_ gpu.MIGDrainActuator        = (*Simulator)(nil)
)

// Action is one control action the simulator accepted and what it cost.
type Action struct {
	Time   time.Time
	Kind   string // "restart-standby", "restart-drain", "restart", "move", "stop", "start", "drain-mig", or the knob set
	Tenant string // the tenant acted on; "" for a GPU-wide setting
	GPU    string // UUID of the GPU (or, for drain-mig, the MIG instance)
	Detail string
	// Paused is how long the tenant did no new work because of the action
	// (a drain, a switch-over, a start); for a stop, until it was started
	// again or the run's end.
	Paused time.Duration
	// Lost counts the requests (training: completed steps) the action
	// lost: in-flight work dropped by a drain timeout, everything queued
	// and in flight at a move or kill, steps since the last checkpoint.
	Lost int
	// Done is false while the action is still in progress.
	Done bool

	ns int64 // Time in the model's ns since start (real time may skip)
}

// maxActions bounds the actions kept (the newest).
const maxActions = 1 << 16

// Actions returns the actions accepted so far (the newest 65,536), oldest
// first, with their costs as known now.
func (s *Simulator) Actions() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Action, len(s.actions))
	copy(out, s.actions)
	for i := range out {
		if a := &out[i]; !a.Done && a.Kind == "stop" {
			a.Paused = time.Duration(s.now - a.ns)
		}
	}
	return out
}

// action records an accepted action on GPU g (t may be nil) and returns
// its id.
func (s *Simulator) action(kind, uuid string, t *tenant, detail string) int {
	if len(s.actions) >= 2*maxActions {
		n := copy(s.actions, s.actions[len(s.actions)-maxActions:])
		s.actBase += len(s.actions) - n
		s.actions = s.actions[:n]
	}
	a := Action{Time: s.at(s.now), ns: s.now, Kind: kind, GPU: uuid, Detail: detail, Done: true}
	if t != nil {
		a.Tenant = t.spec.Name
	}
	s.actions = append(s.actions, a)
	return s.actBase + len(s.actions) - 1
}

// actionOf returns the action with this id, or nil when it is gone.
func (s *Simulator) actionOf(id int) *Action {
	if i := id - s.actBase; id >= 0 && i >= 0 && i < len(s.actions) {
		return &s.actions[i]
	}
	return nil
}

// begin makes action id t's action in progress.
func (s *Simulator) begin(t *tenant, id int) {
	t.act = id
	if a := s.actionOf(id); a != nil {
		a.Done = false
	}
}

// finish ends t's action in progress: the tenant works again from resume.
func (s *Simulator) finish(t *tenant, resume int64) {
	if a := s.actionOf(t.act); a != nil {
		a.Paused = time.Duration(resume - a.ns)
		a.Done = true
	}
	t.act = -1
}

// endAction abandons whatever action is in progress on t (its process is
// gone).
func (s *Simulator) endAction(t *tenant) {
	s.unwarm(t)
	t.draining = false
	if t.act >= 0 {
		s.finish(t, s.now)
	}
}

// startCost is how long a start of t's process by a control call takes:
// the hook's latency, the fixed start time and the model load.
func (s *Simulator) startCost(t *tenant) int64 {
	load := float64(t.w.WeightsBytes)
	if t.w.Type == "training" {
		load = float64(t.spec.Memory) // the checkpoint: weights and optimizer state
	}
	return int64(*s.sc.Control.Actuators.Hook.Latency) + int64(s.sc.Control.MigrationTime) + int64(load/float64(s.sc.Control.LoadBandwidth)*1e9)
}

// kill ends t's process at once: everything queued and in flight is lost;
// a training job loses its steps as any death of its process does
// (lostSteps). It returns what was lost.
func (s *Simulator) kill(t *tenant) int {
	lost := t.queued() + len(t.seqs)
	if t.w.Type == "training" {
		lost = s.lostSteps(t)
	}
	t.drop()
	s.unwarm(t)
	t.draining = false
	return lost
}

// lostSteps is what a training job loses when its process dies, however
// it dies (killed by a control call, OOM on a new context, its GPU lost,
// stopped by the scenario): the steps since its last written checkpoint
// and those of a write in progress, which saves nothing and ends with the
// process. They are redone; it returns how many. Of anything else it
// returns 0.
func (s *Simulator) lostSteps(t *tenant) int {
	if t.w.Type != "training" {
		return 0
	}
	lost := t.sinceCkpt
	if s.now < t.ckptEnd {
		lost += t.writing
		if t.pause == t.ckptEnd {
			t.pause = s.now // the write ends with the process
		}
	}
	t.redo += lost
	t.sinceCkpt, t.writing, t.ckptEnd = 0, 0, 0
	return lost
}

// resume makes t run again from at with a new context.
func (s *Simulator) resume(t *tenant, at int64) {
	t.pause = max(t.pause, at)
	t.lastCkpt = t.pause
	t.setMPSEff()
}

func (s *Simulator) restartClient(g *gpuState, t *tenant) error {
	pid := t.spec.Process.PID
	if !t.alive {
		return s.startProcess(g, t)
	}
	if t.standby || t.draining {
		return fmt.Errorf("sim: client %d: a restart or stop is in progress: %w", pid, gpu.ErrBusy)
	}
	if msg := s.memCheck(t); msg != "" {
		s.oom(t, s.now, msg)
		return fmt.Errorf("sim: client %d failed to restart: %s", pid, msg)
	}
	cost := s.startCost(t)
	switch {
	case t.w.Type == "training":
		id := s.action("restart", g.uuid, t, "killed; resumes from its last checkpoint")
		lost := s.kill(t)
		s.resume(t, s.now+cost)
		if a := s.actionOf(id); a != nil {
			a.Lost, a.Paused = lost, time.Duration(cost)
		}
	case t.dom.memFree(nil) >= int64(t.spec.Memory):
		t.standby, t.switchAt = true, s.now+cost
		t.dom.rewarm(s)
		s.begin(t, s.action("restart-standby", g.uuid, t,
			fmt.Sprintf("standby holds a second %d bytes and keeps %.0f%% of the SMs busy while it warms for %v",
				t.spec.Memory, 100*t.dom.warm, time.Duration(cost))))
	case s.sc.Control.StandbyFallback == FallbackRefuse:
		return noStandby(pid, int64(t.spec.Memory), t.dom.memFree(nil))
	default:
		t.draining, t.drainStop, t.drainSwap, t.drainEnd = true, false, false, s.now+int64(s.sc.Control.DrainTimeout)
		s.begin(t, s.action("restart-drain", g.uuid, t,
			fmt.Sprintf("no memory for a standby: drains (timeout %v), then starts in %v", s.sc.Control.DrainTimeout, time.Duration(cost))))
		s.checkDrain(t, s.now)
	}
	return nil
}

// switchOver hands t's work to its warmed standby at now. An LLM's
// KV cache stays with the old engine: its in-flight sequences are dropped
// or, with switchover drain, finish there first while nothing new is
// admitted (restarts.go).
func (s *Simulator) switchOver(t *tenant, now int64) {
	s.unwarm(t)
	if t.w.Type == "llm" && (len(t.seqs) > 0 || t.job.active) {
		if s.switchover(t) == SwitchoverDrain {
			t.draining, t.drainStop, t.drainSwap, t.drainEnd = true, false, true, now+int64(s.sc.Control.DrainTimeout)
			s.checkDrain(t, now)
			return
		}
		lost := len(t.seqs)
		t.loseSeqs()
		t.seqs = t.seqs[:0]
		t.job = job{}
		if a := s.actionOf(t.act); a != nil {
			a.Lost += lost
		}
	}
	s.swap(t, now, now)
}

// swap starts t's standby context at now, after a pause since from.
func (s *Simulator) swap(t *tenant, from, now int64) {
	at := now + int64(t.dom.g.spec.MPS.RestartTime)
	s.resume(t, at)
	if a := s.actionOf(t.act); a != nil {
		a.Paused, a.Done = time.Duration(at-from), true
	}
	t.act = -1
}

// unwarm ends t's standby, if any.
func (s *Simulator) unwarm(t *tenant) {
	if t.standby {
		t.standby = false
		t.dom.rewarm(s)
	}
}

// checkDrain ends t's drain once nothing is in flight or the drain
// timeout has passed (dropping what is still in flight), then restarts or
// stops the process.
func (s *Simulator) checkDrain(t *tenant, now int64) {
	inflight := t.job.active || len(t.seqs) > 0
	if !t.draining || (inflight && now < t.drainEnd) {
		return
	}
	lost := len(t.seqs)
	t.loseSeqs()
	if t.w.Type == "dnn" && t.job.active {
		lost = t.job.n
		t.qhead += t.job.n // the batch was the head of the queue
		t.dropped += lost
	}
	t.seqs = t.seqs[:0]
	t.job = job{}
	t.draining = false
	if a := s.actionOf(t.act); a != nil {
		a.Lost += lost
	}
	if t.drainStop {
		s.halt(t)
		return
	}
	if t.drainSwap {
		t.drainSwap = false
		s.swap(t, t.drainEnd-int64(s.sc.Control.DrainTimeout), now)
		return
	}
	at := now + s.startCost(t)
	s.resume(t, at)
	s.finish(t, at)
}

// halt stops t's process after a control stop: its memory is free and its
// clients' requests fail until StartProcess.
func (s *Simulator) halt(t *tenant) {
	t.failQueued()
	t.alive, t.refusing, t.wantRun = false, true, false
	s.unwarm(t)
	t.draining = false
}

// stopProcess drains t, then stops it (a training job stops at once,
// resuming from its last checkpoint when started again).
func (s *Simulator) stopProcess(g *gpuState, t *tenant, kind string) error {
	if !t.alive {
		return nil
	}
	if t.standby || t.draining {
		return fmt.Errorf("sim: PID %d: a restart or stop is in progress: %w", t.spec.Process.PID, gpu.ErrBusy)
	}
	uuid := g.uuid
	if t.inst >= 0 {
		uuid = g.migs[t.inst].uuid
	}
	s.begin(t, s.action(kind, uuid, t, fmt.Sprintf("drains (timeout %v), then stops", s.sc.Control.DrainTimeout)))
	if t.w.Type == "training" {
		if a := s.actionOf(t.act); a != nil {
			a.Lost = s.kill(t)
		}
		s.halt(t)
		return nil
	}
	t.draining, t.drainStop, t.drainEnd = true, true, s.now+int64(s.sc.Control.DrainTimeout)
	s.checkDrain(t, s.now)
	return nil
}

// startProcess starts a stopped t where it is placed (on a MIG GPU: its
// instance when it fits, else the one with most free memory).
func (s *Simulator) startProcess(g *gpuState, t *tenant) error {
	if g.mode == gpu.SharingMIG && t.dom.memFree(t) < int64(t.spec.Memory) {
		best, bestFree := -1, int64(-1)
		for i, d := range g.domains {
			if f := d.memFree(t); f >= int64(t.spec.Memory) && f > bestFree {
				best, bestFree = i, f
			}
		}
		if best >= 0 {
			t.inst = best
			s.placeAll()
		}
	}
	t.wantRun = true
	if !s.startTenant(t, s.now) {
		return fmt.Errorf("sim: PID %d failed to start on %s: out of memory", t.spec.Process.PID, g.uuid)
	}
	// the previous stop's pause ends when this start's does
	id := s.prevStop(t)
	cost := s.startCost(t)
	s.resume(t, s.now+cost)
	a := s.actionOf(s.action("start", g.uuid, t, fmt.Sprintf("starts in %v (model load)", time.Duration(cost))))
	a.Paused = time.Duration(cost)
	if p := s.actionOf(id); p != nil {
		p.Paused, p.Done = time.Duration(s.now+cost-p.ns), true
	}
	return nil
}

// prevStop returns the id of t's unfinished stop, or -1.
func (s *Simulator) prevStop(t *tenant) int {
	id := t.act
	t.act = -1
	if a := s.actionOf(id); a != nil && a.Kind != "stop" && a.Kind != "drain-mig" {
		return -1
	}
	return id
}

// tenantOnGPU makes a hook call and finds the process pid and its GPU,
// with the lock held.
func (s *Simulator) tenantOnGPU(ctx context.Context, pid uint32) (*gpuState, *tenant, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.syncClock()
	if err := s.call(viaHook); err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	t := s.tenantByPID(pid)
	if t == nil {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("sim: no process with PID %d", pid)
	}
	g := s.gpus[t.gpu]
	if g.lost {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("sim: GPU %s is lost (fallen off the bus)", g.uuid)
	}
	if g.mode == gpu.SharingVGPU {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("sim: PID %d runs in a VM on a vGPU host: %w", pid, gpu.ErrNotSupported)
	}
	return g, t, nil
}

// StopProcess drains the process pid (no new admissions, in-flight work
// finishes or is dropped after the drain timeout), then stops it; its
// memory is then free, and its clients' requests fail until StartProcess.
func (s *Simulator) StopProcess(ctx context.Context, pid uint32) error {
	g, t, err := s.tenantOnGPU(ctx, pid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.stopProcess(g, t, "stop")
}

// StartProcess starts the stopped process pid again where it is placed:
// it runs after the start time and its model load. Starting a running
// process does nothing.
func (s *Simulator) StartProcess(ctx context.Context, pid uint32) error {
	g, t, err := s.tenantOnGPU(ctx, pid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if t.alive {
		if t.draining && t.drainStop {
			return fmt.Errorf("sim: PID %d is being stopped: %w", pid, gpu.ErrBusy)
		}
		return nil
	}
	return s.startProcess(g, t)
}

// DrainMIGInstance stops every process of the MIG instance instUUID of the
// GPU uuid as StopProcess does; once they are gone, ConfigureMIG can
// change the layout.
func (s *Simulator) DrainMIGInstance(ctx context.Context, uuid, instUUID string) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.call(viaHook); err != nil {
		return err
	}
	if g.mode != gpu.SharingMIG {
		return fmt.Errorf("sim: GPU %s has no MIG instances: %w", uuid, gpu.ErrNotSupported)
	}
	inst := -1
	for i, m := range g.migs {
		if m.uuid == instUUID {
			inst = i
		}
	}
	if inst < 0 {
		return fmt.Errorf("sim: GPU %s has no MIG instance %s", uuid, instUUID)
	}
	for _, t := range g.domains[inst].members {
		if t.alive && !(t.draining && t.drainStop) {
			if err := s.stopProcess(g, t, "drain-mig"); err != nil {
				return err
			}
		}
	}
	return nil
}
