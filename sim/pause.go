package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Pausing a tenant (gpu.PauseActuator), as the host's freezer does: for
// duty of every PausePeriod, starting when the duty is set, the tenant's
// processes are stopped on the host, so the tenant launches no new work.
// What it queued on the GPU already runs to completion: the queue depth is
// one job for every workload type (a training step, an LLM iteration, a
// DNN batch; docs/calibration.md), so the pause takes effect up to one job
// late. The paused tenant loses the work it did not launch; nothing else
// is charged (no restart, no lost state), and its neighbours get the GPU
// time it leaves. A training job's checkpoint write is the process's own
// host work, which the freezer stops too: it progresses only while the
// tenant is not frozen, so a pause stretches it, and the steps it saves
// stay unsaved (lost on a death) that much longer.

var (
	_ gpu.PauseActuator = (*Simulator)(nil)
	_ gpu.PauseReporter = (*Simulator)(nil)
)

// PausePeriod is the simulated pulse period (the host's default).
const PausePeriod = 500 * time.Millisecond

// SetPauseDuty pauses the tenant's processes for duty of every period; 0
// resumes them. The call is the pause actuator's (control.actuators.pause:
// the freezer's write returns at once, the freeze completes a little
// later): it takes its latency and may fail, and the duty applies at its
// end.
func (s *Simulator) SetPauseDuty(ctx context.Context, uuid, name string, pids []uint32, duty float64) error {
	if math.IsNaN(duty) || duty < 0 || duty >= 1 {
		return fmt.Errorf("sim: pause duty %v outside [0, 1)", duty)
	}
	if _, err := s.lockGPU(ctx, uuid); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var ts []*tenant
	for _, pid := range pids {
		t, err := s.pausable(pid)
		if err != nil {
			return fmt.Errorf("sim: %w (tenant %s not paused)", err, name)
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return fmt.Errorf("sim: tenant %s: no processes to pause", name)
	}
	if err := s.call(viaPause); err != nil {
		return err
	}
	s.setPause(name, uuid, ts, duty)
	s.action(string(gpu.KnobPauseDuty), uuid, ts[0], strconv.FormatFloat(duty, 'f', 3, 64))
	return nil
}

// pausable is the tenant a pause of pid stops: the VM's whose process on
// the host pid is, or the process's; a process inside a VM is the guest's
// and is refused, as the host has no such process.
func (s *Simulator) pausable(pid uint32) (*tenant, error) {
	for _, t := range s.tenants {
		if t.spec.VM.HostPID == pid {
			return t, nil
		}
	}
	t := s.tenantByPID(pid)
	if t == nil {
		return nil, fmt.Errorf("no process with PID %d", pid)
	}
	if s.gpus[t.gpu].mode == gpu.SharingVGPU {
		return nil, fmt.Errorf("PID %d runs inside VM %s: a VM is paused through its process on the host (PID %d)", pid, t.spec.VM.Name, t.spec.VM.HostPID)
	}
	return t, nil
}

// frozenTill is the end of the paused phase t is in at now, or 0 when it
// is not paused.
func (t *tenant) frozenTill(now int64) int64 {
	if t.duty == 0 || now < t.pulseBase {
		return 0
	}
	period := int64(PausePeriod)
	start := now - (now-t.pulseBase)%period
	if end := start + t.frozenPart(); now < end {
		return end
	}
	return 0
}

// frozenPart is how long t is frozen at the start of each period.
func (t *tenant) frozenPart() int64 {
	return int64(t.duty * float64(PausePeriod))
}

// thawedTo is how long t is not frozen from its pulse base to x (before
// the base, where nothing is frozen, minus the time from x to the base).
func (t *tenant) thawedTo(x int64) int64 {
	if t.duty == 0 || x < t.pulseBase {
		return x - t.pulseBase
	}
	period, frozen := int64(PausePeriod), t.frozenPart()
	k, r := (x-t.pulseBase)/period, (x-t.pulseBase)%period
	return k*(period-frozen) + max(0, r-frozen)
}

// thawedAfter is the first time at which t has not been frozen for d
// since now: when host work of t's own (a checkpoint write), which the
// freezer stops as it stops everything of t's on the host, started at now
// and taking d, ends.
func (t *tenant) thawedAfter(now, d int64) int64 {
	u := t.thawedTo(now) + d
	if t.duty == 0 || u <= 0 {
		return t.pulseBase + u
	}
	period, frozen := int64(PausePeriod), t.frozenPart()
	open := period - frozen
	k := (u - 1) / open // the period in which the u-th thawed ns falls
	if k >= (math.MaxInt64-t.pulseBase)/period-1 {
		return math.MaxInt64 // (a duty so near 1 that the write outlasts int64's time)
	}
	return max(now, t.pulseBase+k*period+frozen+u-k*open) // (a write of 0 ends at now, frozen or not)
}

// rePause moves the end of t's checkpoint write in progress at now to
// where a new pause (duty and pulseBase, which set applies) puts it: the
// write has as much thawed time left to go as it had.
func (t *tenant) rePause(now int64, set func()) {
	if now >= t.ckptEnd {
		set()
		return
	}
	left := t.thawedTo(t.ckptEnd) - t.thawedTo(now)
	set()
	end := t.thawedAfter(now, left)
	if t.pause == t.ckptEnd {
		t.pause = end
	}
	if t.lastCkpt == t.ckptEnd {
		t.lastCkpt = end // the next interval starts when the write ends
	}
	t.ckptEnd = end
}

// pausedTenant is a tenant name's pause, as the host's pause actuator
// holds it: the duty each GPU asks for and the processes it named.
type pausedTenant struct {
	duties map[string]float64   // by GPU UUID, above 0
	procs  map[string][]*tenant // by GPU UUID
}

// duty is the largest duty p's GPUs ask for: the one its processes run.
func (p *pausedTenant) duty() float64 {
	d := 0.0
	for _, v := range p.duties {
		d = max(d, v)
	}
	return d
}

// setPause sets the duty uuid asks for of the tenant name, whose
// processes are ts. As on a host, a tenant is paused as a whole: every
// process any of its GPUs named runs the largest duty they ask for, and
// one no GPU names any more (a duty of 0 names it) is thawed.
func (s *Simulator) setPause(name, uuid string, ts []*tenant, duty float64) {
	p := s.pauses[name]
	if p == nil {
		p = &pausedTenant{duties: map[string]float64{}, procs: map[string][]*tenant{}}
	}
	touched := slices.Clone(ts)
	for _, pts := range p.procs {
		touched = append(touched, pts...)
	}
	if duty == 0 {
		delete(p.duties, uuid)
		delete(p.procs, uuid)
	} else {
		p.duties[uuid], p.procs[uuid] = duty, ts
	}
	d := p.duty()
	for _, t := range touched {
		td := 0.0
		for _, pts := range p.procs {
			if slices.Contains(pts, t) {
				td = d
			}
		}
		t.rePause(s.now, func() { t.duty, t.pulseBase = td, s.now })
	}
	if s.pauses == nil {
		s.pauses = map[string]*pausedTenant{}
	}
	s.pauses[name] = p
	if len(p.duties) == 0 {
		delete(s.pauses, name)
	}
}

// PausesInForce implements gpu.PauseReporter: each tenant name paused,
// for each GPU that asks for its pause, at the largest duty its GPUs ask
// for (the simulator's freeze never fails). Sorted by tenant and GPU.
func (s *Simulator) PausesInForce() []gpu.PauseInForce {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gpu.PauseInForce
	for _, name := range slices.Sorted(maps.Keys(s.pauses)) {
		p := s.pauses[name]
		d := p.duty()
		for _, uuid := range slices.Sorted(maps.Keys(p.duties)) {
			out = append(out, gpu.PauseInForce{UUID: uuid, Tenant: name, Duty: d})
		}
	}
	return out
}

// PauseFreezeFailures implements gpu.PauseReporter: none.
func (s *Simulator) PauseFreezeFailures() map[string]uint64 { return nil }

// PausePeriod implements gpu.PauseReporter.
func (s *Simulator) PausePeriod() time.Duration { return PausePeriod }
