package oracle

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

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

func fmtFrac(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
