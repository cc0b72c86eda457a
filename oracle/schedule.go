package oracle

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// reason is the reason of every action of a plan.
const reason = "oracle: best static setting of this phase"

// schedule is a plan as a tuner.Decider: at its first round it decides
// the first phase's settings, and at the first round at or after each
// later phase's start that phase's, as actions the tuner's executor
// applies. It decides only what differs from what was applied before
// (State.Changes); a setting not applied is decided again at the next
// phase. Nothing is decided between phase starts.
type schedule struct {
	plan  *Plan
	start time.Time
	next  int
}

// newSchedule returns the decider of plan p.
func newSchedule(p *Plan) *schedule { return &schedule{plan: p} }

// policy returns the engine policy that runs plan p: the schedule, at
// every snapshot from the first, behind no guard (each setting is asked
// for once, at its phase's start).
func policy(p *Plan) *tuner.TunerPolicy { return tuner.EverySnapshot(newSchedule(p), nil) }

// Name returns the oracle's name.
func (*schedule) Name() string { return Name }

// Decide returns the settings of the phases that started since the last
// round.
func (o *schedule) Decide(s *tuner.State) []tuner.Action {
	if s == nil || s.Snapshot == nil || s.Snapshot.Readings == nil {
		return nil
	}
	if o.next == 0 {
		o.start = s.Now
	}
	h := newHostView(s)
	var out []tuner.Action
	for o.next < len(o.plan.Phases) && !s.Now.Before(o.start.Add(o.plan.Phases[o.next].Start)) {
		out = append(out, h.phase(o.plan.Phases[o.next], o.plan.maxMHz)...)
		o.next++
	}
	return out
}

// hostView is what a round of the schedule knows of the host: the GPUs by
// index, each process's GPU and tenant, and what was set (applied before,
// or decided earlier in this round).
type hostView struct {
	s       *tuner.State
	uuids   []string
	gpuOf   map[uint32]string
	tenants map[uint32]string
	decided map[string]tuner.Value
}

func newHostView(s *tuner.State) *hostView {
	h := &hostView{s: s, gpuOf: map[uint32]string{}, tenants: map[uint32]string{}, decided: map[string]tuner.Value{}}
	for _, d := range s.Snapshot.Readings.Devices {
		if d.Index >= len(h.uuids) {
			h.uuids = append(h.uuids, make([]string, d.Index+1-len(h.uuids))...)
		}
		h.uuids[d.Index] = d.UUID
		for _, p := range d.Processes {
			h.gpuOf[p.PID] = d.UUID
		}
	}
	for _, u := range s.Snapshot.Usage {
		if u.Tenant == tenant.Unassigned {
			continue
		}
		for _, pid := range u.PIDs {
			h.tenants[pid] = u.Tenant
		}
	}
	return h
}

// set returns the target's value as applied before (or decided in this
// round), else def.
func (h *hostView) set(t tuner.Target, def tuner.Value) tuner.Value {
	if v, ok := h.decided[t.String()]; ok {
		return v
	}
	if c, ok := h.s.Changes[t.String()]; ok && c.To != nil {
		return c.To
	}
	return def
}

// action is the change of target to want, unless it is set already.
func (h *hostView) action(g int, t tuner.Target, def, want tuner.Value) (tuner.Action, bool) {
	cur := h.set(t, def)
	if cur == want {
		return tuner.Action{}, false
	}
	h.decided[t.String()] = want
	return tuner.Action{Target: t, GPUIndex: g, Current: cur, Want: want, Reason: reason}, true
}

// phase returns the actions that bring every GPU to ph's settings, GPU by
// GPU: the MPS fractions (by PID, each client restarted), the time slice,
// the MIG layout (a relayout: drain, set, start again), the SM clock.
func (h *hostView) phase(ph phase, maxMHz []uint32) []tuner.Action {
	var out []tuner.Action
	for g, st := range ph.GPUs {
		if g >= len(h.uuids) || h.uuids[g] == "" {
			continue
		}
		uuid := h.uuids[g]
		for _, pid := range slices.Sorted(maps.Keys(st.Caps)) {
			at := h.gpuOf[pid]
			if at == "" {
				at = uuid
			}
			if a, ok := h.action(g, tuner.Target{GPU: at, Knob: gpu.KnobMPSActiveThreads, PID: pid}, tuner.Fraction(1), tuner.Fraction(st.Caps[pid])); ok {
				a.Tenant, a.Restart = h.tenantOf(pid), true
				out = append(out, a)
			}
		}
		if st.TimeSlice != "" {
			if a, ok := h.action(g, tuner.Target{GPU: uuid, Knob: gpu.KnobComputeTimeSlice}, tuner.Level(gpu.TimeSliceDefault), tuner.Level(st.TimeSlice)); ok {
				out = append(out, a)
			}
		}
		if st.Layout != nil {
			want := tuner.LayoutOf(st.Layout)
			out = append(out, tuner.Action{Target: tuner.Target{GPU: uuid, Knob: gpu.KnobMIGLayout}, GPUIndex: g, Want: want, Reason: reason,
				Plan: &gpu.Plan{Reason: reason, MIG: []gpu.MIGLayoutPlan{{UUID: uuid, Profiles: st.Layout}}}})
		}
		if g < len(maxMHz) && maxMHz[g] > 0 {
			want := tuner.ClockRange{}
			if st.Lock {
				want = tuner.ClockRange{MinMHz: maxMHz[g], MaxMHz: maxMHz[g]}
			}
			if a, ok := h.action(g, tuner.Target{GPU: uuid, Knob: gpu.KnobLockedClocks}, tuner.ClockRange{}, want); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

// tenantOf is the tenant of a process, for the MPS restart; its PID where
// no tenant claims it.
func (h *hostView) tenantOf(pid uint32) string {
	if t, ok := h.tenants[pid]; ok {
		return t
	}
	return "pid " + strconv.FormatUint(uint64(pid), 10)
}
