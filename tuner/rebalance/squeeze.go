package rebalance

import (
	"fmt"
	"math"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// squeezeMargin: a batch or best-effort tenant whose MPS caps add up to
// less than its share.max by at least this is squeezed.
const squeezeMargin = 0.25

// Squeezed returns the batch and best-effort tenants of MPS GPUs whose
// share of the SMs, their caps (State.MPSFraction: pending, else read,
// else in effect per the MPS actuator, else 1) added up and
// less the part of each period they are paused (pause_duty), is less than
// their share.max by squeezeMargin or more, with that share: tenants held
// back to protect a latency tenant beside them. The fast loop cannot give
// them their share back where they are; a GPU with room can.
func (r *Planner) Squeezed(s *tuner.State) map[string]float64 {
	out := map[string]float64{}
	if s == nil || s.Snapshot == nil || s.Snapshot.Readings == nil {
		return out
	}
	info := tuner.InfoByName(s.Snapshot)
	for _, d := range s.Snapshot.Readings.Devices {
		if !d.Up || d.Mode != gpu.SharingMPS {
			continue
		}
		caps := map[uint32]float64{}
		for _, p := range d.Processes {
			caps[p.PID] = float64(s.MPSFraction(tuner.Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: p.PID}, p.MPSActiveThreads))
		}
		for _, u := range s.Snapshot.Usage {
			if u.UUID != d.UUID || u.GPUInstance != "" || u.Class == gpu.ClassLatency || u.Tenant == tenant.Unassigned || len(u.PIDs) == 0 {
				continue
			}
			sum, known := 0.0, true
			for _, pid := range u.PIDs {
				c, ok := caps[pid]
				known = known && ok
				sum += c
			}
			if !known {
				continue // a process the device does not list: its cap is unknown
			}
			sum *= 1 - pausedOn(s, d.UUID, u.Tenant)
			if sum <= shareMax(info, u.Tenant)-squeezeMargin {
				out[u.Tenant] = sum
			}
		}
	}
	return out
}

// pausedOn is the part of each period tenant is paused on the GPU uuid,
// 0 where it is not.
func pausedOn(s *tuner.State, uuid, tenant string) float64 {
	if t, ok := s.PauseTarget(uuid, tenant); ok {
		return float64(s.PauseDuty(t))
	}
	return 0
}

// planSqueezed plans the move of a tenant squeezed for Dwell to the
// idlest GPU with room, when the work the squeeze costs it over Horizon
// outweighs twice the move's cost (LoadCost plus what a restart costs it),
// and no other tenant runs in its workloads (tenants: sharesWorkload).
func (r *Planner) planSqueezed(s *tuner.State, in tuner.RebalanceInput, rooms map[string]*gpuRoom, order []string, byGPU map[string][]tenant.Usage, tenants map[string]map[string]bool, info map[string]tenant.Info) (gpu.Plan, bool) {
	squeezed := r.Squeezed(s)
	for _, c := range dwelled(s.Now, r.Dwell, order, byGPU, squeezed, in.SqueezedSince) {
		if r.held(in.Moved, c.u.Tenant, s.Now) || sharesWorkload(tenants, c.u) || !s.Plannable(c.u.UUID, gpu.KnobPlacement) {
			continue
		}
		hi, capped := shareMax(info, c.u.Tenant), squeezed[c.u.Tenant]
		gain := (1 - capped/hi) * r.Horizon.Seconds()
		cost := r.LoadCost + info[c.u.Tenant].RestartCost
		if gain <= 2*cost.Seconds() {
			continue
		}
		to := r.target(s, rooms, order, c.u.UUID, c.u)
		if to == nil {
			continue
		}
		return movePlan(fmt.Sprintf("%s (%s) has been held to %.0f%% of the SMs on GPU %s for %v to protect the latency tenants there (its share.max is %.0f%%): move it to GPU %s (SM activity %.0f%%, %d MiB free), where it can run at its share; expected gain %.0f s of its work over %v against a cost of %.0f s (the model load and a restart)",
			c.u.Tenant, c.u.Class, 100*capped, c.u.UUID, s.Now.Sub(c.since).Round(time.Second), 100*math.Min(hi, 1), to.uuid, 100*to.busy, to.memFree>>20, gain, r.Horizon, cost.Seconds()), c.u, to.uuid), true
	}
	return gpu.Plan{}, false
}

// shareMax is a tenant's share.max, 1 when it has none.
func shareMax(info map[string]tenant.Info, name string) float64 {
	if in, ok := info[name]; ok && in.ShareMax > 0 {
		return in.ShareMax
	}
	return 1
}
