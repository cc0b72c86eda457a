// Package rebalance is the tuner's slow loop planner
// (tuner.RebalancePlanner): moves of tenants between GPUs and MIG
// relayouts, planned from the state and the engine's memory of who missed
// an SLO since when. The engine runs its plans through the guard chain
// and the executor.
package rebalance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Planner is the slow loop: when a latency tenant keeps missing its SLO
// on its GPU and another GPU has room, it plans one tenant move and hands
// it to the host's Rebalancer (or only recommends it). A move costs what a
// restart elsewhere costs (the process stops, loads its model on the
// target, and what it had queued is lost), so it is made only when the
// expected gain outweighs that cost, after a long dwell, and never again
// soon after.
type Planner struct {
	// Every is how often a plan is considered. Default 1 minute.
	Every time.Duration
	// Dwell: a latency tenant must miss its SLO (fast burn above 1) for
	// this long before a move is planned for it. Default 3 minutes.
	Dwell time.Duration
	// CoolDown: after a plan, no other one for this long. Default 10
	// minutes.
	CoolDown time.Duration
	// Hold: a tenant moved is not moved again for this long. Default 30
	// minutes.
	Hold time.Duration
	// LoadCost is the pause a move costs the moved tenant (stop, model
	// load, start). Default 30 s.
	LoadCost time.Duration
	// Horizon is how long a move's gain is expected to last. Default 30
	// minutes.
	Horizon time.Duration
	// MaxBusy: a GPU takes a tenant only while its SM activity is at most
	// this. Default 0.6.
	MaxBusy float64
	// MemoryMargin: a GPU takes a tenant only with this many times its
	// memory free. Default 1.1.
	MemoryMargin float64
	// MinRequests: with fewer requests in the fast window a tenant's burn
	// is not trusted. Default 20.
	MinRequests float64
	// RelayoutDwell: a latency tenant in a saturated MIG instance must
	// miss its SLO for this long before its GPU's instances are
	// relayouted. Default 1 minute: with the instance's own SM activity
	// measured at its ceiling, the miss is a lack of SMs, not a burst.
	RelayoutDwell time.Duration
	// SaturatedBusy: a MIG instance is saturated at this measured SM
	// activity. Default 0.75: a kernel that fills only part of the SMs
	// (a small batch, a grid smaller than the instance) keeps SM activity
	// below 1 however long the queue.
	SaturatedBusy float64
	// FitBusy: an instance's SM use fits a profile when it is at most this
	// fraction of the profile's SMs. Default 0.8.
	FitBusy float64
}

// Default returns the slow loop with its defaults.
func Default() *Planner {
	return &Planner{Every: time.Minute, Dwell: 3 * time.Minute, CoolDown: 10 * time.Minute, Hold: 30 * time.Minute,
		LoadCost: 30 * time.Second, Horizon: 30 * time.Minute, MaxBusy: 0.6, MemoryMargin: 1.1, MinRequests: 20,
		RelayoutDwell: time.Minute, SaturatedBusy: 0.75, FitBusy: 0.8}
}

// Period returns Every (RebalancePlanner).
func (r *Planner) Period() time.Duration { return r.Every }

// MoveHold returns Hold (RebalancePlanner): a move older than Hold holds
// its tenant no more (held).
func (r *Planner) MoveHold() time.Duration { return r.Hold }

// Missing returns the latency tenants missing their SLO now (fast burn
// above 1 over enough requests), for RebalanceInput.MissingSince.
func (r *Planner) Missing(s *tuner.State) map[string]bool {
	out := map[string]bool{}
	if s == nil || s.Snapshot == nil {
		return out
	}
	for _, slo := range s.Snapshot.SLOs {
		f, ok := s.Fast[slo.Tenant]
		if !ok || f.Total < r.MinRequests {
			continue
		}
		att, _ := f.Attainment()
		if (1-att)/math.Max(1-slo.Quantile, 1e-3) > 1 {
			out[slo.Tenant] = true
		}
	}
	return out
}

// gpuRoom is what a GPU offers a moved tenant.
type gpuRoom struct {
	uuid    string
	busy    float64
	memFree uint64
	missing bool // one of its latency tenants misses its SLO
}

// PlanRebalance is the slow loop's pure decision: at most one tenant
// move (every PID of it), or failing one a MIG relayout (planRelayout),
// with the reason. It returns false when no change is worth making. The tenant moved off a GPU where a latency tenant has
// missed its SLO for Dwell is the busiest batch or best-effort tenant
// there that fits elsewhere; failing one, the missing tenant itself. The
// target is the idlest GPU with the memory, SM room and no SLO missed.
// The expected gain, the missing tenant's bad fraction of its work over
// Horizon (by priority), must exceed twice the cost, LoadCost of the
// moved tenant's work (by priority; a batch job's counted at half). No
// tenant is moved whose pod or systemd service also runs another
// tenant's process (sharesWorkload): the orchestrator moves a workload
// whole, so the move would stop that tenant too, the missing one it is
// meant to relieve, say.
func (r *Planner) PlanRebalance(s *tuner.State, in tuner.RebalanceInput) (gpu.Plan, bool) {
	if s == nil || s.Snapshot == nil || s.Snapshot.Readings == nil {
		return gpu.Plan{}, false
	}
	if !in.LastPlan.IsZero() && s.Now.Sub(in.LastPlan) < r.CoolDown {
		return gpu.Plan{}, false
	}
	snap := s.Snapshot
	info := tuner.InfoByName(snap)
	missing := r.Missing(s)
	rooms := map[string]*gpuRoom{}
	var order []string
	for _, d := range snap.Readings.Devices {
		if !d.Up || d.Mode == gpu.SharingVGPU {
			continue // a VM does not move between vGPU hosts
		}
		room := &gpuRoom{uuid: d.UUID, busy: 1}
		if d.Activity.SMActive != nil {
			room.busy = *d.Activity.SMActive
		}
		if d.MemoryTotalBytes > d.MemoryUsedBytes {
			room.memFree = d.MemoryTotalBytes - d.MemoryUsedBytes
		}
		rooms[d.UUID] = room
		order = append(order, d.UUID)
	}
	tenants := workloadTenants(snap.Usage)
	byGPU := map[string][]tenant.Usage{}
	for _, u := range snap.Usage {
		if _, ok := rooms[u.UUID]; !ok || u.GPUInstance != "" || u.Tenant == tenant.Unassigned || len(u.PIDs) == 0 {
			continue
		}
		byGPU[u.UUID] = append(byGPU[u.UUID], u)
		if missing[u.Tenant] {
			rooms[u.UUID].missing = true
		}
	}
	weight := func(name string, class gpu.TenantClass) float64 {
		w := float64(info[name].Priority + 1)
		if class != gpu.ClassLatency {
			w /= 2
		}
		return w
	}
	// The violators, longest-missing first.
	for _, v := range dwelled(s.Now, r.Dwell, order, byGPU, missing, in.MissingSince) {
		from := v.u.UUID
		if !s.Plannable(from, gpu.KnobPlacement) {
			continue // switched off, or its backend does not list it there
		}
		f := s.Fast[v.u.Tenant]
		att, _ := f.Attainment()
		gain := (1 - att) * weight(v.u.Tenant, gpu.ClassLatency) * r.Horizon.Seconds()
		// Candidates to move: the others on the GPU, busiest first, then
		// the violator itself.
		cands := []tenant.Usage{}
		for _, u := range byGPU[from] {
			if u.Tenant != v.u.Tenant && u.Class != gpu.ClassLatency {
				cands = append(cands, u)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return busyOf(cands[i]) > busyOf(cands[j]) })
		if len(byGPU[from]) > 1 {
			cands = append(cands, v.u)
		}
		for _, c := range cands {
			if r.held(in.Moved, c.Tenant, s.Now) || sharesWorkload(tenants, c) {
				continue
			}
			cost := weight(c.Tenant, c.Class) * r.LoadCost.Seconds()
			if gain <= 2*cost {
				continue
			}
			to := r.target(s, rooms, order, from, c)
			if to == nil {
				continue
			}
			return movePlan(fmt.Sprintf("%s has missed its SLO on GPU %s for %v (%.1f%% of requests within target over the last %v): move %s (%s) to GPU %s (SM activity %.0f%%, %d MiB free); expected gain %.0f s of priority-weighted work over %v against a cost of %.0f s (a %v pause for the model load)",
				v.u.Tenant, from, s.Now.Sub(v.since).Round(time.Second), 100*att, f.Over.Round(time.Second), c.Tenant, c.Class, to.uuid, 100*to.busy, to.memFree>>20, gain, r.Horizon, cost, r.LoadCost), c, to.uuid), true
		}
	}
	if p, ok := r.planSqueezed(s, in, rooms, order, byGPU, tenants, info); ok {
		return p, true
	}
	return r.planRelayout(s, in, missing, weight)
}

// target returns the idlest GPU other than from with room for u, among
// those the tuner may move u onto (State.Receives: not off, and in
// enforce where from is); none where u's memory is not known (the driver
// gave no process's use): room for it cannot be told, and a move into
// too little memory fails the tenant's start.
func (r *Planner) target(s *tuner.State, rooms map[string]*gpuRoom, order []string, from string, u tenant.Usage) *gpuRoom {
	if u.MemoryUnknown {
		return nil
	}
	var best *gpuRoom
	for _, uuid := range order {
		g := rooms[uuid]
		if uuid == from || !s.Receives(from, uuid) || g.missing || g.busy > r.MaxBusy || float64(g.memFree) < r.MemoryMargin*float64(u.MemoryUsedBytes) {
			continue
		}
		if best == nil || g.busy < best.busy {
			best = g
		}
	}
	return best
}

// held reports whether key (a tenant, a GPU) was changed, per last,
// within Hold of now.
func (r *Planner) held(last map[string]time.Time, key string, now time.Time) bool {
	t, ok := last[key]
	return ok && now.Sub(t) < r.Hold
}

// dwelling is a tenant's usage with since when its condition has held.
type dwelling struct {
	u     tenant.Usage
	since time.Time
}

// dwelled returns the usages, GPU by GPU in order, of the tenants in on
// whose condition has held (per since) for dwell or longer, longest first.
func dwelled[V any](now time.Time, dwell time.Duration, order []string, byGPU map[string][]tenant.Usage, on map[string]V, since map[string]time.Time) []dwelling {
	var out []dwelling
	for _, uuid := range order {
		for _, u := range byGPU[uuid] {
			_, isOn := on[u.Tenant]
			t, ok := since[u.Tenant]
			if isOn && ok && now.Sub(t) >= dwell {
				out = append(out, dwelling{u, t})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].since.Before(out[j].since) })
	return out
}

// movePlan is the plan that moves every PID of u to the GPU to: one move
// per workload, named by its pod or systemd service where the attribution
// knows it (the orchestrator moves those; a workload of several processes
// lists them all in PIDs), else by the PID alone.
func movePlan(reason string, u tenant.Usage, to string) gpu.Plan {
	p := gpu.Plan{Reason: reason}
	seen := map[string][]int{} // workload -> its moves
	for _, pid := range u.PIDs {
		m := gpu.Move{Tenant: u.Tenant, PID: pid, FromUUID: u.UUID, ToUUID: to}
		key := fmt.Sprintf("pid %d", pid)
		if i, ok := slices.BinarySearchFunc(u.Workloads, pid, func(w tenant.Workload, pid uint32) int { return cmp.Compare(w.PID, pid) }); ok {
			w := u.Workloads[i]
			m.Pod, m.Unit = w.Pod, w.Unit
			if k := workloadKey(w); k != "" {
				key = k
			}
		}
		// pods of one name and two UIDs (one replaced under its name
		// while the other's processes still run) are two moves: each
		// names its UID, which only its pod's eviction meets. A process
		// whose pod UID is not known joins the name's first move.
		i := slices.IndexFunc(seen[key], func(i int) bool { return sameUID(p.Moves[i].Pod, m.Pod) })
		if i < 0 {
			seen[key] = append(seen[key], len(p.Moves))
			p.Moves = append(p.Moves, m)
			continue
		}
		i = seen[key][i]
		if mv := &p.Moves[i]; mv.Pod != nil && mv.Pod.UID == "" {
			mv.Pod = m.Pod // its UID, where known
		}
		if mv := &p.Moves[i]; len(mv.PIDs) == 0 {
			mv.PIDs = []uint32{mv.PID, pid}
		} else {
			mv.PIDs = append(mv.PIDs, pid)
		}
	}
	return p
}

// sameUID says whether a process of pod b may join a move of pod a: they
// are not pods of two UIDs (nil for none, "" for one not known).
func sameUID(a, b *gpu.Pod) bool {
	return a == nil || b == nil || a.UID == "" || b.UID == "" || a.UID == b.UID
}

// workloadKey names the workload w as a move does: its pod, else its
// systemd service; "" for a process with neither (moved by its PID).
func workloadKey(w tenant.Workload) string {
	switch {
	case w.Pod != nil:
		return "pod " + w.Pod.Namespace + "/" + w.Pod.Name
	case w.Unit != "":
		return "unit " + w.Unit
	}
	return ""
}

// workloadTenants maps each workload of the usages (workloadKey: a pod,
// a systemd service) to the tenants with a process in it, on whatever
// GPU, the unassigned processes' included.
func workloadTenants(usage []tenant.Usage) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, u := range usage {
		for _, w := range u.Workloads {
			if k := workloadKey(w); k != "" {
				if out[k] == nil {
					out[k] = map[string]bool{}
				}
				out[k][u.Tenant] = true
			}
		}
	}
	return out
}

// sharesWorkload reports whether a workload of u (its pod, its systemd
// service; per tenants, workloadTenants) runs a process of another
// tenant, or one of no tenant, too: a move of u evicts the pod, or
// restarts the service, whole, stopping that process as well. (The
// attribution is per process: a container or an executable selector can
// give a helper in a latency tenant's pod to a batch tenant.)
func sharesWorkload(tenants map[string]map[string]bool, u tenant.Usage) bool {
	for _, w := range u.Workloads {
		for name := range tenants[workloadKey(w)] {
			if name != u.Tenant {
				return true
			}
		}
	}
	return false
}

// busyOf is a tenant's SM activity on its GPU (0 when unknown).
func busyOf(u tenant.Usage) float64 {
	if u.SMActive != nil {
		return *u.SMActive
	}
	return 0
}
