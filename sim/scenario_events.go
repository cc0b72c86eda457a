package sim

import (
	"cmp"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// validateEvents checks the scenario's events (names: the tenants' indexes
// by name), sorts them by time and moves the health events aside.
func (p *parser) validateEvents(sc *Scenario, names map[string]int) error {
	for i := range sc.Events {
		e := &sc.Events[i]
		at := func(k ...any) []any { return append([]any{"events", i}, k...) }
		if !yamlconf.Has(p.root, at("at")...) {
			return p.errAt(at(), "an event needs at: its time from the start (0s for the start itself)")
		}
		if e.At < 0 {
			return p.errAt(at("at"), "event time must not be negative")
		}
		// (a run is at most maxDuration long: a later event never comes)
		if err := p.checkDurations([]durationAt{{at("at"), e.At}}); err != nil {
			return err
		}
		if e.Action == "" {
			e.Action = "rate"
		}
		e.tenant = -1
		switch e.Action {
		case "rate", "start", "stop":
			idx, ok := names[e.Tenant]
			if !ok {
				return p.errAt(at("tenant"), "event for unknown tenant %q", e.Tenant)
			}
			e.tenant = idx
			if e.GPU != nil {
				return p.errAt(at("gpu"), "a %s event names a tenant, not a GPU", e.Action)
			}
		case "xid", "gpu-lost", "gpu-restored":
			if e.GPU == nil || *e.GPU < 0 || *e.GPU >= len(sc.GPUs) {
				return p.errAt(at(), "a %s event needs gpu: an index below %d", e.Action, len(sc.GPUs))
			}
			if e.Tenant != "" {
				idx, ok := names[e.Tenant]
				if !ok || e.Action != "xid" {
					return p.errAt(at("tenant"), "event for unknown tenant %q", e.Tenant)
				}
				e.tenant = idx
			}
			if e.Action == "xid" && e.Code == 0 {
				return p.errAt(at(), "an xid event needs code: the XID number")
			}
		case actionNVLinkCRCErrors, actionNVLinkReplays, actionPCIeReplays, actionRowRemapPending, actionRowRemapFailure, actionPageRetired:
			if err := p.validateHealthEvent(sc, e, at); err != nil {
				return err
			}
		default:
			return p.errAt(at("action"), "unknown event action %q (rate, start, stop, xid, gpu-lost, gpu-restored, %s, %s, %s, %s, %s, %s)", e.Action,
				actionNVLinkCRCErrors, actionNVLinkReplays, actionPCIeReplays, actionRowRemapPending, actionRowRemapFailure, actionPageRetired)
		}
		switch e.Action {
		case "rate", "start", "stop":
			if e.Code != 0 {
				return p.errAt(at("code"), "an event of action %s has no code", e.Action)
			}
		}
		switch e.Action {
		case "start", "stop", "xid", "gpu-lost", "gpu-restored":
			if e.Rate != 0 {
				return p.errAt(at("rate"), "an event of action %s has no rate", e.Action)
			}
		case "rate":
			if !yamlconf.Has(p.root, at("rate")...) {
				return p.errAt(at(), "a rate event needs rate: the tenant's requests a second from then on (0 stops its arrivals); or an action (start, stop, ...)")
			}
		}
		if e.Action == "rate" {
			if !(e.Rate >= 0 && e.Rate <= 1e6) {
				return p.errAt(at("rate"), "rate must be in [0, 1e6]")
			}
			w := sc.Tenants[e.tenant].Workload.Arrival.Process
			if w == "trace" || w == "closed" {
				return p.errAt(at("rate"), "a rate event needs a poisson or bursty arrival process, tenant %s has %s", e.Tenant, w)
			}
		}
	}
	// Events apply in time order; equal times keep file order.
	slices.SortStableFunc(sc.Events, func(a, b EventSpec) int { return cmp.Compare(a.At, b.At) })
	// Health events change readings only: out of the events that cut the
	// engine's steps, so that they cannot change what the workloads do.
	sc.health = nil
	sc.Events = slices.DeleteFunc(sc.Events, func(e EventSpec) bool {
		if isHealthAction(e.Action) {
			sc.health = append(sc.health, e)
			return true
		}
		return false
	})
	return nil
}

// validateHealthEvent checks a health event: a GPU, no tenant, a rate (for
// the rising counters only) of at most 1e6 per second.
func (p *parser) validateHealthEvent(sc *Scenario, e *EventSpec, at func(k ...any) []any) error {
	if e.GPU == nil || *e.GPU < 0 || *e.GPU >= len(sc.GPUs) {
		return p.errAt(at(), "a %s event needs gpu: an index below %d", e.Action, len(sc.GPUs))
	}
	if e.Tenant != "" {
		return p.errAt(at("tenant"), "a %s event names a GPU, not a tenant", e.Action)
	}
	if e.Code != 0 {
		return p.errAt(at("code"), "a %s event has no code", e.Action)
	}
	if !ratedHealthAction(e.Action) {
		if e.Rate != 0 {
			return p.errAt(at("rate"), "a %s event has no rate", e.Action)
		}
		return nil
	}
	if !(e.Rate >= 0 && e.Rate <= 1e6) {
		return p.errAt(at("rate"), "rate must be in [0, 1e6] per second")
	}
	return nil
}
