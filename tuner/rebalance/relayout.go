package rebalance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// migInstance is what the relayout planner knows of one MIG instance.
type migInstance struct {
	profile string
	sms     int
	memory  uint64
	busy    float64 // measured SM activity of the instance, 0-1
	used    uint64  // memory its tenants use
	// memUnknown: a tenant's memory is not known (Usage.MemoryUnknown)
	memUnknown bool
	tenants    []tenant.Usage
}

// demand is the SMs the instance's work keeps busy.
func (m migInstance) demand() float64 { return m.busy * float64(m.sms) }

// planRelayout is the MIG half of PlanRebalance: on a MIG GPU where a
// latency tenant has missed its SLO for RelayoutDwell in an instance
// whose SMs are saturated (its measured SM activity at least
// SaturatedBusy), while another instance of the same GPU runs with room
// (its SM use would fit in the saturated instance's share at FitBusy),
// it plans the GPU's instances with their profiles exchanged: the
// permutation of the current profiles that gives the missing tenant's
// instance the most SMs while every other instance's SM use and memory
// fit its new profile. Every instance is drained and restarted, so the
// cost is LoadCost of every tenant on the GPU (by priority), against the
// missing tenant's bad fraction over Horizon.
func (r *Planner) planRelayout(s *tuner.State, in tuner.RebalanceInput, missing map[string]bool, weight func(string, gpu.TenantClass) float64) (gpu.Plan, bool) {
	for _, d := range s.Snapshot.Readings.Devices {
		if !d.Up || d.Mode != gpu.SharingMIG || len(d.MIG) < 2 {
			continue
		}
		if r.held(in.Relayouts, d.UUID, s.Now) || !s.Plannable(d.UUID, gpu.KnobMIGLayout) {
			continue
		}
		if slices.ContainsFunc(d.MIG, func(m gpu.MIGInstance) bool { return m.ProfileBuilt }) {
			continue // a profile's name may have lost its variant: a layout of such names would set other profiles
		}
		insts := make([]migInstance, len(d.MIG))
		byGI := map[string]int{}
		for i, m := range d.MIG {
			insts[i] = migInstance{profile: m.Profile, sms: m.SMCount, memory: m.MemoryTotalBytes, busy: -1}
			if m.Activity.SMActive != nil {
				insts[i].busy = *m.Activity.SMActive
			}
			byGI[strconv.Itoa(m.GPUInstanceID)] = i
		}
		for _, u := range s.Snapshot.Usage {
			i, ok := byGI[u.GPUInstance]
			if u.UUID != d.UUID || u.GPUInstance == "" || !ok || u.Tenant == tenant.Unassigned || len(u.PIDs) == 0 {
				continue
			}
			insts[i].tenants = append(insts[i].tenants, u)
			insts[i].used += u.MemoryUsedBytes
			insts[i].memUnknown = insts[i].memUnknown || u.MemoryUnknown
		}
		if slices.ContainsFunc(insts, func(m migInstance) bool { return m.busy < 0 || m.sms == 0 || m.memUnknown }) {
			continue // the instances' use (SMs, or a tenant's memory) is not measured: nothing to fit by
		}
		for v, vi := range insts {
			if vi.busy < r.SaturatedBusy {
				continue
			}
			for _, u := range vi.tenants {
				since, ok := in.MissingSince[u.Tenant]
				if u.Class != gpu.ClassLatency || !missing[u.Tenant] || !ok || s.Now.Sub(since) < r.RelayoutDwell {
					continue
				}
				p, ok := r.relayoutFor(s, d, insts, v, u, since, weight)
				if ok {
					return p, true
				}
			}
		}
	}
	return gpu.Plan{}, false
}

// relayoutFor plans the best permutation for the missing tenant u of
// instance v, or returns false when none fits or the gain does not pay.
func (r *Planner) relayoutFor(s *tuner.State, d gpu.Device, insts []migInstance, v int, u tenant.Usage, since time.Time, weight func(string, gpu.TenantClass) float64) (gpu.Plan, bool) {
	profiles := make([]int, len(insts)) // the new instance i gets insts[profiles[i]]'s profile
	for i := range profiles {
		profiles[i] = i
	}
	var best []int
	for _, perm := range permutationsOf(profiles) {
		to := insts[perm[v]]
		if to.sms <= insts[v].sms || (best != nil && to.sms <= insts[best[v]].sms) {
			continue
		}
		fits := true
		for i, m := range insts {
			n := insts[perm[i]]
			if m.used > n.memory || (i != v && m.demand() > r.FitBusy*float64(n.sms)) {
				fits = false
			}
		}
		if fits {
			best = perm
		}
	}
	if best == nil {
		return gpu.Plan{}, false
	}
	f := s.Fast[u.Tenant]
	att, _ := f.Attainment()
	gain := (1 - att) * weight(u.Tenant, gpu.ClassLatency) * r.Horizon.Seconds()
	cost := 0.0
	var who []string
	for _, m := range insts {
		for _, t := range m.tenants {
			cost += weight(t.Tenant, t.Class) * r.LoadCost.Seconds()
			who = append(who, t.Tenant)
		}
	}
	if gain <= 2*cost {
		return gpu.Plan{}, false
	}
	cur := make([]string, len(insts))
	next := make([]string, len(insts))
	var fit []string
	for i, m := range insts {
		cur[i], next[i] = m.profile, insts[best[i]].profile
		if i != v && len(m.tenants) > 0 {
			fit = append(fit, fmt.Sprintf("the %s instance's %.0f%% SM use (%.0f SMs) fits the %s one's %d SMs",
				m.profile, 100*m.busy, m.demand(), next[i], insts[best[i]].sms))
		}
	}
	reason := fmt.Sprintf("%s has missed its SLO on GPU %s for %v (%.1f%% of requests within target over the last %v) in its %s MIG instance, whose SMs are saturated (SM activity %.0f%% of %d SMs), while %s: relayout the GPU from %s to %s, so that %s gets %d SMs; every instance is drained and its tenants (%s) restarted; expected gain %.0f s of priority-weighted work over %v against a cost of %.0f s (a %v pause each)",
		u.Tenant, d.UUID, s.Now.Sub(since).Round(time.Second), 100*att, f.Over.Round(time.Second), insts[v].profile, 100*insts[v].busy, insts[v].sms,
		strings.Join(fit, " and "), tuner.LayoutOf(cur), tuner.LayoutOf(next), u.Tenant, insts[best[v]].sms, strings.Join(who, ", "), gain, r.Horizon, cost, r.LoadCost)
	return gpu.Plan{Reason: reason, MIG: []gpu.MIGLayoutPlan{{UUID: d.UUID, Profiles: next}}}, true
}

// permutationsOf returns every order of xs.
func permutationsOf(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutationsOf(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}
