package tuner

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// squeezeMargin: a batch or best-effort tenant whose MPS caps add up to
// less than its share.max by at least this is squeezed.
const squeezeMargin = 0.25

// Squeezed returns the batch and best-effort tenants of MPS GPUs whose
// caps (pending, else effective) add up to less than their share.max by
// squeezeMargin or more, with that sum: tenants held back to protect a
// latency tenant beside them. The fast loop cannot give them their share
// back where they are; a GPU with room can.
func (r *Rebalance) Squeezed(s *State) map[string]float64 {
	out := map[string]float64{}
	if s == nil || s.Snapshot == nil || s.Snapshot.Readings == nil {
		return out
	}
	info := map[string]tenant.Info{}
	for _, t := range s.Snapshot.Tenants {
		info[t.Name] = t
	}
	for _, d := range s.Snapshot.Readings.Devices {
		if !d.Up || d.Mode != gpu.SharingMPS {
			continue
		}
		caps := map[uint32]float64{}
		for _, p := range d.Processes {
			c := 1.0
			if p.MPSActiveThreads != nil {
				c = *p.MPSActiveThreads
			}
			if f, ok := s.Pending[Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: p.PID}.String()]; ok {
				c = float64(f)
			}
			caps[p.PID] = c
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
			hi := 1.0
			if in, ok := info[u.Tenant]; ok && in.ShareMax > 0 {
				hi = in.ShareMax
			}
			if sum <= hi-squeezeMargin {
				out[u.Tenant] = sum
			}
		}
	}
	return out
}

// planSqueezed plans the move of a tenant squeezed for Dwell to the
// idlest GPU with room, when the work the squeeze costs it over Horizon
// outweighs twice the move's cost (LoadCost plus what a restart costs it).
func (r *Rebalance) planSqueezed(s *State, in RebalanceInput, rooms map[string]*gpuRoom, order []string, byGPU map[string][]tenant.Usage, info map[string]tenant.Info) (gpu.Plan, bool) {
	squeezed := r.Squeezed(s)
	type cand struct {
		u     tenant.Usage
		cap   float64
		since time.Time
	}
	var cs []cand
	for _, uuid := range order {
		for _, u := range byGPU[uuid] {
			c, ok := squeezed[u.Tenant]
			since, tracked := in.SqueezedSince[u.Tenant]
			if ok && tracked && s.Now.Sub(since) >= r.Dwell {
				cs = append(cs, cand{u, c, since})
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].since.Before(cs[j].since) })
	for _, c := range cs {
		if t, ok := in.Moved[c.u.Tenant]; ok && s.Now.Sub(t) < r.Hold {
			continue
		}
		hi := 1.0
		if in, ok := info[c.u.Tenant]; ok && in.ShareMax > 0 {
			hi = in.ShareMax
		}
		gain := (1 - c.cap/hi) * r.Horizon.Seconds()
		cost := r.LoadCost + info[c.u.Tenant].RestartCost
		if gain <= 2*cost.Seconds() {
			continue
		}
		to := r.target(rooms, order, c.u.UUID, c.u)
		if to == nil {
			continue
		}
		p := gpu.Plan{Reason: fmt.Sprintf("%s (%s) has been held to %.0f%% of the SMs on GPU %s for %v to protect the latency tenants there (its share.max is %.0f%%): move it to GPU %s (SM activity %.0f%%, %d MiB free), where it can run at its share; expected gain %.0f s of its work over %v against a cost of %.0f s (the model load and a restart)",
			c.u.Tenant, c.u.Class, 100*c.cap, c.u.UUID, s.Now.Sub(c.since).Round(time.Second), 100*math.Min(hi, 1), to.uuid, 100*to.busy, to.memFree>>20, gain, r.Horizon, cost.Seconds())}
		for _, pid := range c.u.PIDs {
			p.Moves = append(p.Moves, gpu.Move{Tenant: c.u.Tenant, PID: pid, FromUUID: c.u.UUID, ToUUID: to.uuid})
		}
		return p, true
	}
	return gpu.Plan{}, false
}
