package sim

import (
	"cmp"
	"context"
	"fmt"
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
// time it leaves.

var (
	_ gpu.PauseActuator = (*Simulator)(nil)
	_ gpu.PauseReporter = (*Simulator)(nil)
)

// PausePeriod is the simulated pulse period (the host's default).
const PausePeriod = 500 * time.Millisecond

// SetPauseDuty pauses the tenant's processes for duty of every period; 0
// resumes them.
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
	for _, t := range ts {
		t.duty, t.pulseBase, t.pausedAs, t.pausedFor = duty, s.now, name, uuid
	}
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
	if end := start + int64(t.duty*float64(period)); now < end {
		return end
	}
	return 0
}

// PausesInForce implements gpu.PauseReporter: each pause as set (the
// simulator's freeze never fails), by tenant name and GPU.
func (s *Simulator) PausesInForce() []gpu.PauseInForce {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gpu.PauseInForce
	for _, t := range s.tenants {
		in := gpu.PauseInForce{UUID: t.pausedFor, Tenant: t.pausedAs, Duty: t.duty}
		if t.duty > 0 && !slices.Contains(out, in) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b gpu.PauseInForce) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.UUID, b.UUID))
	})
	return out
}

// PauseFreezeFailures implements gpu.PauseReporter: none.
func (s *Simulator) PauseFreezeFailures() map[string]uint64 { return nil }
