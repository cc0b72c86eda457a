package oracle

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// oraclePolicy runs a plan: the first phase's settings at Init, each
// later phase's at its first observation.
type oraclePolicy struct {
	plan  *Plan
	ap    *applier
	start time.Time
	next  int
	init  []tuner.Decision
}

func (*oraclePolicy) Name() string { return Name }

// newPolicy returns the policy that runs plan p on the simulator s (the
// scenario with p's placements), acting through act.
func newPolicy(p *Plan, s *sim.Simulator, act tuner.Actuators) tuner.Policy {
	return &oraclePolicy{plan: p, ap: newApplier(s, act, p.maxMHz)}
}

func (o *oraclePolicy) Init(ctx context.Context, _ tuner.Actuators, snap *tenant.Snapshot) error {
	o.start = snap.Time
	o.init = o.ap.apply(ctx, snap.Time, o.plan.Phases[0])
	o.next = 1
	return ctx.Err()
}

func (o *oraclePolicy) Observe(ctx context.Context, _ tuner.Actuators, snap *tenant.Snapshot) ([]tuner.Decision, error) {
	out := o.init
	o.init = nil
	out = append(out, o.ap.progress(ctx, snap.Time)...)
	for o.next < len(o.plan.Phases) && !snap.Time.Before(o.start.Add(o.plan.Phases[o.next].Start)) {
		out = append(out, o.ap.apply(ctx, snap.Time, o.plan.Phases[o.next])...)
		o.next++
	}
	return out, ctx.Err()
}

// Write prints what the oracle found in sc.
func (p *Plan) Write(w io.Writer, sc *sim.Scenario) {
	fmt.Fprintf(w, "oracle: best static settings found in %d replays\n", p.Replays)
	for _, m := range p.Moves {
		fmt.Fprintf(w, "  placement: %s on GPU %d (from GPU %d)\n", sc.Tenants[m.Tenant].Name, m.To, sc.Tenants[m.Tenant].GPU)
	}
	name := map[uint32]string{}
	for _, t := range sc.Tenants {
		name[t.Process.PID] = t.Name
	}
	for _, ph := range p.Phases {
		fmt.Fprintf(w, "  phase %s-%s:", fmtDur(ph.Start), fmtDur(ph.End))
		for g, s := range ph.GPUs {
			var parts []string
			pids := make([]uint32, 0, len(s.Caps))
			for pid := range s.Caps {
				pids = append(pids, pid)
			}
			sort.Slice(pids, func(i, j int) bool { return name[pids[i]] < name[pids[j]] })
			for _, pid := range pids {
				parts = append(parts, fmt.Sprintf("%s=%s", name[pid], fmtFrac(s.Caps[pid])))
			}
			if s.TimeSlice != "" {
				parts = append(parts, "timeslice="+string(s.TimeSlice))
			}
			if s.VGPU != "" {
				parts = append(parts, "vgpu="+string(s.VGPU))
			}
			if s.Layout != nil {
				parts = append(parts, "mig=["+strings.Join(s.Layout, " ")+"]")
			}
			if s.Lock {
				parts = append(parts, "clock=locked")
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, " gpu%d[%s]", g, strings.Join(parts, " "))
			}
		}
		fmt.Fprintln(w)
	}
}

func fmtDur(d time.Duration) string { return d.String() }
