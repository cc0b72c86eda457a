package simrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Attribution returns, by PID, the tenant of cfg that the tuner
// attributes each process of sc to (tenant.Unassigned where no tenant's
// selectors match it), as a run's snapshots attribute it: from a sample
// of sc at its start, attributed with cfg. A tenant whose process does
// not run at the start (stopped until an event starts it, or stopped
// because it failed to start beside the others) is attributed from a
// sample at the start of a copy of sc in which it alone runs: a
// process's facts (PID, user, executable, pod, cgroup, VM) are its
// spec's whenever it runs, so it is attributed then as it will be once
// started. A process that does not run even alone (its memory does not
// fit its GPU) has no entry: it never runs, so no tenant ever holds it.
func Attribution(sc *sim.Scenario, cfg *tenant.Config) (map[uint32]string, error) {
	out, err := attributeAtStart(sc, cfg)
	if err != nil {
		return nil, err
	}
	for _, t := range sc.Tenants {
		if _, ok := out[t.Process.PID]; ok {
			continue
		}
		alone := *sc
		alone.Events = nil
		alone.Tenants = []sim.TenantSpec{t}
		alone.Tenants[0].Stopped = false
		got, err := attributeAtStart(&alone, cfg)
		if err != nil {
			return nil, err
		}
		if name, ok := got[t.Process.PID]; ok {
			out[t.Process.PID] = name
		}
	}
	return out, nil
}

// attributeAtStart attributes the processes of a sample of sc at its
// start with cfg: by PID, the tenant each is attributed to.
func attributeAtStart(sc *sim.Scenario, cfg *tenant.Config) (map[uint32]string, error) {
	h, err := NewHost(sc, cfg, 0)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	snap, err := NewSnapshots(h, DefaultStep).Take(context.Background())
	if err != nil {
		return nil, err
	}
	out := map[uint32]string{}
	for _, u := range snap.Usage {
		for _, pid := range u.PIDs {
			out[pid] = u.Tenant
		}
	}
	return out, nil
}

// checkAttribution returns an error when the tuner, given cfg, would not
// hold a tenant the scenario judges an SLO of to that SLO for that
// tenant's own processes: its process is attributed to another tenant of
// cfg (or to none), another tenant's process is attributed to the tenant
// of its name (but for one of its clients, clientOf: an unjudged process
// of its pod or cgroup, a sidecar), or its sim:// latency source reads
// another tenant's application. The run would score the tuner on the tenant's SLO while
// the tuner attached that objective to other work. The error names each
// such tenant, where its process landed and what its selectors matched.
func checkAttribution(sc *sim.Scenario, cfg *tenant.Config) error {
	var diffs []string
	for _, t := range sc.Tenants {
		if t.SLO == nil {
			continue
		}
		if app, line := cfg.SimApp(t.Name); app != "" && app != t.Name {
			diffs = append(diffs, fmt.Sprintf("tenant %s: %s reads its latency from sim://%s, another tenant's application: a tenant the scenario judges must read its own (sim://%s)",
				t.Name, sim.FileLine(cfg.File, line), app, t.Name))
		}
	}
	if len(diffs) > 0 {
		return attributionError(sc, diffs)
	}
	by, err := Attribution(sc, cfg)
	if err != nil {
		return err
	}
	held := map[string][]sim.TenantSpec{} // the processes each tenant of cfg holds
	for _, t := range sc.Tenants {
		if name, ok := by[t.Process.PID]; ok {
			held[name] = append(held[name], t)
		}
	}
	for _, t := range sc.Tenants {
		name, ok := by[t.Process.PID]
		if t.SLO == nil || !ok {
			continue
		}
		at := sim.FileLine(cfg.File, tenantLine(cfg, t.Name))
		var others, foreign []string // other processes held; those not t's clients
		for _, o := range held[t.Name] {
			if o.Process.PID == t.Process.PID {
				continue
			}
			others = append(others, owned(o))
			if !clientOf(o, t) {
				foreign = append(foreign, owned(o))
			}
		}
		switch {
		case name != t.Name:
			matched := "no process of the scenario"
			if len(others) > 0 {
				matched = strings.Join(others, ", ") + " process" + plural(len(others))
			}
			landed := "tenant " + name
			if name == tenant.Unassigned {
				landed = "no tenant (" + tenant.Unassigned + ")"
			}
			diffs = append(diffs, fmt.Sprintf("tenant %s: its process (PID %d) is attributed to %s; the selectors of tenant %s (%s) match %s",
				t.Name, t.Process.PID, landed, t.Name, at, matched))
		case len(foreign) > 0:
			diffs = append(diffs, fmt.Sprintf("tenant %s: the selectors of tenant %s (%s) match %s process%s as well as its own (another process may be the tenant's only where the scenario judges no SLO of it and it shares the tenant's pod_uid or cgroup)",
				t.Name, t.Name, at, strings.Join(foreign, ", "), plural(len(foreign))))
		}
	}
	if len(diffs) > 0 {
		return attributionError(sc, diffs)
	}
	return nil
}

// clientOf says whether o's process may be one of judged tenant t's own
// clients, as production attributes a pod's processes to its tenant and
// the tuner splits the tenant's share over them (a sidecar on the GPU):
// the scenario judges no SLO of o, and o shares t's pod or cgroup.
func clientOf(o, t sim.TenantSpec) bool {
	samePod := t.Process.PodUID != "" && o.Process.PodUID == t.Process.PodUID
	sameCgroup := t.Process.Cgroup != "" && o.Process.Cgroup == t.Process.Cgroup
	return o.SLO == nil && (samePod || sameCgroup)
}

// owned names t's process as a tenant's selectors match it.
func owned(t sim.TenantSpec) string { return fmt.Sprintf("%s's (PID %d)", t.Name, t.Process.PID) }

func attributionError(sc *sim.Scenario, diffs []string) error {
	return fmt.Errorf("scenario %s: its tenants file gives the tuner a judged tenant's SLO for other work; each tenant the scenario judges must be, to the tuner, that tenant's own processes and latency:\n  %s",
		sc.Name, strings.Join(diffs, "\n  "))
}

func tenantLine(cfg *tenant.Config, name string) int {
	if t := cfg.TenantByName(name); t != nil {
		return t.Line
	}
	return 0
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}
