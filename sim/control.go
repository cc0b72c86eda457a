package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The simulator models every sharing mechanism, so it implements every
// actuator.
var (
	_ gpu.Source                = (*Simulator)(nil)
	_ gpu.AppMetricsSource      = (*Simulator)(nil)
	_ gpu.CapabilityLister      = (*Simulator)(nil)
	_ gpu.MPSActuator           = (*Simulator)(nil)
	_ gpu.VGPUSchedulerActuator = (*Simulator)(nil)
	_ gpu.TimeSliceActuator     = (*Simulator)(nil)
	_ gpu.ClockPowerActuator    = (*Simulator)(nil)
	_ gpu.MIGActuator           = (*Simulator)(nil)
	_ gpu.PlacementActuator     = (*Simulator)(nil)
	_ gpu.PauseActuator         = (*Simulator)(nil)
)

func (s *Simulator) gpuByUUID(uuid string) (*gpuState, error) {
	for _, g := range s.gpus {
		if g.uuid == uuid {
			return g, nil
		}
	}
	return nil, fmt.Errorf("sim: no GPU with UUID %q", uuid)
}

func (s *Simulator) tenantByPID(pid uint32) *tenant {
	for _, t := range s.tenants {
		if t.spec.Process.PID == pid {
			return t
		}
	}
	return nil
}

// lockGPU takes the lock, syncs the clock and finds the GPU.
func (s *Simulator) lockGPU(ctx context.Context, uuid string) (*gpuState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.syncClock()
	g, err := s.gpuByUUID(uuid)
	if err == nil && g.lost {
		err = fmt.Errorf("sim: GPU %s is lost (fallen off the bus)", uuid)
	}
	if err != nil {
		s.mu.Unlock()
	}
	return g, err
}

// Capabilities lists the knobs of the GPU with this UUID.
func (s *Simulator) Capabilities(uuid string) []gpu.Knob {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.gpuByUUID(uuid)
	if err != nil {
		return nil
	}
	// the knobs its actuators set: the time slice wherever MPS does not
	// run the contexts (SetComputeTimeSlice; with one exclusive process
	// too, as nvidia-smi sets it whatever the compute mode), the MIG
	// layout where MIG is on (as NVML's backend lists it only in MIG
	// mode), placement where there is somewhere else to go
	k := []gpu.Knob{}
	switch g.mode {
	case gpu.SharingMPS:
		k = append(k, gpu.KnobMPSActiveThreads, gpu.KnobMPSPinnedMemory)
	case gpu.SharingVGPU:
		k = append(k, gpu.KnobVGPUScheduler)
	case gpu.SharingMIG:
		k = append(k, gpu.KnobMIGLayout)
		if g.hasTimeSliced() {
			k = append(k, gpu.KnobComputeTimeSlice)
		}
		if g.hasMPS() {
			k = append(k, gpu.KnobMPSActiveThreads, gpu.KnobMPSPinnedMemory)
		}
		k = append(k, gpu.KnobMIGDrain)
	default: // time-sliced, or exclusive
		k = append(k, gpu.KnobComputeTimeSlice)
	}
	k = append(k, gpu.KnobLockedClocks, gpu.KnobPowerLimit)
	if g.mode != gpu.SharingVGPU {
		if len(s.gpus) > 1 || g.mode == gpu.SharingMIG {
			k = append(k, gpu.KnobPlacement)
		}
		k = append(k, gpu.KnobProcessLifecycle)
	}
	// on a vGPU host, a VM is paused through its process on the host
	k = append(k, gpu.KnobPauseDuty)
	return k
}

// hasMPS says whether MPS runs on g (or in one of its MIG instances).
func (g *gpuState) hasMPS() bool {
	for _, d := range g.domains {
		if d.kind == schedMPS {
			return true
		}
	}
	return false
}

// hasTimeSliced says whether a MIG instance of g time-slices its contexts.
func (g *gpuState) hasTimeSliced() bool {
	for _, d := range g.domains {
		if d.kind == schedTimeSlice {
			return true
		}
	}
	return false
}

// onClient makes a call of actuator via, then runs f with the lock held
// on the MPS client pid of the GPU with this UUID.
func (s *Simulator) onClient(ctx context.Context, uuid string, pid uint32, via actuator, f func(g *gpuState, t *tenant) error) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.call(via); err != nil {
		return err
	}
	t, err := s.mpsClient(g, pid)
	if err != nil {
		return err
	}
	return f(g, t)
}

func (s *Simulator) mpsClient(g *gpuState, pid uint32) (*tenant, error) {
	if !g.hasMPS() {
		return nil, fmt.Errorf("sim: GPU %s runs no MPS server: %w", g.uuid, gpu.ErrNotSupported)
	}
	t := s.tenantByPID(pid)
	if t == nil || t.gpu != g.idx || t.dom.kind != schedMPS {
		return nil, fmt.Errorf("sim: no MPS client with PID %d on GPU %s", pid, g.uuid)
	}
	return t, nil
}

// SetMPSActiveThreads sets the active-thread fraction for the client's next
// context (docs/calibration.md, MPS: fixed when a context is created).
func (s *Simulator) SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error {
	return s.onClient(ctx, uuid, pid, viaMPS, func(g *gpuState, t *tenant) error {
		if !(fraction > 0 && fraction <= 1) {
			return fmt.Errorf("sim: active-thread fraction %g outside (0, 1]", fraction)
		}
		t.mpsPending = fraction
		s.action(string(gpu.KnobMPSActiveThreads), g.uuid, t, fmt.Sprintf("%g for the next context", fraction))
		return nil
	})
}

// SetMPSDefaultActiveThreads sets the default fraction for new clients.
func (s *Simulator) SetMPSDefaultActiveThreads(ctx context.Context, uuid string, fraction float64) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if !g.hasMPS() {
		return fmt.Errorf("sim: GPU %s runs no MPS server: %w", uuid, gpu.ErrNotSupported)
	}
	if !(fraction > 0 && fraction <= 1) {
		return fmt.Errorf("sim: active-thread fraction %g outside (0, 1]", fraction)
	}
	if err := s.call(viaMPS); err != nil {
		return err
	}
	g.mpsDefault = fraction
	s.action(string(gpu.KnobMPSActiveThreads), uuid, nil, fmt.Sprintf("default %g for new contexts", fraction))
	return nil
}

// SetMPSPinnedMemoryLimit limits the device memory the client may pin; the
// limit is checked when the client next creates its context
// (docs/calibration.md, MPS: over the limit = allocation failure).
func (s *Simulator) SetMPSPinnedMemoryLimit(ctx context.Context, uuid string, pid uint32, bytes uint64) error {
	return s.onClient(ctx, uuid, pid, viaMPS, func(g *gpuState, t *tenant) error {
		t.pinned = bytes
		s.action(string(gpu.KnobMPSPinnedMemory), g.uuid, t, fmt.Sprintf("%d bytes", bytes))
		return nil
	})
}

// RestartClient restarts an MPS client so that its new context settings
// apply: through a standby when the memory for a second copy is free,
// else by draining it (see actuation.go for the costs). A restart whose
// memory no longer fits (pinned limit) fails with an OOM event. The
// tenant is known to the simulator by the PID; the argument is unused.
func (s *Simulator) RestartClient(ctx context.Context, uuid string, pid uint32, _ string) error {
	return s.onClient(ctx, uuid, pid, viaHook, func(g *gpuState, t *tenant) error {
		return s.restartClient(g, t)
	})
}

// SetVGPUScheduler changes the vGPU scheduler; refused while VMs run
// (docs/calibration.md, vGPU).
func (s *Simulator) SetVGPUScheduler(ctx context.Context, uuid string, set gpu.VGPUSchedulerSetting) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if g.mode != gpu.SharingVGPU {
		return fmt.Errorf("sim: GPU %s is not a vGPU host: %w", uuid, gpu.ErrNotSupported)
	}
	v := g.vgpu
	if !slices.Contains(vgpuPolicies, set.Policy) {
		return fmt.Errorf("sim: unknown vGPU scheduler policy %q", set.Policy)
	}
	ts := set.TimeSlice
	if ts == 0 {
		ts = 2 * time.Millisecond // the default, a lead (docs/calibration.md, vGPU)
	}
	if ts < time.Duration(v.MinTimeSlice) || ts > time.Duration(v.MaxTimeSlice) {
		return fmt.Errorf("sim: time slice %v outside [%v, %v]", ts, v.MinTimeSlice, v.MaxTimeSlice)
	}
	v.Policy, v.ARR, v.AvgFactor, v.Frequency = set.Policy, set.ARREnabled, set.AvgFactor, set.Frequency
	if msg := checkARR(&v); msg != "" {
		return fmt.Errorf("sim: %s", msg)
	}
	var running []string
	for _, t := range s.tenants {
		if t.alive && t.gpu == g.idx {
			running = append(running, t.spec.VM.Name)
		}
	}
	if len(running) > 0 {
		return fmt.Errorf("sim: vGPU scheduler of %s: VMs running (%s): %w", uuid, strings.Join(running, ", "), gpu.ErrBusy)
	}
	if err := s.call(viaNVML); err != nil {
		return err
	}
	v.TimeSlice = Duration(ts)
	g.vgpu = v
	for _, d := range g.domains {
		d.arrNext = 0
	}
	s.action(string(gpu.KnobVGPUScheduler), uuid, nil, fmt.Sprintf("%s, slice %v, ARR %t", v.Policy, ts, v.ARR))
	return nil
}

// SetComputeTimeSlice sets the compute time-slice level (docs/calibration.md,
// time-slicing); refused where MPS runs the contexts, and on a vGPU host.
// A GPU of one exclusive process takes it, as nvidia-smi compute-policy
// does whatever the compute mode.
func (s *Simulator) SetComputeTimeSlice(ctx context.Context, uuid string, level gpu.TimeSliceLevel) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if msg := g.timeSliceProblem(); msg != "" {
		return fmt.Errorf("sim: %s: %w", msg, gpu.ErrNotSupported)
	}
	d, ok := timeSliceLevels[level]
	if !ok {
		return fmt.Errorf("sim: unknown time-slice level %q (default, short, medium, long)", level)
	}
	if err := s.call(viaNvidiaSMI); err != nil {
		return err
	}
	g.level, g.slice = level, int64(d)
	s.action(string(gpu.KnobComputeTimeSlice), uuid, nil, string(level))
	return nil
}

// timeSliceProblem says why g takes no compute time-slice level, "" when
// it does.
func (g *gpuState) timeSliceProblem() string {
	if g.mode == gpu.SharingVGPU {
		return fmt.Sprintf("GPU %s is a vGPU host; use the vGPU scheduler", g.uuid)
	}
	if g.mode == gpu.SharingMPS || (g.mode == gpu.SharingMIG && !g.hasTimeSliced()) {
		return fmt.Sprintf("GPU %s runs its clients under MPS, where the compute time slice does nothing", g.uuid)
	}
	return ""
}

// LockClocks locks the SM clock range; a zero ClockLock resets it.
func (s *Simulator) LockClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l.MinMHz == 0 && l.MaxMHz == 0 {
		if err := s.call(viaNVML); err != nil {
			return err
		}
		g.lockMin, g.lockMax = 0, 0
		s.action(string(gpu.KnobLockedClocks), uuid, nil, "reset")
		return nil
	}
	if msg := g.m.lockProblem(l.MinMHz, l.MaxMHz); msg != "" {
		return fmt.Errorf("sim: %s", msg)
	}
	if err := s.call(viaNVML); err != nil {
		return err
	}
	g.lockMin, g.lockMax = float64(l.MinMHz), float64(l.MaxMHz)
	s.action(string(gpu.KnobLockedClocks), uuid, nil, fmt.Sprintf("[%d, %d] MHz", l.MinMHz, l.MaxMHz))
	return nil
}

// LockMemoryClocks locks the memory clock; HBM bandwidth scales with it.
func (s *Simulator) LockMemoryClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l.MinMHz == 0 && l.MaxMHz == 0 {
		if err := s.call(viaNVML); err != nil {
			return err
		}
		g.memLock = 0
		s.action("memory_locked_clocks", uuid, nil, "reset")
		return nil
	}
	if l.MinMHz > l.MaxMHz || float64(l.MaxMHz) > g.m.MemClockMHz || l.MaxMHz < uint32(g.m.MemClockMHz/4) {
		return fmt.Errorf("sim: memory clocks [%d, %d] MHz outside [%g, %g]", l.MinMHz, l.MaxMHz, g.m.MemClockMHz/4, g.m.MemClockMHz)
	}
	if err := s.call(viaNVML); err != nil {
		return err
	}
	g.memLock = float64(l.MaxMHz)
	s.action("memory_locked_clocks", uuid, nil, fmt.Sprintf("%d MHz", l.MaxMHz))
	return nil
}

// powerProblem says what is wrong with a power limit of watts on a GPU of
// model m, "" when nothing (0 restores the default).
func (m *gpuModel) powerProblem(watts float64) string {
	if watts != 0 && (watts < 0.3*m.TDPW || watts > m.TDPW) {
		return fmt.Sprintf("power limit %g W outside [%g, %g]", watts, 0.3*m.TDPW, m.TDPW)
	}
	return ""
}

// SetPowerLimit sets the power limit; 0 restores the default.
func (s *Simulator) SetPowerLimit(ctx context.Context, uuid string, watts float64) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if msg := g.m.powerProblem(watts); msg != "" {
		return fmt.Errorf("sim: %s", msg)
	}
	if err := s.call(viaNVML); err != nil {
		return err
	}
	g.powerLimit = watts
	s.action(string(gpu.KnobPowerLimit), uuid, nil, fmt.Sprintf("%g W", watts))
	return nil
}

// ConfigureMIG replaces the GPU's MIG instances; refused (ErrBusy) while
// any instance has processes (docs/calibration.md, MIG; DrainMIGInstance
// empties an instance), and, as NVML's backend, on a GPU whose MIG mode
// is off (time-sliced, exclusive). An empty list disables
// MIG. New instances get new UUIDs and nothing runs for the drain time.
func (s *Simulator) ConfigureMIG(ctx context.Context, uuid string, profiles []string) error {
	g, err := s.lockGPU(ctx, uuid)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if g.mode != gpu.SharingMIG && g.mode != gpu.SharingTimeSlice && g.mode != gpu.SharingExclusive {
		return fmt.Errorf("sim: MIG on a %s GPU: %w", g.mode, gpu.ErrNotSupported)
	}
	if g.mode != gpu.SharingMIG && len(profiles) > 0 {
		// refused as NVML's backend refuses it: turning MIG mode on
		// needs an idle GPU and a reset, which no layout call makes
		return fmt.Errorf("sim: GPU %s: %s: %w", uuid, gpu.MIGModeOffHint(g.idx), gpu.ErrBusy)
	}
	if len(profiles) > 0 {
		if err := g.m.checkMIGLayout(profiles); err != nil {
			return fmt.Errorf("sim: %v", err)
		}
	} else if g.mode != gpu.SharingMIG {
		return nil
	}
	var busy []string
	for _, t := range s.tenants {
		if t.alive && t.gpu == g.idx {
			busy = append(busy, fmt.Sprintf("PID %d", t.spec.Process.PID))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("sim: MIG reconfiguration of %s: processes running (%s): %w", uuid, strings.Join(busy, ", "), gpu.ErrBusy)
	}
	if err := s.call(viaNVML); err != nil {
		return err
	}
	g.migGen++
	g.migs = g.migs[:0]
	if len(profiles) == 0 {
		g.mode = gpu.SharingTimeSlice
	} else {
		g.mode = gpu.SharingMIG
		for i, p := range profiles {
			g.migs = append(g.migs, migInst{profile: g.m.profile(p), uuid: migUUID(g.idx, i, g.migGen), gi: i + 1})
		}
	}
	g.buildDomains()
	s.placeAll()
	g.drainTo = s.now + int64(g.spec.DrainTime)
	id := s.action(string(gpu.KnobMIGLayout), uuid, nil, "["+strings.Join(profiles, ", ")+"]")
	s.actionOf(id).Paused = time.Duration(g.spec.DrainTime)
	s.event(g, gpu.Event{Time: s.at(s.now), Kind: gpu.EventReconf,
		Message: fmt.Sprintf("MIG layout set to [%s]", strings.Join(profiles, ", "))})
	return nil
}

// MoveProcess moves a tenant's workload to another GPU: the process stops
// (what it had queued and in flight is lost; training resumes from its
// last checkpoint), loads its model on the target and starts there, after
// the start time and the load (actuation.go) while new requests wait; on
// a MIG GPU it goes to the instance with the most free memory.
func (s *Simulator) MoveProcess(ctx context.Context, pid uint32, toUUID string) error {
	g, err := s.lockGPU(ctx, toUUID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	t := s.tenantByPID(pid)
	if t == nil {
		return fmt.Errorf("sim: no process with PID %d", pid)
	}
	if g.mode == gpu.SharingVGPU || t.dom.kind == schedVGPU {
		return fmt.Errorf("sim: moving a VM between vGPU hosts: %w", gpu.ErrNotSupported)
	}
	if g.mode == gpu.SharingExclusive {
		for _, o := range s.tenants {
			if o != t && o.alive && o.gpu == g.idx {
				return fmt.Errorf("sim: GPU %s is in exclusive-process mode and runs PID %d: %w", toUUID, o.spec.Process.PID, gpu.ErrBusy)
			}
		}
	}
	best, bestFree := -1, int64(-1)
	for i, d := range g.domains {
		if d == t.dom {
			continue
		}
		if f := d.memFree(t); f >= int64(t.spec.Memory) && f > bestFree {
			best, bestFree = i, f
		}
	}
	if best < 0 {
		return fmt.Errorf("sim: PID %d needs %d bytes; no room on GPU %s", pid, t.spec.Memory, toUUID)
	}
	if err := s.call(viaHook); err != nil {
		return err
	}
	old := t.dom
	from := s.gpus[t.gpu].uuid
	if t.gpu != g.idx {
		// the active-thread value set for this client lives in the
		// source GPU's MPS server; the target's server gives its default
		t.mpsPending = 0
	}
	lost := 0
	if t.alive {
		lost = s.kill(t)
		if t.act >= 0 {
			s.finish(t, s.now)
		}
	}
	t.gpu = g.idx
	t.inst = best
	if g.mode != gpu.SharingMIG {
		t.inst = -1
	}
	if old.cur >= 0 && old.cur < len(old.members) && old.members[old.cur] == t {
		old.cur = -1
	}
	s.placeAll()
	if !t.alive && t.wantRun {
		// a process that died with its GPU (or never fit) starts over there
		s.startTenant(t, s.now)
	}
	if t.alive {
		cost := max(s.now, g.drainTo) + s.startCost(t) - s.now
		s.resume(t, s.now+cost)
		a := s.actionOf(s.action(string(gpu.KnobPlacement), toUUID, t, "from "+from))
		a.Lost, a.Paused = lost, time.Duration(cost)
	}
	return nil
}

// vgpuPolicyList is vgpuPolicies as text, for messages.
func vgpuPolicyList() string {
	names := make([]string, len(vgpuPolicies))
	for i, p := range vgpuPolicies {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}
